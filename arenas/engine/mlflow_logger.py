"""MLflow tracking (optional extra: ``pip install 'paddlecraft[mlflow]'``), beside VisualDL.

``trainer.mlflow=true`` logs one MLflow run per PaddleCraft run:

- parameters: the composed config (the run's ``config.yaml``), flattened to dotted keys
  (``agents.classifier.lr``);
- metrics with their steps: ``train/<k>`` every ``trainer.log_every`` steps, ``eval/<k>`` at
  each evaluation, and the headline metric under its own name (``test_accuracy``) when the
  run ends, so runs of a sweep compare on one column;
- artifacts: the arena's media at each evaluation (images as MLflow images with their step,
  text, audio as WAV), then ``results.json``, ``config.yaml``, ``metrics.jsonl``,
  ``curves.png`` and every end-of-run picture the arena writes (sample grids, sheets, plots);
- tags: ``paddlecraft.headline``, ``paddlecraft.status``, the command's overrides, the run
  folder.

Where: by default a store under the run folder, nothing to start: ``<run dir>/mlflow/mlflow.db``
(SQLite; MLflow 3 keeps its plain-folder store in maintenance mode and refuses it by default)
with artifacts in ``<run dir>/mlflow/artifacts``. ``trainer.mlflow_uri`` names a tracking
server (``http://127.0.0.1:5000``) or any store URI; a plain path is a SQLite file there, so
the jobs of a sweep can share one (``trainer.mlflow_uri=mlflow.db``). A resumed run continues
its MLflow run (the run id is checkpointed). MLflow is imported when a run starts.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from .loop import Callback, Loop
from .media import Audio, Image, Media, Text, arena_media, audio_float, image_uint8
from .visualdl import hparams_from_overrides

#: MLflow's limit on a parameter value (characters)
MAX_PARAM_CHARS = 6000
#: files of a run folder that are logged as artifacts when it ends (when present)
RUN_FILES = ("results.json", "config.yaml", "metrics.jsonl", "curves.png")
#: loop status -> MLflow run status
RUN_STATUS = {"finished": "FINISHED", "stopped": "FINISHED", "interrupted": "KILLED"}


class MLflowLogger(Callback):
    """Parameters, metrics with steps, media and artifacts of a run, to an MLflow store."""

    def __init__(
        self,
        every: int = 10,
        tracking_uri: str | None = None,
        experiment: str = "paddlecraft",
        overrides: list[str] | None = None,
    ) -> None:
        self.every, self.tracking_uri, self.experiment = max(1, every), tracking_uri, experiment
        self.overrides = list(overrides or [])
        self.run_id: str | None = None  # checkpointed: a resumed run continues its MLflow run
        self._client: Any = None

    # ------------------------------------------------------------------ where
    def store_uri(self, run_dir: Path) -> str:
        """The tracking URI: ``trainer.mlflow_uri`` or a SQLite file under the run folder."""
        uri = self.tracking_uri
        if not uri:
            return f"sqlite:///{(run_dir / 'mlflow' / 'mlflow.db').resolve()}"
        if "://" in uri or uri.startswith(("sqlite:", "file:", "databricks")):
            return uri
        return f"sqlite:///{Path(uri).expanduser().resolve()}"  # a plain path: a SQLite file

    def _experiment_id(self, run_dir: Path) -> str:
        found = self._client.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        location = None
        if self.store_uri(run_dir).startswith("sqlite:"):  # artifacts beside the database,
            db = Path(self.store_uri(run_dir).removeprefix("sqlite:///"))  # not in ./mlruns
            location = (db.parent / "artifacts").as_uri()
        try:
            return self._client.create_experiment(self.experiment, artifact_location=location)
        except Exception:  # another job of a sweep sharing the store created it meanwhile
            found = self._client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return found.experiment_id

    # ------------------------------------------------------------------ callback hooks
    def on_run_start(self, loop: Loop) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as e:
            raise ImportError(
                "trainer.mlflow=true needs MLflow: pip install 'paddlecraft[mlflow]' "
                "(or pip install mlflow), or set trainer.mlflow=false"
            ) from e
        run_dir = Path(loop.run_dir)
        uri = self.store_uri(run_dir)
        if uri.startswith("sqlite:"):
            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self._client = MlflowClient(tracking_uri=uri)
        if self.run_id is not None:  # resumed from a checkpoint
            self._client.update_run(self.run_id, status="RUNNING")
            return
        tags = {
            "paddlecraft.arena": type(loop.arena).__name__,
            "paddlecraft.headline": loop.arena.headline,
            "paddlecraft.run_dir": str(run_dir.resolve()),
            "paddlecraft.overrides": " ".join(self.overrides)[:MAX_PARAM_CHARS],
        }
        run = self._client.create_run(
            self._experiment_id(run_dir), run_name=run_name(run_dir, self.overrides), tags=tags
        )
        self.run_id = run.info.run_id
        self._log_params(run_params(run_dir, self.overrides))

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        if loop.step % self.every == 0:
            self._log_metrics({f"train/{k}": v for k, v in metrics.items()}, loop.step)

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        self._log_metrics({f"eval/{k}": v for k, v in metrics.items()}, loop.step)
        for tag, item in arena_media(loop.arena).items():
            self.log_media(tag, item, loop.step)

    def on_run_end(self, loop: Loop) -> None:
        if self._client is None or self.run_id is None:
            return
        run_dir = Path(loop.run_dir)
        head = loop.arena.headline
        self._log_metrics({head: loop.last_eval.get(head, math.nan)}, loop.step)
        for name in RUN_FILES:
            if (run_dir / name).is_file():
                self._client.log_artifact(self.run_id, str(run_dir / name))
        for path in _artifact_paths(run_dir):
            if path.is_dir():
                self._client.log_artifacts(self.run_id, str(path), artifact_path=path.name)
            elif path.is_file():
                self._client.log_artifact(self.run_id, str(path))
        self._client.set_tag(self.run_id, "paddlecraft.status", loop.status)
        self._client.set_terminated(self.run_id, status=RUN_STATUS.get(loop.status, "FAILED"))
        self._client = None

    def state_dict(self) -> dict:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: dict) -> None:
        self.run_id = state.get("run_id")

    # ------------------------------------------------------------------ writing
    def log_media(self, tag: str, item: Media, step: int) -> None:
        """Log one image (an MLflow image with its step), audio clip (WAV) or text."""
        folder = f"media/{tag}"
        if isinstance(item, Image):
            self._client.log_image(self.run_id, image_uint8(item.array), key=tag, step=step)
        elif isinstance(item, Text):
            self._client.log_text(self.run_id, item.text, f"{folder}/step_{step:06d}.md")
        elif isinstance(item, Audio):
            import soundfile

            with tempfile.TemporaryDirectory() as tmp:
                wav = Path(tmp) / f"step_{step:06d}.wav"
                soundfile.write(wav, audio_float(item.samples), int(item.sample_rate))
                self._client.log_artifact(self.run_id, str(wav), artifact_path=folder)

    def _log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [
            Metric(k, float(v), now, step)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and math.isfinite(float(v))
        ]
        if batch:
            self._client.log_batch(self.run_id, metrics=batch)

    def _log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):  # MLflow takes at most 100 params per batch
            self._client.log_batch(self.run_id, params=items[i : i + 100])


def flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": "1", "c": "[1, 2]"}`` (MLflow params)."""
    from .summary.runs import flatten as dotted

    return {
        k: (v if isinstance(v, str) else json.dumps(v))[:MAX_PARAM_CHARS]
        for k, v in dotted(tree, prefix).items()
    }


def run_params(run_dir: Path, overrides: list[str]) -> dict[str, str]:
    """The composed config of the run (its ``config.yaml``), flattened; else the overrides."""
    saved = run_dir / "config.yaml"
    if saved.is_file():
        return flatten(yaml.safe_load(saved.read_text()) or {})
    return {k: str(v) for k, v in hparams_from_overrides(overrides).items()}


def run_name(run_dir: Path, overrides: list[str]) -> str:
    """A sweep point's overrides (``agents.classifier.lr=0.01``), else the run folder's name."""
    point = [o for o in overrides if hparams_from_overrides([o])]
    return " ".join(point)[:250] if point else run_dir.name


def _artifact_paths(run_dir: Path) -> list[Path]:
    """End-of-run files the arena listed in ``results.json`` (``artifacts``)."""
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return []
    return [Path(p) for p in (results.get("artifacts") or {}).values() if isinstance(p, str)]
