"""Callbacks that ship: progress, metrics.jsonl, VisualDL, evaluation, checkpoints,
early stopping, a NaN/inf guard and results.json."""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from typing import (
    Any,
    Optional,  # noqa: UP035 (OmegaConf needs typing forms)
)

from paddlecraft.agents.settings import make_settings
from paddlecraft.errors import command

from .checkpoint import list_checkpoints, save_checkpoint
from .live.config import LiveConfig
from .loop import Callback, Loop
from .mlflow_logger import MLflowLogger
from .plots import curves_chart, save
from .results import ResultsWriter, finite_or_null
from .visualdl import VisualDLLogger

log = logging.getLogger("paddlecraft")

OK_TO_SAVE = ("running", "finished", "interrupted", "stopped")
#: the checkpointer also saves an aborted run: its failed step changed nothing (StepAborted)
CHECKPOINT_ON = (*OK_TO_SAVE, "aborted")
#: the run's training curves, drawn from metrics.jsonl when a run ends
CURVES = "curves.png"


def _fmt(metrics: dict[str, Any]) -> str:
    return "  ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
    )


class Evaluator(Callback):
    """Runs the nested evaluation onion every ``every`` steps (0: each epoch) and at the end."""

    def __init__(self, every: int = 0) -> None:
        self.every = every
        self.last_step = -1

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        if self.every and loop.step % self.every == 0 and loop.status == "running":
            self._eval(loop)

    def on_epoch_end(self, loop: Loop) -> None:
        if not self.every and loop.status == "running":
            self._eval(loop)

    def on_run_end(self, loop: Loop) -> None:
        if loop.status in OK_TO_SAVE and self.last_step != loop.step:
            self._eval(loop)

    def _eval(self, loop: Loop) -> None:
        self.last_step = loop.step
        loop.evaluate()

    def state_dict(self) -> dict:
        return {"last_step": self.last_step}

    def load_state_dict(self, state: dict) -> None:
        self.last_step = int(state.get("last_step", -1))


class NanGuard(Callback):
    """Stops the run when a training metric is NaN/inf, before anything is checkpointed.

    The stop reason says which checkpoint exists (the one a resume would continue from)
    or that none does; the command line then exits with code 3 (``DIVERGED``).
    """

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        bad = {k: v for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)}
        if bad:
            found = list_checkpoints(loop.run_dir)
            if found:
                kept = (
                    f"The last good checkpoint is {found[0].name} (nothing was saved after "
                    f"it); resume from it with a lower learning rate or a gradient clip: "
                    f"{command()} resume={loop.run_dir} agents.<name>.lr=<lower> "
                    "(or agents.<name>.grad_clip=1.0)"
                )
            elif loop.arena.replays_from_start:  # its inputs are kept: a resume replays them
                kept = (
                    "No checkpoint was saved before it; the run folder keeps its inputs, so a "
                    "resume replays the run from step 0: "
                    f"{command()} resume={loop.run_dir} agents.<name>.lr=<lower> "
                    "(or agents.<name>.grad_clip=1.0)"
                )
            else:
                kept = (
                    "No checkpoint was saved before it, so there is nothing to resume: start "
                    "again with a lower learning rate or agents.<name>.grad_clip=1.0 "
                    "(trainer.checkpoint_every=N keeps checkpoints along the way)"
                )
            shown = ", ".join(f"{k}={v}" for k, v in bad.items())
            loop.request_stop(
                f"non-finite training metric at step {loop.step} ({shown}). {kept}", "diverged"
            )
            log.error("stopping: %s", loop.stop_reason)


class EarlyStopping(Callback):
    """Stops when the headline metric has not improved for ``patience`` evaluations."""

    def __init__(self, patience: int, min_delta: float = 0.0) -> None:
        self.patience, self.min_delta = patience, min_delta
        self.best: float | None = None
        self.bad = 0

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        value = metrics.get(loop.arena.headline)
        if value is None or self.patience <= 0:
            return
        sign = 1 if loop.arena.headline_mode == "max" else -1
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best, self.bad = float(value), 0
            return
        self.bad += 1
        if self.bad >= self.patience and loop.status == "running":
            loop.request_stop(
                f"early stopping: {loop.arena.headline} has not improved on {self.best:.4g} "
                f"for {self.patience} evaluations",
                "finished",
            )

    def state_dict(self) -> dict:
        return {"best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad = state.get("best"), int(state.get("bad", 0))


class Checkpointer(Callback):
    """Saves a checkpoint every ``every`` steps (0: never mid-run) and when the run stops.

    Nothing is saved after a divergence or a crash: the last good checkpoint stays.
    """

    def __init__(self, every: int = 0, keep: int = 3) -> None:
        self.every, self.keep = every, keep
        self.last_saved = -1

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        if self.every and loop.step % self.every == 0 and loop.status == "running":
            self._save(loop)

    def on_run_end(self, loop: Loop) -> None:
        if loop.status in CHECKPOINT_ON and self.last_saved != loop.step:
            self._save(loop)
        if loop.status == "interrupted":
            log.warning(
                "interrupted at step %d; checkpoint saved. Resume with: %s resume=%s",
                loop.step,
                command(),
                loop.run_dir,
            )

    def _save(self, loop: Loop) -> None:
        self.last_saved = loop.step
        path = save_checkpoint(loop, keep=self.keep)
        log.debug("checkpoint %s", path)

    def state_dict(self) -> dict:
        return {"last_saved": self.last_saved}

    def load_state_dict(self, state: dict) -> None:
        self.last_saved = int(state.get("last_saved", -1))


class JsonlLogger(Callback):
    """Appends one JSON object per logged step and per evaluation to ``metrics.jsonl``; when
    the run ends, draws them as ``curves.png`` (training losses, the headline metric)."""

    def __init__(self, every: int = 10, filename: str = "metrics.jsonl") -> None:
        self.every, self.filename = max(1, every), filename
        self._file: Any = None

    def on_run_start(self, loop: Loop) -> None:
        path = loop.run_dir / self.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():  # resumed (or replayed from step 0): drop records past the position
            keep = [
                line
                for line in path.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= loop.step
            ]
            path.write_text("".join(line + "\n" for line in keep))
        self._file = path.open("a")

    def _write(self, record: dict) -> None:
        clean, _ = finite_or_null(record)  # strict JSON: NaN/inf become null
        self._file.write(json.dumps(clean, default=float, allow_nan=False) + "\n")
        self._file.flush()

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        if loop.step % self.every == 0:
            self._write(
                {
                    "kind": "train",
                    "step": loop.step,
                    "epoch": loop.epoch,
                    **metrics,
                    "time": time.time(),
                }
            )

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        self._write(
            {"kind": "eval", "step": loop.step, "epoch": loop.epoch, **metrics, "time": time.time()}
        )

    def on_run_end(self, loop: Loop) -> None:
        if self._file is None:
            return
        self._file.close()
        self._file = None
        path = loop.run_dir / self.filename
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        save(curves_chart(records, loop.arena.headline), loop.run_dir / CURVES)


class Progress(Callback):
    """Console progress: a bar with ETA on a terminal, one concise line at intervals elsewhere.

    On a terminal (``stderr.isatty()``) a tqdm bar shows steps, ETA, the loss and the
    arena's headline metric. When output goes to a file, a pipe, a Slurm log or CI, bar
    redraws would fill the log with carriage returns, so instead one line is logged every
    ``every_s`` seconds (and at the end): ``step 120/2000 (6%) 3.1 steps/s ETA 10:05
    loss=0.123 test_accuracy=0.95``; a run of no known length (a stream) says
    ``step 120 (no known total)`` instead. ``tty`` forces either mode (tests).
    """

    def __init__(
        self,
        enabled: bool = True,
        refresh_every: int = 5,
        every_s: float = 30.0,
        tty: bool | None = None,
    ) -> None:
        self.enabled, self.refresh_every = enabled, max(1, refresh_every)
        self.every_s = float(every_s)
        self.tty = tty
        self._bar: Any = None
        self._redirect: Any = None
        self._t0 = self._last = 0.0
        self._step0 = 0

    def on_run_start(self, loop: Loop) -> None:
        tty = sys.stderr.isatty() if self.tty is None else self.tty
        self._t0 = self._last = time.monotonic()
        self._step0 = loop.step
        if not (self.enabled and tty):
            return
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        self._redirect = logging_redirect_tqdm()  # log lines print above the bar
        self._redirect.__enter__()
        self._bar = tqdm(
            total=loop.total_steps,
            initial=loop.step,
            desc=type(loop.arena).__name__,
            unit="step",
            dynamic_ncols=True,
        )

    def _postfix(self, loop: Loop, metrics: dict[str, float]) -> dict[str, str]:
        post = {k: f"{v:.4g}" for k, v in list(metrics.items())[:3] if isinstance(v, float)}
        head = loop.arena.headline
        if head in loop.last_eval:
            post[head] = f"{loop.last_eval[head]:.4g}"
        return post

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        if self._bar is not None:
            self._bar.update(1)
            if loop.step % self.refresh_every == 0:
                self._bar.set_postfix(self._postfix(loop, metrics), refresh=False)
        elif self.enabled and time.monotonic() - self._last >= self.every_s:
            self._line(loop, metrics)

    def _line(self, loop: Loop, metrics: dict[str, float]) -> None:
        now = time.monotonic()
        self._last = now
        rate = (loop.step - self._step0) / max(now - self._t0, 1e-9)
        total = loop.total_steps
        where = f"step {loop.step}"
        eta = ""
        if total:
            where += f"/{total} ({100 * loop.step / total:.0f}%)"
            if rate > 0:
                eta = f" ETA {_clock((total - loop.step) / rate)}"
        else:
            where += " (no known total)"
        post = " ".join(f"{k}={v}" for k, v in self._postfix(loop, metrics).items())
        log.info("%s %.3g steps/s%s %s", where, rate, eta, post)

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        log.info("step %d (epoch %d) eval: %s", loop.step, loop.epoch, _fmt(metrics))

    def on_run_end(self, loop: Loop) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and loop.step > self._step0:
            self._line(loop, loop.last_metrics)
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
            self._redirect = None


def _clock(seconds: float) -> str:
    """``1:02:03`` / ``2:03`` for an ETA."""
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


@dataclass
class TrainerConfig:
    """The engine's callbacks (arenas.callbacks)."""

    eval_every: int = 0  #: evaluate every N steps; 0 = at each epoch end
    log_every: int = 10  #: metrics.jsonl / VisualDL every N steps
    checkpoint_every: int = 0  #: checkpoint every N steps; 0 = only when the run stops
    keep_checkpoints: int = 3  #: how many checkpoints to keep
    early_stopping_patience: int = 0  #: stop after N evaluations without improvement; 0 = off
    progress: bool = (
        True  #: progress bar with ETA (one line every progress_every_s when not a terminal)
    )
    progress_every_s: float = (
        30.0  #: seconds between progress lines in logs that are not a terminal
    )
    visualdl: bool = False  #: log to VisualDL (pip install visualdl)
    visualdl_histograms: bool = False  #: also log parameter histograms at each evaluation
    mlflow: bool = False  #: log to MLflow (pip install 'paddlecraft[mlflow]'; docs/tracking.md)
    mlflow_uri: Optional[str] = None  #: MLflow server or store; default <run>/mlflow  # noqa: UP045
    mlflow_experiment: str = "paddlecraft"  #: MLflow experiment the run is logged under
    nan_guard: bool = True  #: stop on NaN/inf metrics, keep the last good checkpoint
    max_steps: Optional[int] = None  #: stop after N steps (smoke runs)  # noqa: UP045
    #: watch and steer the run over HTTP (trainer.live=true; docs/live.md)
    live: LiveConfig = field(default_factory=LiveConfig)


def standard_callbacks(
    trainer: TrainerConfig | None = None,
    *,
    overrides: list[str] | None = None,
    writer: bool = True,
    **settings: Any,
) -> list[Callback]:
    """The default onion, outermost first (end phases run innermost first).

    ``trainer`` (or its fields as keywords: ``standard_callbacks(checkpoint_every=100)``)
    configures them. Evaluator is innermost so that, at each end phase, evaluation happens
    before the checkpoint is written and before loggers and results see the metrics. With
    ``writer=False`` (data-parallel ranks other than 0) nothing is written to disk, but
    evaluation, early stopping and the NaN guard still run so every rank stops together.
    """
    if isinstance(settings.get("live"), bool):  # standard_callbacks(live=True)
        settings["live"] = {"enabled": settings["live"]}
    t = trainer if trainer is not None else make_settings(TrainerConfig, settings, "trainer")
    cbs: list[Callback] = []
    if t.live.enabled:  # outermost: its step end runs after every other callback's
        from .live.control import live_callback

        cbs.append(live_callback(t.live, serve=writer, keep=t.keep_checkpoints, trainer=t))
    if writer and t.mlflow:  # outermost: at run end it logs what ResultsWriter just wrote
        cbs.append(MLflowLogger(t.log_every, t.mlflow_uri, t.mlflow_experiment, overrides))
    if writer:
        cbs += [
            ResultsWriter(overrides),
            Progress(t.progress, every_s=t.progress_every_s),
            JsonlLogger(t.log_every),
        ]
        if t.visualdl:
            cbs.append(
                VisualDLLogger(t.log_every, histograms=t.visualdl_histograms, overrides=overrides)
            )
        cbs.append(Checkpointer(t.checkpoint_every, t.keep_checkpoints))
    if t.early_stopping_patience:
        cbs.append(EarlyStopping(t.early_stopping_patience))
    if t.nan_guard:
        cbs.append(NanGuard())
    cbs.append(Evaluator(t.eval_every))
    return cbs
