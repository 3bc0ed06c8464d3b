"""Every multirun ends in a summary: a Hydra callback that keeps it current as jobs end.

``conf/config.yaml`` registers `SweepSummary` under ``hydra.callbacks``, so it runs
with every launcher (basic, joblib, submitit, Ray) and sweeper (basic, Optuna): Hydra calls
``on_job_end`` inside each job's process when the job ends, and ``on_multirun_end`` in the
sweep's process when all have. Each call rebuilds ``summary.csv/json/md`` and
``summary.png`` in the sweep folder from the job folders, under a file lock
(``<sweep>/.summary.lock``), so a running or killed sweep has a correct partial summary:
finished, diverged and failed jobs with their status, jobs not yet ended absent. A job that
raised before its run wrote ``results.json`` leaves ``failed.json`` (the error, one line).

With ``trainer.mlflow=true`` in a sweep, `share_sweep_tracking` points every job at one
store (``<sweep>/mlflow/mlflow.db``) and one experiment (named after the sweep folder), which
``on_multirun_start`` creates before any job starts (two jobs creating one SQLite store at
once would race), so ``mlflow ui`` compares the jobs side by side.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from filelock import FileLock
from hydra.experimental.callback import Callback as HydraCallback
from omegaconf import DictConfig, open_dict

from paddlecraft.encoders.tensorio import atomic_write_json

from .runs import FAILED, find_runs
from .table import build_summary

log = logging.getLogger("paddlecraft")

#: the lock file jobs take while they rewrite the summary
LOCK = ".summary.lock"
#: the MLflow store a sweep shares (relative to the sweep folder)
SWEEP_STORE = Path("mlflow") / "mlflow.db"
#: the experiment name a run gets when it names none (TrainerConfig.mlflow_experiment)
DEFAULT_EXPERIMENT = "paddlecraft"
#: Optuna's record of the best trial in the sweep folder
OPTUNA_RESULTS = "optimization_results.yaml"


def sweep_dir(output_dir: str | os.PathLike, subdir: str) -> Path:
    """The sweep folder of a job: its output folder less ``hydra.sweep.subdir``."""
    out = Path(output_dir)
    depth = len(Path(subdir).parts) if subdir else 0
    return out.parents[depth - 1] if depth else out


def sweep_store(sweep: str | os.PathLike) -> tuple[str, str]:
    """The tracking URI and experiment name the jobs of ``sweep`` share."""
    return f"sqlite:///{(Path(sweep) / SWEEP_STORE).resolve()}", str(sweep)


def share_sweep_tracking(cfg: DictConfig, sweep: str | os.PathLike) -> None:
    """Point a sweep job's MLflow logging at the sweep's store and experiment.

    Only what the user left unset: their own ``trainer.mlflow_uri`` (a server) keeps its
    store, their own ``trainer.mlflow_experiment`` its name.
    """
    trainer = cfg.get("trainer")
    if trainer is None or not trainer.get("mlflow"):
        return
    uri, experiment = sweep_store(sweep)
    with open_dict(trainer):
        if not trainer.get("mlflow_uri"):
            trainer.mlflow_uri = uri
        if trainer.get("mlflow_experiment", DEFAULT_EXPERIMENT) == DEFAULT_EXPERIMENT:
            trainer.mlflow_experiment = experiment


def prepare_store(uri: str, experiment: str) -> None:
    """Create the SQLite store and the experiment (artifacts beside the database)."""
    from mlflow.tracking import MlflowClient

    db = Path(uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    if client.get_experiment_by_name(experiment) is None:
        client.create_experiment(experiment, artifact_location=(db.parent / "artifacts").as_uri())


def update_summary(sweep: str | os.PathLike) -> list[Path]:
    """Rebuild the summary of the sweep folder ``sweep`` under its lock; the files written."""
    sweep = Path(sweep)
    with FileLock(str(sweep / LOCK)):
        runs = find_runs([sweep])
        if not runs:
            return []
        summary = build_summary(runs)
        optuna = sweep / OPTUNA_RESULTS
        if optuna.is_file():
            import yaml

            best = yaml.safe_load(optuna.read_text()) or {}
            summary.extra["optuna"] = {k: best.get(k) for k in ("best_params", "best_value")}
        return summary.write(sweep)


def _is_multirun(config: DictConfig) -> bool:
    from hydra.types import RunMode

    return config.hydra.get("mode") == RunMode.MULTIRUN


class SweepSummary(HydraCallback):
    """Keeps ``<sweep>/summary.*`` current: after each job and when the sweep ends."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        trainer = config.get("trainer") or {}
        if trainer.get("mlflow") and not trainer.get("mlflow_uri"):
            sweep = Path(str(config.hydra.sweep.dir))
            try:
                prepare_store(*sweep_store(sweep))
            except ImportError:
                pass  # each job says how to install MLflow

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if not _is_multirun(config):
            return
        from hydra.core.utils import JobStatus

        out = Path(str(config.hydra.runtime.output_dir))
        sweep = sweep_dir(out, str(config.hydra.sweep.subdir or ""))
        if job_return.status == JobStatus.FAILED and not (out / "results.json").is_file():
            error = job_return._return_value
            atomic_write_json(
                out / FAILED,
                {
                    "status": "failed",
                    "error": " ".join(f"{type(error).__name__}: {error}".split())[:2000],
                    "overrides": list(job_return.overrides or []),
                },
            )
        self._update(sweep)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(str(config.hydra.sweep.dir))
        if sweep.is_dir():
            written = self._update(sweep)
            if written:
                log.info("sweep summary: %s", written[-1].parent / "summary.md")

    @staticmethod
    def _update(sweep: Path) -> list[Path]:
        try:
            return update_summary(sweep)
        except Exception as e:  # a summary must never take a sweep down with it
            log.warning("sweep summary of %s not written: %s", sweep, e)
            return []
