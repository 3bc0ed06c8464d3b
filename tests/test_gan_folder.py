"""The GAN arena on an image folder: lazy decoding by workers, same batches as in memory,
bit-identical resume with workers, a bounded evaluation sample."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from paddlecraft.agents import Discriminator, Generator
from paddlecraft.arenas import GanArena, check_arena, run_arena
from paddlecraft.arenas.engine.app import run_from_config
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.engine.checkpoint import list_checkpoints
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.gan.data import GanData, SampledSplit, eval_sample
from paddlecraft.craftdata import Dataset, load_image_folder
from paddlecraft.craftdata.image_folder import SPLIT_FILE, ImageFolderSplit
from tests.data_files import damage_png_pixels, image_folder

#: a feature net small enough for a few seconds of evaluation
TINY_FEATNET = {"channels": [8], "embedding_dim": 8, "epochs": 1}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch) -> Path:
    """3 classes x 20 images (PNG and JPEG, varying sizes, one grey): 48 train, 12 test."""
    monkeypatch.setenv("PADDLECRAFT_CACHE", str(tmp_path / "cache"))
    return image_folder(tmp_path / "imgs", per_class=20)


def _agents() -> dict:
    """A tiny conditional generator and discriminator for 8x8 RGB images of 3 classes."""
    g = Generator(
        "generator",
        encoder={"_target_": "paddlecraft.encoders.ImageDecoder", "latent_dim": 8, "image_size": 8,
                 "out_channels": 3, "base_channels": 8, "num_classes": 3},
        seed=0, lr=1e-3,
    )  # fmt: skip
    d = Discriminator(
        "discriminator",
        encoder={"_target_": "paddlecraft.encoders.ImageCNNEncoder", "arch": "dcgan", "norm": "none", "in_channels": 3,
                 "image_size": 8, "channels": [8, 16], "embedding_dim": 16},
        num_classes=3, seed=0, lr=1e-3,
    )  # fmt: skip
    return {"generator": g, "discriminator": d}


def _arena(folder: Path, in_memory=False, workers=2, hflip=True, bad="stop", **kw) -> GanArena:
    """A tiny conditional GAN on ``folder``."""
    data = {"_target_": "paddlecraft.craftdata.load_image_folder", "path": str(folder), "image_size": 8,
            "workers": workers, "hflip": hflip, "in_memory": in_memory,
            "on_bad_file": bad}  # fmt: skip
    kw = {"epochs": 2, "batch_size": 4, "eval_samples": 60, "ref_samples": 30,
          "final_samples": 30, "grid_rows": 3, "featnet": TINY_FEATNET, **kw}  # fmt: skip
    agents = _agents()
    return GanArena(agents, data=data, conditional=True, seed=3, **kw)


def _close(arena: GanArena) -> None:
    arena.close()  # the data loader's worker processes


def _weights(arena: GanArena) -> dict[str, bytes]:
    return {p.name: p.numpy().tobytes() for a in arena.agents.values() for p in a.parameters()}


def test_in_memory_folder_equals_lazy_decode(tmp_path: Path) -> None:
    folder = image_folder(tmp_path / "imgs", per_class=6)
    lazy = load_image_folder(str(folder), image_size=8, workers=0)
    mem = load_image_folder(str(folder), image_size=8, workers=2, in_memory=True)
    assert isinstance(mem, Dataset) and mem.image_shape == (3, 8, 8) and mem.num_classes == 3
    assert mem.train.x.shape == (len(lazy.train), 3, 8, 8)
    for i in range(len(lazy.train)):
        x, y = lazy.train.load(i, None)
        np.testing.assert_array_equal(mem.train.x[i], x)
        assert mem.train.y[i] == y


@pytest.mark.parametrize("arena", ["gan", "gan_conditional"])
def test_gan_runs_lazily_on_a_folder_with_workers(folder, tmp_path, compose_config, arena):
    cfg = compose_config(
        f"arena={arena}", "data=image_folder", f"data.path={folder}", "data.image_size=8",
        "data.workers=2", "arena.batch_size=4", "trainer.max_steps=5", "trainer.log_every=1",
        "trainer.progress=false", "arena.eval_samples=60", "arena.ref_samples=30",
        "arena.final_samples=30", "arena.featnet.channels=[8]", "arena.featnet.embedding_dim=8",
        "arena.featnet.epochs=1",
    )  # fmt: skip
    assert cfg.data.loader.in_memory is False and cfg.agents.generator.encoder.out_channels == 3
    run = tmp_path / "run"
    value = run_from_config(cfg, run)
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "finished" and results["step"] == 5
    assert results["headline_value"] == value and np.isfinite(value)
    m = results["metrics"]
    for key in ("fid", "fid_real", "fid_untrained", "recall", "precision", "coverage"):
        assert np.isfinite(m[key]), key
    assert m["bad_files_skipped"] == 0 and m["classes_generated"] >= 1
    if arena == "gan_conditional":  # the folder's three classes are the conditions
        assert cfg.agents.discriminator.num_classes == 3 and 0 <= m["cond_accuracy"] <= 1
        assert np.load(run / "sample_labels.npy").max() == 2
    train = [json.loads(r) for r in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    assert len(train) == 5 and all(np.isfinite([r["d_loss"], r["g_loss"]]).all() for r in train)
    assert np.load(run / "samples.npy").shape == (30, 3, 8, 8)
    ckpt = list_checkpoints(run)[0]
    assert (ckpt / "agents" / "generator" / "weights.safetensors").is_file()
    rows = (run / SPLIT_FILE).read_text().splitlines()  # the split a resume will reuse
    assert len(rows) == 60 and sum(r.startswith("test\t") for r in rows) == 12


def test_lazy_and_in_memory_give_the_same_batches_and_weights(folder, tmp_path) -> None:
    seed_everything(0)
    lazy = _arena(folder, in_memory=False, workers=2, hflip=False)  # in memory: no flips
    assert lazy.real.lazy and lazy.steps_per_epoch() == 12  # 48 images / 4
    batches = list(lazy.batches(1))
    assert lazy.real.loader()._loader is not None  # decoded by worker processes
    run_arena(lazy, tmp_path / "lazy", standard_callbacks(progress=False), max_steps=7)
    got, lazy_x = _weights(lazy), lazy.real.arrays("train")[0]
    _close(lazy)

    seed_everything(0)
    mem = _arena(folder, in_memory=True, hflip=False)
    assert not mem.real.lazy
    for (x, y), (mx, my) in zip(batches, mem.batches(1), strict=True):
        assert x.shape == (1, 4, 3, 8, 8) and y.dtype == np.int64
        np.testing.assert_array_equal(x, mx)
        np.testing.assert_array_equal(y, my)
    assert set(np.concatenate([y.ravel() for _, y in batches]).tolist()) == {0, 1, 2}
    run_arena(mem, tmp_path / "mem", standard_callbacks(progress=False), max_steps=7)
    ref = _weights(mem)
    np.testing.assert_array_equal(lazy_x, mem.data.train.x)  # eval sample: all of a small split
    _close(mem)
    assert got.keys() == ref.keys() and len(got) > 0
    assert all(got[k] == ref[k] for k in ref)


def test_resume_with_workers_is_bit_identical(folder, tmp_path) -> None:
    seed_everything(0)
    full = _arena(folder)
    out_full = run_arena(full, tmp_path / "full", standard_callbacks(progress=False))
    ref = _weights(full)
    _close(full)

    seed_everything(0)
    part = _arena(folder)
    cbs = standard_callbacks(progress=False, checkpoint_every=7)
    run_arena(part, tmp_path / "part", cbs, max_steps=15)
    _close(part)
    shutil.rmtree(list_checkpoints(tmp_path / "part")[0])  # "crash" after step 14: mid-epoch 2
    seed_everything(123)
    resumed = _arena(folder)
    out = run_arena(resumed, tmp_path / "part", standard_callbacks(progress=False), resume=True)
    got = _weights(resumed)
    _close(resumed)
    assert out["status"] == "finished" and out["step"] == out_full["step"] == 24
    assert got.keys() == ref.keys() and all(got[k] == ref[k] for k in ref)
    assert out["metrics"] == out_full["metrics"]


def test_check_arena_resumes_mid_epoch_without_decoding_skipped_steps(folder, monkeypatch):
    arena = _arena(folder, workers=0, epochs=1)
    try:
        passed = check_arena(arena, steps=3)
        assert "batches(epoch, start) resumes mid-epoch" in passed
        assert "resume from a checkpoint is bit-identical" in passed
        loads: list[int] = []
        original = ImageFolderSplit.load
        monkeypatch.setattr(ImageFolderSplit, "load",
                            lambda self, i, rng: loads.append(i) or original(self, i, rng))  # fmt: skip
        rest = list(arena.batches(0, start=9))  # workers=0: decoded in this process
        assert len(rest) == 3 and len(loads) == 3 * 4  # only the 3 remaining steps' files
        order = np.random.default_rng([3, 0]).permutation(48)  # (seed, epoch)
        assert loads == order[36:48].tolist()
    finally:
        _close(arena)


def test_evaluation_decodes_a_bounded_seeded_sample(folder) -> None:
    arena = _arena(folder, workers=0, eval_images=10)
    try:
        data = arena.real
        assert data._real == {}  # nothing decoded before evaluation asks
        x, y = data.arrays("train")
        tx, _ = data.arrays("test")
        assert x.shape == (10, 3, 8, 8) and tx.shape == (10, 3, 8, 8) and y.dtype == np.int64
        assert data.reference(30).shape == (10, 3, 8, 8)  # ref_samples capped by the sample
        again = GanData(data.data, seed=3, batch_size=4, n_critic=1, eval_images=10)
        np.testing.assert_array_equal(again.arrays("train")[0], x)  # same seed: the same files
        idx = eval_sample(48, 10, seed=3, split=0)  # sorted, a function of the seed
        assert len(set(idx.tolist())) == 10 and (np.diff(idx) > 0).all()
        assert not np.array_equal(eval_sample(48, 10, seed=4, split=0), idx)
        plain = SampledSplit(data.data.train, idx)  # no flips for the metrics
        for k in (0, 9):
            np.testing.assert_array_equal(x[k], plain.load(k, np.random.default_rng(0))[0])
            assert y[k] == data.data.train.y[idx[k]]
        assert not hasattr(data.data.train, "x")  # the training split holds no pixels
    finally:
        _close(arena)


def test_bad_settings_are_explained(folder) -> None:
    with pytest.raises(ValueError, match="arena.eval_images must be >= 1"):
        _arena(folder, workers=0, eval_images=0)
    with pytest.raises(ValueError, match=r"arena.batch_size=64 x arena.n_critic=1 .* 48"):
        _arena(folder, workers=0, batch_size=64)


def test_a_file_failing_to_decode_is_skipped_and_the_step_refilled(folder) -> None:
    train = load_image_folder(str(folder), workers=0).train  # the same seeded split
    png = next(train.path(i) for i in range(len(train)) if train.path(i).endswith(".png"))
    bad = damage_png_pixels(Path(png))  # passes the scan, fails to decode in a worker
    arena = _arena(folder, workers=2, bad="skip")
    try:
        steps = list(arena.batches(0))
        assert len(steps) == 12 and all(x.shape == (1, 4, 3, 8, 8) for x, _ in steps)
        assert list(arena.real.bad_files.skipped) == [str(bad)]
        assert arena.real.metrics() == {"bad_files_skipped": 1.0}
        assert arena.arena_state()["bad_files"] == dict(arena.real.bad_files.skipped)
    finally:
        _close(arena)
