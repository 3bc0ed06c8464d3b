"""The GAN arena on an image folder (data.loader.in_memory=true: decoded once into arrays)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from arenas.engine.app import run_from_config
from craftdata import Dataset, load_image_folder
from tests.data_files import image_folder


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


def test_gan_runs_on_a_folder(tmp_path: Path, compose_config, monkeypatch) -> None:
    monkeypatch.setenv("PADDLECRAFT_CACHE", str(tmp_path / "cache"))
    folder = image_folder(tmp_path / "imgs", per_class=20)
    cfg = compose_config(
        "arena=gan", "data=image_folder", f"data.path={folder}", "data.image_size=8",
        "data.loader.in_memory=true", "arena.batch_size=8", "trainer.max_steps=2",
        "trainer.progress=false", "arena.eval_samples=64", "arena.ref_samples=40",
        "arena.final_samples=64", "arena.featnet.channels=[8]", "arena.featnet.embedding_dim=8",
        "arena.featnet.epochs=1",
    )  # fmt: skip
    assert cfg.agents.generator.encoder.out_channels == 3
    value = run_from_config(cfg, tmp_path / "run")
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["step"] == 2 and results["headline_value"] == value and np.isfinite(value)
