"""The classify arena on an image folder: run.py's config, bit-identical resume with workers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from paddlecraft.agents import Agent, Classifier
from paddlecraft.arenas import ClassifyArena, check_arena, run_arena
from paddlecraft.arenas.engine.app import run_from_config, user_error
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.engine.checkpoint import list_checkpoints
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.craftdata.badfiles import BadDataError
from paddlecraft.craftdata.image_folder import SPLIT_FILE
from tests.data_files import image_folder, truncate


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return image_folder(tmp_path / "imgs", per_class=10)


def _arena(folder: Path, name: str, workers: int = 2, epochs: int = 2) -> ClassifyArena:
    enc = {"_target_": "paddlecraft.encoders.ImageCNNEncoder", "in_channels": 3, "image_size": 8,
           "channels": [4], "embedding_dim": 8, "num_classes": 3}  # fmt: skip
    agent = Classifier(name, encoder=enc, seed=0, lr=0.01)
    data = {"_target_": "paddlecraft.craftdata.load_image_folder", "path": str(folder), "image_size": 8,
            "workers": workers, "hflip": True}  # fmt: skip
    return ClassifyArena({"classifier": agent}, data=data, epochs=epochs, batch_size=4, seed=5)


def _params(arena: ClassifyArena) -> dict[str, np.ndarray]:
    return {p.name: p.numpy() for p in arena.classifier.parameters()}


def test_run_py_config_needs_only_the_path(tmp_path: Path, compose_config) -> None:
    folder = image_folder(tmp_path / "imgs4", per_class=10, classes=4)
    cfg = compose_config(
        "arena=classify", "data=image_folder", f"data.path={folder}", "arena.epochs=1",
        "arena.batch_size=8", "trainer.progress=false", "trainer.max_steps=3",
    )  # fmt: skip
    # composing reads no data: the class count is left for the built dataset to give
    assert cfg.agents.classifier.num_classes is None and "num_classes" not in cfg.data
    assert cfg.data.flat_size == 3 * 32 * 32
    assert list(cfg.agents.classifier.input_shape) == [3, 32, 32]  # the MLP's input_size follows
    acc = run_from_config(cfg, tmp_path / "run")
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["step"] == 3 and results["metrics"]["test_accuracy"] == acc
    assert results["metrics"]["bad_files_skipped"] == 0
    rows = (tmp_path / "run" / SPLIT_FILE).read_text().splitlines()
    assert len(rows) == 40 and sum(r.startswith("test\t") for r in rows) == 8
    saved = OmegaConf.load(tmp_path / "run" / "config.yaml")
    assert saved.agents.classifier.num_classes == 4  # filled from the folder's 4 sub-folders
    agent = Agent.load(list_checkpoints(tmp_path / "run")[0] / "agents" / "classifier")
    assert agent.encoder.num_classes == 4
    x = np.zeros((2, 3, 32, 32), np.float32)
    assert tuple(agent(agent.to_tensor(x)).shape) == (2, 4)  # four class logits


def test_composing_reads_no_folder_and_the_build_names_data_path(
    tmp_path: Path, compose_config, monkeypatch
) -> None:
    """``data=image_folder`` composes (and ``--cfg job`` resolves) without touching the folder;
    the missing folder is refused when the run builds its data, before any work."""
    import paddlecraft.craftdata.image_folder as image_folder_module

    listed: list[str] = []
    real = image_folder_module.class_names
    monkeypatch.setattr(
        image_folder_module, "class_names", lambda p, *a: listed.append(str(p)) or real(p, *a)
    )
    missing = tmp_path / "nonexistent"
    cfg = compose_config("arena=classify", "data=image_folder", f"data.path={missing}")
    OmegaConf.to_yaml(cfg, resolve=True)  # what --cfg job prints
    assert listed == [] and not missing.exists()
    run = tmp_path / "run"
    with pytest.raises(Exception) as info:
        run_from_config(cfg, run)
    assert listed == [str(missing)]  # read once, when the run built its data
    cause = user_error(info.value)
    assert isinstance(cause, BadDataError) and str(cause).startswith(f"data.path={str(missing)!r}")
    assert not (run / "config.yaml").exists() and not (run / "checkpoints").exists()


def test_skipped_files_are_counted_in_results(folder: Path, tmp_path: Path, compose_config) -> None:
    truncate(folder / "class_0" / "img_002.png")
    args = ("arena=classify", "data=image_folder", f"data.path={folder}", "arena.epochs=1",
            "trainer.progress=false", "trainer.max_steps=1")  # fmt: skip
    with pytest.raises(Exception, match=r"img_002.png: is a truncated PNG.*on_bad_file=skip"):
        run_from_config(compose_config(*args), tmp_path / "stop")
    run_from_config(compose_config(*args, "data.on_bad_file=skip"), tmp_path / "skip")
    results = json.loads((tmp_path / "skip" / "results.json").read_text())
    assert results["metrics"]["bad_files_skipped"] == 1


def test_resume_mid_epoch_with_workers_is_bit_identical(folder: Path, tmp_path, make_scope):
    name = make_scope("clf")
    seed_everything(0)
    full = _arena(folder, name)
    run_arena(full, tmp_path / "full", standard_callbacks(progress=False, checkpoint_every=4))
    ref = _params(full)
    full.close()

    seed_everything(0)
    part = _arena(folder, name)
    cbs = standard_callbacks(progress=False, checkpoint_every=4)
    run_arena(part, tmp_path / "part", cbs, max_steps=9)
    part.close()
    shutil.rmtree(list_checkpoints(tmp_path / "part")[0])  # "crash" after step 8: mid-epoch 2
    seed_everything(123)
    resumed = _arena(folder, name)
    out = run_arena(resumed, tmp_path / "part", standard_callbacks(progress=False), resume=True)
    assert out["status"] == "finished" and out["step"] == 12  # 24 train images / 4, 2 epochs
    got = _params(resumed)
    assert got.keys() == ref.keys() and len(got) > 0
    for k in ref:
        assert got[k].tobytes() == ref[k].tobytes(), k
    resumed.close()


def test_check_arena_sees_start_and_resume(folder: Path, make_scope) -> None:
    arena = _arena(folder, make_scope("clf"), workers=2, epochs=1)
    arena.agents = {arena.classifier.name: arena.classifier}  # check_arena: key == name
    passed = check_arena(arena, steps=2)
    assert "batches(epoch, start) resumes mid-epoch" in passed
    assert "resume from a checkpoint is bit-identical" in passed
