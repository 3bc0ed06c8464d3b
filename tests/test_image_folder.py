"""Image folders read lazily: scan, splits, (seed, epoch) order with workers, bad files."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from paddlecraft.craftdata import (
    BadDataError,
    BatchLoader,
    Split,
    iterate_minibatches,
    load_image_folder,
)
from paddlecraft.craftdata.image_folder import SPLIT_FILE
from tests.data_files import class_image, damage_png_pixels, image_folder, truncate, write_image


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return image_folder(tmp_path / "imgs")


def test_scan_classes_and_seeded_stratified_split(folder: Path) -> None:
    data = load_image_folder(str(folder), image_size=8, seed=3, workers=0)
    assert data.classes == ["class_0", "class_1", "class_2"] and data.num_classes == 3
    assert data.image_shape == (3, 8, 8)
    assert len(data.train) + len(data.test) == 24
    counts = np.bincount(data.test.y, minlength=3)
    assert counts.sum() == 5 and counts.min() >= 1  # ceil(20% of 24), every class held out
    train = {data.train.path(i) for i in range(len(data.train))}
    test = {data.test.path(i) for i in range(len(data.test))}
    assert not train & test
    again = load_image_folder(str(folder), image_size=8, seed=3, workers=0)
    assert {again.test.path(i) for i in range(len(again.test))} == test
    other = load_image_folder(str(folder), image_size=8, seed=4, workers=0)
    assert {other.test.path(i) for i in range(len(other.test))} != test


def test_pixels_match_opencv_decode_and_resize(folder: Path) -> None:
    data = load_image_folder(str(folder), image_size=8, workers=0, mean=[0.5] * 3, std=[0.25] * 3)
    split = data.train
    for i in range(len(split)):
        x, y = split.load(i, None)
        rgb = cv2.cvtColor(cv2.imread(split.path(i), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        want = cv2.resize(rgb, (8, 8), interpolation=cv2.INTER_AREA).astype(np.float32) / 255
        np.testing.assert_allclose(x, (want.transpose(2, 0, 1) - 0.5) / 0.25, atol=1e-5)
        assert y == data.classes.index(Path(split.path(i)).parent.name)
    grey = load_image_folder(str(folder), channels=1, image_size=6, resize="crop", workers=0)
    assert grey.train.load(0, None)[0].shape == (1, 6, 6)


def test_order_is_a_function_of_seed_and_epoch_with_or_without_workers(folder: Path) -> None:
    data = load_image_folder(str(folder), image_size=8, hflip=True)
    plain = list(BatchLoader(data.train, 5, seed=7, workers=0).epoch(2))
    loader = BatchLoader(data.train, 5, seed=7, workers=2)
    with_workers = list(loader.epoch(2))
    assert len(plain) == len(loader) == 4  # 19 training images
    for a, b in zip(plain, with_workers):
        np.testing.assert_array_equal(a[0], b[0])  # augmentation too (hflip per (seed, epoch, i))
        np.testing.assert_array_equal(a[1], b[1])
    resumed = list(loader.epoch(2, start=2))
    assert len(resumed) == 2
    for a, b in zip(plain[2:], resumed):
        np.testing.assert_array_equal(a[0], b[0])
    labels = [np.concatenate([b[1] for b in loader.epoch(e)]) for e in (0, 1)]
    assert sorted(labels[0].tolist()) == sorted(data.train.y.tolist())
    assert labels[0].tolist() != labels[1].tolist()


def test_in_memory_split_gives_the_minibatches_of_before() -> None:
    x = np.arange(50, dtype=np.float32).reshape(25, 2)
    y = np.arange(25)
    new = list(BatchLoader(Split(x, y), 4, seed=3).epoch(5))
    old = list(iterate_minibatches(x, y, 4, np.random.default_rng([3, 5])))
    assert len(new) == len(old) == 7
    for (a, b), (c, d) in zip(new, old):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_split_recorded_in_run_dir_is_reused(folder: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    data = load_image_folder(str(folder), image_size=8, workers=0)
    data.use_run_dir(run)
    assert (run / SPLIT_FILE).is_file()
    test_files = [data.test.path(i) for i in range(len(data.test))]
    write_image(folder / "class_0" / "late_arrival.png", class_image(0, 99))
    later = load_image_folder(str(folder), image_size=8, workers=0)
    assert len(later.train) + len(later.test) == 25
    later.use_run_dir(run)  # a resumed run: the recorded split, not the grown folder
    assert len(later.train) + len(later.test) == 24
    assert [later.test.path(i) for i in range(len(later.test))] == test_files
    np.testing.assert_array_equal(later.test.y, data.test.y)


def test_given_test_folder_must_use_training_classes(folder: Path, tmp_path: Path) -> None:
    test_dir = tmp_path / "test"
    write_image(test_dir / "class_1" / "a.png", class_image(1, 1))
    data = load_image_folder(str(folder), test_path=str(test_dir), workers=0)
    assert len(data.train) == 24 and data.test.y.tolist() == [1]
    write_image(test_dir / "class_9" / "b.png", class_image(1, 2))
    with pytest.raises(BadDataError, match=r"data.test_path=.*\['class_9'\]"):
        load_image_folder(str(folder), test_path=str(test_dir), workers=0)


# ---------------------------------------------------------------- bad data


def test_missing_folder_and_no_class_folders(tmp_path: Path) -> None:
    with pytest.raises(BadDataError, match=r"data.path='.*nowhere': no such folder"):
        load_image_folder(str(tmp_path / "nowhere"))
    (tmp_path / "flat").mkdir()
    write_image(tmp_path / "flat" / "a.png", class_image(0, 0))
    with pytest.raises(BadDataError, match="has no class sub-folders"):
        load_image_folder(str(tmp_path / "flat"))


def test_empty_class_folder(folder: Path) -> None:
    (folder / "class_3").mkdir()
    (folder / "class_3" / "notes.txt").write_text("not an image")
    with pytest.raises(BadDataError, match=r"class folder '.*class_3' holds no images"):
        load_image_folder(str(folder))


@pytest.mark.parametrize(
    "name,spoil,problem",
    [
        ("img_002.png", truncate, "is a truncated PNG"),
        ("img_003.jpg", truncate, "is a truncated JPEG"),
        ("img_004.png", lambda p: p.write_bytes(b"GIF89a...."), "is not a PNG image"),
        ("img_005.png", lambda p: p.write_bytes(b""), "is empty"),
    ],
)
def test_scan_finds_bad_image_stop_or_skip(folder: Path, name, spoil, problem) -> None:
    bad = folder / "class_1" / name
    spoil(bad)
    with pytest.raises(BadDataError, match=rf"{bad}: {problem}.*data.on_bad_file=skip"):
        load_image_folder(str(folder), workers=0)
    data = load_image_folder(str(folder), workers=0, on_bad_file="skip")
    assert list(data.bad_files.skipped) == [str(bad)]
    assert len(data.train) + len(data.test) == 23


def test_damage_found_at_decode_time_stop_or_skip(folder: Path) -> None:
    bad = damage_png_pixels(folder / "class_2" / "img_002.png")
    data = load_image_folder(str(folder), test_fraction=0.5, workers=2)  # the scan passes
    where = (
        "train" if any(data.train.path(i) == str(bad) for i in range(len(data.train))) else "test"
    )
    loader = BatchLoader(getattr(data, where), 3, workers=2, bad_files=data.bad_files)
    assert len(loader) >= 4  # enough batches for the workers to start
    with pytest.raises(BadDataError, match=rf"{bad}: cannot be decoded.*data.on_bad_file=skip"):
        list(loader.epoch(0))
    skip = load_image_folder(str(folder), test_fraction=0.5, workers=2, on_bad_file="skip")
    split = getattr(skip, where)
    batches = list(BatchLoader(split, 3, workers=2, bad_files=skip.bad_files).epoch(0))
    assert sum(len(x) for x, _ in batches) == len(split) - 1
    assert sorted(len(y) for _, y in batches)[0] == 2  # the bad file's batch is one short
    assert list(skip.bad_files.skipped) == [str(bad)]


def test_bad_setting_values(folder: Path) -> None:
    with pytest.raises(BadDataError, match="data.on_bad_file must be one of"):
        load_image_folder(str(folder), on_bad_file="ignore")
    with pytest.raises(BadDataError, match="data.channels must be 1 or 3"):
        load_image_folder(str(folder), channels=2)
    with pytest.raises(BadDataError, match=r"data.mean needs one value per channel"):
        load_image_folder(str(folder), mean=[0.5])


def test_nothing_is_read_for_skipped_batches(folder: Path, monkeypatch) -> None:
    data = load_image_folder(str(folder), image_size=8, workers=0)
    loaded: list[int] = []
    real = type(data.train).load
    monkeypatch.setattr(
        type(data.train), "load", lambda self, i, rng: loaded.append(i) or real(self, i, rng)
    )
    batches = list(BatchLoader(data.train, 5, seed=1).epoch(0, start=3))
    assert len(batches) == 1 and len(loaded) == len(batches[0][1]) == 4
    shutil.rmtree(folder)  # nothing else was kept open


def test_a_pass_left_early_stops_its_workers(folder: Path) -> None:
    """Leaving an epoch after one batch (as a stop or a resume check does) ends its worker
    processes and reader thread; before, they lived until the interpreter exited."""
    import threading

    data = load_image_folder(str(folder), image_size=8)
    loader = BatchLoader(data.train, 2, seed=0, workers=2)  # 10 batches: workers start
    before = {t.ident for t in threading.enumerate()}
    batches = loader.epoch(0)
    first = next(batches)
    assert len(first[1]) == 2
    started = [t for t in threading.enumerate() if t.ident not in before]
    assert started, "the pass should run paddle's reader thread"
    batches.close()  # what garbage collection does to an abandoned generator
    for t in started:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in started)
