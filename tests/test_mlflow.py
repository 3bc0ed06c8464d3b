"""MLflow tracking (``trainer.mlflow=true``): the run is read back through MLflow itself,
from the local store under the run folder (fast) and from a real ``mlflow server`` on the
loopback address through its REST API (slow)."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import cv2
import numpy as np
import pytest
from toy_arenas import Regressor, ToyArena

from paddlecraft.arenas import run_arena, standard_callbacks
from paddlecraft.arenas.engine import Image, Text
from paddlecraft.arenas.engine.mlflow_logger import flatten

pytest.importorskip("mlflow")  # an optional extra; the test extra installs it

#: what run_from_config writes before a run: the composed config
CONFIG = """\
seed: 0
agents:
  reg:
    lr: 0.01
    dim: 4
arena:
  epochs: 2
  batch_size: 8
trainer:
  log_every: 2
"""
OVERRIDES = ["agents.reg.lr=0.01", "trainer.progress=false"]


class PictureArena(ToyArena):
    """The toy regression arena with an image and a caption at each evaluation, and an
    end-of-run picture."""

    def media(self):
        grid = np.linspace(0, 1, 8 * 8 * 3, dtype=np.float32).reshape(8, 8, 3)
        return {"samples": Image(grid), "caption": Text("a red circle left of a blue square")}

    def artifacts(self, run_dir: str) -> dict[str, str]:
        path = Path(run_dir) / "samples.png"
        cv2.imwrite(str(path), np.full((16, 16, 3), 200, np.uint8))
        return {"samples": str(path)}


def _run(run_dir: Path, **trainer) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(CONFIG)
    arena = PictureArena({"reg": Regressor("reg", seed=0)}, epochs=2)
    cbs = standard_callbacks(
        mlflow=True, progress=False, log_every=2, overrides=OVERRIDES, **trainer
    )
    return run_arena(arena, run_dir, cbs)


def _check_run(run, history, artifacts: set[str], results: dict) -> None:
    """What every MLflow store must hold for one PaddleCraft run."""
    assert run["status"] == "FINISHED"
    params = run["params"]
    assert params["agents.reg.lr"] == "0.01" and params["arena.epochs"] == "2"
    assert params["trainer.log_every"] == "2" and params["seed"] == "0"
    assert run["tags"]["paddlecraft.headline"] == "neg_mse"
    assert run["tags"]["paddlecraft.overrides"] == " ".join(OVERRIDES)
    # the headline under its own name: the last evaluation's value, at the last step
    assert math.isclose(run["metrics"]["neg_mse"], results["headline_value"], rel_tol=1e-6)
    # eval metrics at each evaluation (2 epochs of 8 steps), train metrics every 2 steps
    assert [s for s, _ in history["eval/neg_mse"]] == [8, 16]
    assert math.isclose(history["eval/neg_mse"][-1][1], results["headline_value"], rel_tol=1e-6)
    assert [s for s, _ in history["train/loss"]] == [2, 4, 6, 8, 10, 12, 14, 16]
    assert {
        "results.json",
        "config.yaml",
        "metrics.jsonl",
        "curves.png",
        "samples.png",
    } <= artifacts
    assert (
        "media/caption/step_000008.md" in artifacts and "media/caption/step_000016.md" in artifacts
    )
    assert any(a.startswith("images/samples+step+16") and a.endswith(".png") for a in artifacts)


def test_local_store_under_the_run_folder_reads_back(tmp_path):
    from mlflow.tracking import MlflowClient

    run_dir = tmp_path / "runs" / "toy"
    results = _run(run_dir)
    db = run_dir / "mlflow" / "mlflow.db"
    assert db.is_file() and (run_dir / "mlflow" / "artifacts").is_dir()
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    (run,) = client.search_runs([client.get_experiment_by_name("paddlecraft").experiment_id])
    rid = run.info.run_id
    history = {
        k: [(m.step, m.value) for m in client.get_metric_history(rid, k)]
        for k in ("eval/neg_mse", "train/loss")
    }
    artifacts = _list_all(lambda p: client.list_artifacts(rid, p))
    _check_run(
        {
            "status": run.info.status,
            "params": run.data.params,
            "tags": run.data.tags,
            "metrics": run.data.metrics,
        },
        history,
        artifacts,
        results,
    )
    # the logged results.json is the run's own
    local = client.download_artifacts(rid, "results.json", str(tmp_path))
    assert json.loads(Path(local).read_text()) == json.loads((run_dir / "results.json").read_text())


def _list_all(list_dir) -> set[str]:
    """Every artifact file path, walking folders."""
    out: set[str] = set()
    todo = [None]
    while todo:
        for f in list_dir(todo.pop()):
            (todo.append(f.path) if f.is_dir else out.add(f.path))
    return out


def test_flatten_makes_dotted_params():
    got = flatten({"a": {"b": 1, "c": {"d": "x"}}, "e": [1, 2], "f": None, "g": True})
    assert got == {"a.b": "1", "a.c.d": "x", "e": "[1, 2]", "f": "null", "g": "true"}


def test_a_missing_mlflow_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    with pytest.raises(ImportError, match=r"pip install 'paddlecraft\[mlflow\]'"):
        _run(tmp_path / "run")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base: str, path: str, body: dict | None = None) -> dict:
    """One call of MLflow's REST API (GET without body, POST with one)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{base}/api/2.0/mlflow/{path}", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read().decode())


@pytest.mark.slow  # ~1 min: starts a real tracking server
def test_tracking_server_reads_back_through_its_rest_api(tmp_path):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "server_artifacts"), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # the server and the workers it spawns: one process group
    )  # fmt: skip
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline or server.poll() is not None:
                pytest.fail(f"mlflow server did not come up (rc {server.poll()})")
            time.sleep(1)

        run_dir = tmp_path / "runs" / "toy"
        results = _run(run_dir, mlflow_uri=base, mlflow_experiment="toy-sweep")
        assert not (run_dir / "mlflow").exists()  # everything went to the server

        exp = _api(base, "experiments/get-by-name?experiment_name=toy-sweep")["experiment"]
        (found,) = _api(base, "runs/search", {"experiment_ids": [exp["experiment_id"]]})["runs"]
        rid = found["info"]["run_id"]
        data = found["data"]
        history = {}
        for key in ("eval/neg_mse", "train/loss"):
            got = _api(base, f"metrics/get-history?run_id={rid}&metric_key={key}")["metrics"]
            history[key] = sorted((int(m["step"]), m["value"]) for m in got)

        def list_dir(path):
            q = f"artifacts/list?run_id={rid}" + (f"&path={path}" if path else "")
            files = _api(base, q).get("files", [])
            return [_File(f["path"], f["is_dir"]) for f in files]

        _check_run(
            {
                "status": found["info"]["status"],
                "params": {p["key"]: p["value"] for p in data["params"]},
                "tags": {t["key"]: t["value"] for t in data["tags"]},
                "metrics": {m["key"]: m["value"] for m in data["metrics"]},
            },
            history,
            _list_all(list_dir),
            results,
        )
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """End the server's whole process group (uvicorn and job-queue workers included)."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:  # workers that outlived the server
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait(timeout=30)


class _File:
    def __init__(self, path: str, is_dir: bool) -> None:
        self.path, self.is_dir = path, is_dir
