"""The onion engine: phase order, checkpoints, resume, signals, guards, check_arena, run.py."""

from __future__ import annotations

import json
import os
import signal
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from paddlecraft.arenas import (
    ArenaCheckError,
    Callback,
    ClassifyArena,
    Loop,
    check_arena,
    run_arena,
)
from paddlecraft.arenas.engine import StepAborted
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.engine.checkpoint import latest_good_checkpoint, list_checkpoints
from paddlecraft.arenas.engine.rng import seed_everything
from tests.toy_arenas import ForgetfulArena, MemoryArena, Regressor, ShufflingArena, ToyArena

ROOT = Path(__file__).resolve().parents[1]


def _toy(cls=ToyArena, **kw):
    return cls({"reg": Regressor("reg", seed=1, lr=0.05)}, **kw)


def _quiet(**kw):
    kw.setdefault("progress", False)
    return standard_callbacks(**kw)


class Recorder(Callback):
    def __init__(self, tag, events):
        self.tag, self.events = tag, events
        self.key = tag

    def on_run_start(self, loop):
        self.events.append(f"{self.tag}:run_start")

    def on_run_end(self, loop):
        self.events.append(f"{self.tag}:run_end")

    def on_step_start(self, loop):
        self.events.append(f"{self.tag}:step_start")

    def on_step_end(self, loop, metrics):
        self.events.append(f"{self.tag}:step_end")

    def on_eval_start(self, loop):
        self.events.append(f"{self.tag}:eval_start")

    def on_eval_end(self, loop, metrics):
        self.events.append(f"{self.tag}:eval_end")


class EvalEvery(Callback):
    def __init__(self, n):
        self.n = n

    def on_step_end(self, loop, metrics):
        if loop.step % self.n == 0:
            loop.evaluate()


def test_onion_order_and_nested_evaluation(tmp_path):
    events: list[str] = []
    arena = _toy(epochs=1)
    loop = Loop(
        arena,
        [Recorder("outer", events), Recorder("inner", events), EvalEvery(2)],
        tmp_path,
        max_steps=2,
    )
    loop.run()
    assert events == [
        "outer:run_start", "inner:run_start",
        "outer:step_start", "inner:step_start", "inner:step_end", "outer:step_end",
        "outer:step_start", "inner:step_start",
        "outer:eval_start", "inner:eval_start", "inner:eval_end", "outer:eval_end",
        "inner:step_end", "outer:step_end",
        "inner:run_end", "outer:run_end",
    ]  # fmt: skip


def test_loop_without_training_callbacks_is_inference(tmp_path):
    arena = _toy()
    loop = Loop(arena, [], tmp_path)
    metrics = loop.evaluate()
    assert set(metrics) == {"neg_mse"} and metrics["neg_mse"] < 0


def _weights(run_dir: Path, agent: str = "reg") -> dict[str, np.ndarray]:
    newest = list_checkpoints(run_dir)[0]
    return load_file(newest / "agents" / agent / "weights.safetensors")


def test_resume_from_mid_run_checkpoint_is_bit_identical(tmp_path):
    seed_everything(0)
    full = _toy(epochs=3)
    run_arena(full, tmp_path / "full", _quiet(checkpoint_every=5))
    ref = {p.name.split(".", 1)[1]: p.numpy() for p in full.agents["reg"].parameters()}

    seed_everything(0)
    part = _toy(epochs=3)
    run_arena(part, tmp_path / "part", _quiet(checkpoint_every=5), max_steps=13)
    assert list_checkpoints(tmp_path / "part")[0].name == "step_00000013"
    # "crash": drop the final checkpoint so resume starts from step 10, mid-epoch
    import shutil

    shutil.rmtree(list_checkpoints(tmp_path / "part")[0])
    # the checkpoint carries the run's time so far; say the first session took 1000 s
    state_file = list_checkpoints(tmp_path / "part")[0] / "state.json"
    state = json.loads(state_file.read_text())
    assert state["position"]["step"] == 10 and 0 < state["elapsed_s"] < 1000
    state_file.write_text(json.dumps({**state, "elapsed_s": 1000.0}))
    seed_everything(99)  # whatever the new process's RNG is, the checkpoint's wins
    resumed = _toy(epochs=3)  # a fresh process rebuilds the same arena and agent
    out = run_arena(resumed, tmp_path / "part", _quiet(checkpoint_every=5), resume=True)
    assert out["status"] == "finished" and out["step"] == 24
    assert 1000 < out["elapsed_s"] < 1000 + 300  # the earlier session counts, once
    got = {p.name.split(".", 1)[1]: p.numpy() for p in resumed.agents["reg"].parameters()}
    assert got.keys() == ref.keys()
    for k in ref:
        assert np.array_equal(got[k], ref[k]), k
    assert resumed.steps_done == full.steps_done == 24  # arena state restored too


def test_arena_state_may_hold_arrays_and_tensors(tmp_path, caplog):
    """Arrays in arena_state() go to arena.safetensors (not state.json), come back equal,
    with their dtypes, and resume stays bit-identical; an edited file is caught."""
    seed_everything(0)
    full = _toy(MemoryArena, epochs=2)
    run_arena(full, tmp_path / "full", _quiet(checkpoint_every=4))
    seed_everything(0)
    part = _toy(MemoryArena, epochs=2)
    run_arena(part, tmp_path / "part", _quiet(checkpoint_every=4), max_steps=8)
    ckpt = list_checkpoints(tmp_path / "part")[0]
    state = json.loads((ckpt / "state.json").read_text())
    assert state["arena"]["memory"]["sum_x"] == {"__tensor__": "memory/sum_x"}
    assert state["arena"]["history"] == [{"__tensor__": "history/0"}]
    assert "arena.safetensors" in state["sha256"]
    stored = load_file(ckpt / "arena.safetensors")
    assert stored["memory/counts"].dtype == np.int64
    assert stored["memory/sum_x"].dtype == np.float64
    assert np.array_equal(stored["memory/sum_x"], part.memory["sum_x"])
    resumed = _toy(MemoryArena, epochs=2)
    run_arena(resumed, tmp_path / "part", _quiet(checkpoint_every=4), resume=True)
    for k in full.memory:
        assert np.array_equal(resumed.memory[k], full.memory[k]), k
    assert np.array_equal(resumed.last.numpy(), full.last.numpy())
    for a, b in zip(full.agents["reg"].parameters(), resumed.agents["reg"].parameters()):
        assert np.array_equal(a.numpy(), b.numpy())
    # one changed byte in the newest arena.safetensors: that checkpoint is skipped
    newest = list_checkpoints(tmp_path / "part")[0] / "arena.safetensors"
    data = bytearray(newest.read_bytes())
    data[-1] ^= 1
    newest.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        path, _ = latest_good_checkpoint(tmp_path / "part")
    assert path != newest.parent and "arena.safetensors" in caplog.text


def test_setup_binds_the_run_folder_once_before_a_checkpoint_is_restored(tmp_path):
    calls: list[str] = []

    class Recording(ToyArena):
        def setup(self, run_dir):
            super().setup(run_dir)
            calls.append(f"setup {Path(run_dir).name}")

        def load_arena_state(self, state):
            calls.append(f"restore (run_dir {Path(self.run_dir).name})")
            super().load_arena_state(state)

    arena = _toy(Recording, epochs=1)
    assert arena.run_dir is None  # plain Python: no folder until a run
    run_arena(arena, tmp_path / "run", _quiet(checkpoint_every=4), max_steps=4)
    assert calls == ["setup run"] and arena.run_dir == str(tmp_path / "run")
    calls.clear()
    run_arena(_toy(Recording, epochs=1), tmp_path / "run", _quiet(), resume=True)
    assert calls == ["setup run", "restore (run_dir run)"]


def test_truncated_checkpoint_is_detected_and_previous_used(tmp_path, caplog):
    arena = _toy(epochs=2)
    run_arena(arena, tmp_path, _quiet(checkpoint_every=4))
    ckpts = list_checkpoints(tmp_path)
    assert [c.name for c in ckpts][:2] == ["step_00000016", "step_00000012"]
    w = ckpts[0] / "agents" / "reg" / "weights.safetensors"
    w.write_bytes(w.read_bytes()[:50])
    with caplog.at_level("WARNING"):
        path, state = latest_good_checkpoint(tmp_path)
    assert path.name == "step_00000012" and state["position"]["step"] == 12
    assert "step_00000016 is corrupted" in caplog.text and "weights.safetensors" in caplog.text


def test_nan_guard_stops_and_keeps_last_good_checkpoint(tmp_path):
    arena = _toy(epochs=3, nan_at_step=7)
    out = run_arena(arena, tmp_path, _quiet(checkpoint_every=5))
    assert out["status"] == "diverged" and out["step"] == 7
    assert "non-finite training metric at step 7" in out["stop_reason"]
    assert [c.name for c in list_checkpoints(tmp_path)] == ["step_00000005"]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["status"] == "diverged"


class Flat(ToyArena):
    def evaluate(self):
        return {"neg_mse": -1.0}


def test_early_stopping_after_patience(tmp_path):
    arena = _toy(cls=Flat, epochs=50)
    out = run_arena(arena, tmp_path, _quiet(early_stopping_patience=3))
    # evaluations at epochs 1..4: first sets best, next three do not improve
    assert out["status"] == "finished" and out["epoch"] == 4
    assert "early stopping" in out["stop_reason"]


def test_metrics_jsonl_and_results_json(tmp_path):
    arena = _toy(epochs=2)
    out = run_arena(arena, tmp_path, _quiet(log_every=2, overrides=["arena.epochs=2"]))
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in train] == list(range(2, 17, 2))
    assert [r["step"] for r in evals] == [8, 16] and all("neg_mse" in r for r in evals)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["overrides"] == ["arena.epochs=2"]
    assert results["headline"] == "neg_mse" and results["headline_value"] == evals[-1]["neg_mse"]
    assert out["headline_value"] == results["headline_value"]


def test_check_arena_passes_on_classify(make_scope):
    from paddlecraft.agents import Classifier

    name = make_scope("clf")
    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 64, "hidden_size": 32}
    agent = Classifier(name, encoder=enc, seed=0)
    data = {"_target_": "paddlecraft.craftdata.load_digits"}
    arena = ClassifyArena({"classifier": agent}, data=data, epochs=1)
    with pytest.raises(ArenaCheckError, match="key and agent name must match"):
        check_arena(arena)
    arena.agents = {name: agent}
    passed = check_arena(arena, steps=3)
    assert "resume from a checkpoint is bit-identical" in passed
    assert "callbacks fire in onion order" in passed


def test_check_arena_passes_on_toy():
    assert "resume from a checkpoint is bit-identical" in check_arena(_toy(), steps=3)


def test_check_arena_fails_with_useful_message_on_broken_arenas():
    with pytest.raises(ArenaCheckError) as e:
        check_arena(_toy(cls=ForgetfulArena), steps=3)
    assert "does not reproduce the run" in str(e.value) and "arena_state()" in str(e.value)
    with pytest.raises(ArenaCheckError, match=r"batches\(0\) gave a different order"):
        check_arena(_toy(cls=ShufflingArena), steps=3)


def test_visualdl_is_imported_only_when_enabled_and_explains_how_to_get_it(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_visualdl(name, *a, **k):
        if name == "visualdl":
            raise ImportError("No module named 'visualdl'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_visualdl)
    run_arena(_toy(epochs=1), tmp_path / "off", _quiet())  # disabled: never imported
    with pytest.raises(ImportError, match=r"pip install visualdl\), or set trainer.visualdl=false"):
        run_arena(_toy(epochs=1), tmp_path / "on", _quiet(visualdl=True))


def test_first_signal_requests_stop_second_exits_at_once(tmp_path, monkeypatch):
    exits = []
    monkeypatch.setattr(os, "_exit", lambda code: exits.append(code))
    loop = Loop(_toy(epochs=1), [], tmp_path)
    loop._on_signal(signal.SIGTERM, None)
    assert loop.stop_reason == "SIGTERM received" and loop.status == "interrupted" and exits == []
    loop._on_signal(signal.SIGINT, None)
    assert exits == [130]


class StartingArena(ToyArena):
    """Begins mid-epoch itself; records where it was asked to start."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.starts: list[tuple[int, int]] = []

    def batches(self, epoch, start=0):
        self.starts.append((epoch, start))
        return islice(super().batches(epoch), start, None)


def test_resume_calls_batches_with_start(tmp_path):
    seed_everything(0)
    full = _toy(StartingArena, epochs=2)
    run_arena(full, tmp_path / "full", _quiet())
    seed_everything(0)
    part = _toy(StartingArena, epochs=2)
    run_arena(part, tmp_path / "part", _quiet(checkpoint_every=3), max_steps=11)
    import shutil

    shutil.rmtree(list_checkpoints(tmp_path / "part")[0])  # resume from step 9: epoch 1, batch 1
    resumed = _toy(StartingArena, epochs=2)
    run_arena(resumed, tmp_path / "part", _quiet(), resume=True)
    assert resumed.starts == [(1, 1)]  # asked to begin there: the first batch is never drawn
    got = [p.numpy() for p in resumed.agents["reg"].parameters()]
    ref = [p.numpy() for p in full.agents["reg"].parameters()]
    assert all(np.array_equal(a, b) for a, b in zip(got, ref))
    assert "batches(epoch, start) resumes mid-epoch" in check_arena(_toy(StartingArena), steps=2)


class _FlakyWorkerArena(ToyArena):
    """train_step fails once, at ``fail_at``, before it changes anything (as a dead worker)."""

    def __init__(self, agents, fail_at=None, **kw):
        super().__init__(agents, **kw)
        self.fail_at = fail_at

    def train_step(self, batch):
        if self.fail_at is not None and self.steps_done + 1 == self.fail_at:
            raise StepAborted("collector 1 failed: ValueError: boom")
        return super().train_step(batch)


def test_an_aborted_step_checkpoints_the_last_good_step_and_resumes_exactly(tmp_path):
    """StepAborted: status aborted, a checkpoint of the last completed step, and a resume
    that retries the step ends bit-identical to a run that never failed."""
    seed_everything(0)
    full = _FlakyWorkerArena({"reg": Regressor("reg", seed=1, lr=0.05)}, epochs=2)
    run_arena(full, tmp_path / "full", _quiet())
    ref = {p.name: p.numpy() for p in full.agents["reg"].parameters()}

    seed_everything(0)
    flaky = _FlakyWorkerArena({"reg": Regressor("reg", seed=1, lr=0.05)}, epochs=2, fail_at=6)
    with pytest.raises(StepAborted, match="collector 1 failed"):
        run_arena(flaky, tmp_path / "part", _quiet())
    assert list_checkpoints(tmp_path / "part")[0].name == "step_00000005"
    results = json.loads((tmp_path / "part" / "results.json").read_text())
    assert results["status"] == "aborted"

    seed_everything(7)
    again = _FlakyWorkerArena({"reg": Regressor("reg", seed=1, lr=0.05)}, epochs=2)
    out = run_arena(again, tmp_path / "part", _quiet(), resume=True)
    assert out["status"] == "finished" and out["step"] == full.steps_done
    for p in again.agents["reg"].parameters():
        assert np.array_equal(p.numpy(), ref[p.name]), p.name


def test_the_command_line_says_an_aborted_step_in_one_line(monkeypatch, capsys, tmp_path):
    from paddlecraft.arenas.engine import app

    def abort(*_a, **_k):
        raise StepAborted("collector 0 failed: RuntimeError: out of memory")

    monkeypatch.setattr(app, "run_config", abort)
    with pytest.raises(SystemExit) as e:
        app.main_entry(None, tmp_path)
    assert e.value.code == app.ABORTED == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: collector 0 failed")
    assert f"resume={tmp_path}" in err[0]


def test_the_app_builds_the_data_and_arenas_take_a_dataset_object(compose_config):
    """build_arena hands the arena a built dataset (not its config); in Python, an arena
    takes a dataset object as it is, or a loader config it builds itself."""
    from paddlecraft.agents.instantiate import safe_instantiate
    from paddlecraft.arenas.engine.app import build_agents, build_arena
    from paddlecraft.craftdata import load_digits

    cfg = compose_config("arena=classify")
    arena = build_arena(cfg, build_agents(cfg))
    assert isinstance(arena.data.train.x, np.ndarray)  # a dataset, built by the app
    data = load_digits(seed=0)
    agents = build_agents(cfg)
    assert ClassifyArena(agents, data).data is data
    assert safe_instantiate(data) is data  # a user arena written before: no config copy
    from_config = ClassifyArena(agents, {"_target_": "paddlecraft.craftdata.load_digits"})
    assert np.array_equal(from_config.data.train.x, data.train.x)
