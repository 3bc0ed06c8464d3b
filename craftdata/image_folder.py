"""Your own images: one sub-folder per class (torchvision's ImageFolder layout), read lazily.

``root/<class>/<image>.png|jpg|jpeg``, any size; classes are the sorted sub-folder names.
`load_image_folder` scans the folders (every file checked cheaply, see
`paddlecraft.craftdata.badfiles`) and returns an `ImageFolderData` whose splits decode
images only when a batch asks for them (`paddlecraft.craftdata.BatchLoader`).

Splits: ``test_path`` / ``val_path`` folders with the same class sub-folders, or a seeded,
stratified fraction of the training folder. `ImageFolderData.use_run_dir` writes
the split to ``<run>/data_split.tsv`` (or, when that file exists, adopts it), so a resumed
run and a re-evaluation use the same files even if the folder changed since.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from paddlecraft.craftdata.badfiles import BadDataError, BadFiles, check_image_file, need_path
from paddlecraft.craftdata.digits import Dataset, Split, stratified_split
from paddlecraft.craftdata.images import IMAGE_EXTENSIONS, ImageTransform, decode_image
from paddlecraft.craftdata.loader import LazySplit

__all__ = ["SPLIT_FILE", "ImageFolderData", "ImageFolderSplit", "class_names", "load_image_folder"]

log = logging.getLogger("paddlecraft.data")

SPLIT_FILE = "data_split.tsv"  #: the recorded split in a run folder: split, label, path


def class_names(path: str | os.PathLike, setting: str = "data.path") -> list[str]:
    """The sorted class sub-folders of an image folder (hidden ones left out).

    Raises `BadDataError` naming ``setting`` when the folder is missing or has none.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise BadDataError(
            f"{setting}={str(path)!r}: no such folder. Expected one sub-folder per class: "
            f"{setting}/<class>/<image>.png|jpg"
        )
    names = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    if not names:
        raise BadDataError(
            f"{setting}={str(path)!r} has no class sub-folders. Expected one sub-folder per "
            f"class: {setting}/<class>/<image>.png|jpg"
        )
    return names


@dataclass
class ImageFolderSplit(LazySplit):
    """Image files (relative to ``root``) and their labels; decoded by `load`."""

    root: str
    files: np.ndarray  #: relative paths, bytes [N]
    y: np.ndarray  #: int64 labels [N]
    transform: ImageTransform = field(default_factory=ImageTransform)

    @property
    def augments(self) -> bool:  # type: ignore[override]
        return self.transform.hflip

    def path(self, i: int) -> str:
        return os.path.join(self.root, os.fsdecode(self.files[i]))

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        img = decode_image(self.path(i), self.transform.channels)
        return self.transform(img, rng), self.y[i]  # [C, S, S], label

    def empty_item(self) -> tuple[np.ndarray, ...]:
        return np.zeros(self.transform.shape, np.float32), np.int64(0)


@dataclass
class ImageFolderData:
    """Lazy image splits plus what the arenas read: classes, ``image_shape``, loader settings."""

    train: ImageFolderSplit
    test: ImageFolderSplit
    val: ImageFolderSplit | None
    classes: list[str]
    image_shape: tuple[int, int, int]
    name: str
    workers: int = 2  #: decoding processes per loader
    prefetch: int = 2  #: batches each worker prepares ahead
    bad_files: BadFiles = field(default_factory=BadFiles)
    seed: int = 0
    run_dir: str | None = None

    @property
    def num_classes(self) -> int:
        """How many classes (sub-folders)."""
        return len(self.classes)

    def splits(self) -> dict[str, ImageFolderSplit]:
        """The present splits by name."""
        out = {"train": self.train, "test": self.test}
        if self.val is not None:
            out["val"] = self.val
        return out

    def use_run_dir(self, run_dir: str | os.PathLike) -> None:
        """Record the split in ``run_dir/data_split.tsv``, or adopt the one recorded there."""
        if self.run_dir == str(run_dir):
            return
        self.run_dir = str(run_dir)
        record = Path(run_dir) / SPLIT_FILE
        if record.is_file():
            self._adopt(record)
            return
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(f".{os.getpid()}.tmp")  # data-parallel ranks write alike
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            for name, split in self.splits().items():
                for i in range(len(split)):
                    w.writerow((name, int(split.y[i]), split.path(i)))
        os.replace(tmp, record)

    def _adopt(self, record: Path) -> None:
        rows: dict[str, tuple[list[str], list[int]]] = {}
        with open(record, newline="", encoding="utf-8") as f:
            for name, label, path in csv.reader(f, delimiter="\t"):
                files, labels = rows.setdefault(name, ([], []))
                files.append(path)
                labels.append(int(label))
        for name, (files, labels) in rows.items():
            keep = []
            for k, p in enumerate(files):
                problem = check_image_file(p)
                if problem is None:
                    keep.append(k)
                else:
                    self.bad_files.found(p, f"{problem} (listed in {record})")
            split = ImageFolderSplit(
                "",
                np.array([os.fsencode(files[k]) for k in keep], dtype=bytes),
                np.array([labels[k] for k in keep], np.int64),
                self.train.transform if name == "train" else self.test.transform,
            )
            setattr(self, name, split)
        log.info("data: using the split recorded in %s", record)


def _decode_all(split: ImageFolderSplit, workers: int, prefetch: int, bad: BadFiles) -> Split:
    """Every image of ``split`` decoded (in order, no augmentation) into one array."""
    from paddlecraft.craftdata.loader import BatchLoader

    plain = ImageFolderSplit(
        split.root, split.files, split.y, replace(split.transform, hflip=False)
    )
    loader = BatchLoader(plain, 256, shuffle=False, workers=workers, prefetch=prefetch,
                         bad_files=bad)  # fmt: skip
    xs, ys = zip(*loader.epoch(0))
    return Split(np.concatenate(xs), np.concatenate(ys).astype(np.int64))


def scan_class_folders(
    root: str | os.PathLike, classes: Sequence[str], bad: BadFiles, setting: str
) -> tuple[np.ndarray, np.ndarray]:
    """(relative paths [N] bytes, labels [N] int64) of every image under ``root/<class>/``."""
    files: list[bytes] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        folder = Path(root) / name
        if not folder.is_dir():
            continue  # a test folder may lack a class
        found = sorted(
            os.path.relpath(os.path.join(d, f), root)
            for d, _, names in os.walk(folder)
            for f in names
            if f.lower().endswith(IMAGE_EXTENSIONS) and not f.startswith(".")
        )
        if not found:
            raise BadDataError(
                f"{setting}: class folder {str(folder)!r} holds no images "
                f"({'/'.join(IMAGE_EXTENSIONS)}). Add images to it or remove the folder"
            )
        for rel in found:
            problem = check_image_file(os.path.join(root, rel))
            if problem is not None:
                bad.found(os.path.join(root, rel), problem)
                continue
            files.append(os.fsencode(rel))
            labels.append(label)
    return np.array(files, dtype=bytes), np.array(labels, np.int64)


def load_image_folder(
    path: str,
    test_path: str | None = None,
    val_path: str | None = None,
    test_fraction: float = 0.2,
    val_fraction: float = 0.0,
    seed: int = 0,
    channels: int = 3,
    image_size: int = 32,
    resize: str = "stretch",
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    hflip: bool = False,
    workers: int = 2,
    prefetch: int = 2,
    on_bad_file: str = "stop",
    in_memory: bool = False,
) -> ImageFolderData | Dataset:
    """An image folder (one sub-folder per class) as lazy train/val/test splits.

    Every split's files are checked before training (see `check_image_file`); a bad
    file raises `BadDataError` naming it, or with ``on_bad_file="skip"`` is logged,
    left out and counted. Without ``test_path`` (``val_path``), a seeded stratified
    ``test_fraction`` (``val_fraction``) of the training files is held out.

    ``in_memory=True`` decodes every split once (by the workers) into an in-memory
    `Dataset` (float32 [N, C, H, W]) for arenas that index arrays, such
    as the GAN's metrics: only for folders that fit in memory; no split is recorded.
    """
    need_path(path, "image_folder")
    bad = BadFiles(on_bad_file)
    classes = class_names(path)
    train_t = ImageTransform(channels, image_size, resize, mean, std, hflip)
    eval_t = ImageTransform(channels, image_size, resize, mean, std, False)
    files, labels = scan_class_folders(path, classes, bad, "data.path")
    root = str(Path(path).expanduser())
    train = ImageFolderSplit(root, files, labels, train_t)

    def given(where: str, setting: str) -> ImageFolderSplit:
        extra = sorted(set(class_names(where, setting)) - set(classes))
        if extra:
            raise BadDataError(
                f"{setting}={where!r} has class folders {extra} that data.path={path!r} "
                f"lacks; the classes must be the training folder's ({classes})"
            )
        f, y = scan_class_folders(where, classes, bad, setting)
        return ImageFolderSplit(str(Path(where).expanduser()), f, y, eval_t)

    def held_out(fraction: float, salt: int, setting: str) -> ImageFolderSplit:
        nonlocal train
        if not 0.0 < fraction < 1.0:
            raise BadDataError(
                f"{setting} must be in (0, 1) when no folder is given, got {fraction}"
            )
        keep, out = stratified_split(np.arange(len(train)), train.y, fraction, seed + salt)
        rest, held = np.sort(keep.x), np.sort(out.x)
        split = ImageFolderSplit(root, train.files[held], train.y[held], eval_t)
        train = ImageFolderSplit(root, train.files[rest], train.y[rest], train_t)
        return split

    test = (
        given(test_path, "data.test_path")
        if test_path
        else held_out(test_fraction, 0, "data.test_fraction")
    )
    val = None
    if val_path:
        val = given(val_path, "data.val_path")
    elif val_fraction > 0:
        val = held_out(val_fraction, 1, "data.val_fraction")
    if bad.skipped:
        log.warning("data: %d bad file(s) skipped by the scan of %s", len(bad), path)
    if in_memory:
        decoded = {
            n: _decode_all(s, workers, prefetch, bad) for n, s in (("train", train), ("test", test))
        }
        return Dataset(decoded["train"], decoded["test"], len(classes), train_t.shape,
                       f"image_folder:{Path(path).name}")  # fmt: skip
    return ImageFolderData(
        train=train,
        test=test,
        val=val,
        classes=classes,
        image_shape=train_t.shape,
        name=f"image_folder:{Path(path).name}",
        workers=workers,
        prefetch=prefetch,
        bad_files=bad,
        seed=seed,
    )
