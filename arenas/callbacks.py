"""Callbacks that ship: progress, metrics.jsonl, VisualDL, evaluation, checkpoints,
early stopping, a NaN/inf guard and results.json."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

from encoders.tensorio import atomic_write_json

from .checkpoint import save_checkpoint
from .engine import Callback, Loop

log = logging.getLogger("paddlecraft")

OK_TO_SAVE = ("running", "finished", "interrupted", "stopped")


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
    """Stops the run when a training metric is NaN/inf, before anything is checkpointed."""

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        bad = {k: v for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)}
        if bad:
            loop.request_stop(
                f"non-finite training metric at step {loop.step}: {bad}. The last good "
                "checkpoint is kept; lower the learning rate or set agents.<name>.grad_clip, "
                "then resume from it",
                "diverged",
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
        if loop.status in OK_TO_SAVE and self.last_saved != loop.step:
            self._save(loop)
        if loop.status == "interrupted":
            log.warning(
                "interrupted at step %d; checkpoint saved. Resume with: python run.py resume=%s",
                loop.step,
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
    """Appends one JSON object per logged step and per evaluation to ``metrics.jsonl``."""

    def __init__(self, every: int = 10, filename: str = "metrics.jsonl") -> None:
        self.every, self.filename = max(1, every), filename
        self._file: Any = None

    def on_run_start(self, loop: Loop) -> None:
        path = loop.run_dir / self.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        if loop.step and path.exists():  # resumed: drop records past the checkpoint
            keep = [
                line
                for line in path.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= loop.step
            ]
            path.write_text("".join(line + "\n" for line in keep))
        self._file = path.open("a")

    def _write(self, record: dict) -> None:
        self._file.write(json.dumps(record, default=float) + "\n")
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
        if self._file is not None:
            self._file.close()
            self._file = None


class VisualDLLogger(Callback):
    """Scalars (and images an arena returns from ``visuals()``) to VisualDL; optional extra."""

    def __init__(self, every: int = 10, logdir: str = "visualdl") -> None:
        self.every, self.logdir = max(1, every), logdir
        self._writer: Any = None

    def on_run_start(self, loop: Loop) -> None:
        try:
            from visualdl import LogWriter
        except ImportError as e:
            raise ImportError(
                "trainer.visualdl=true needs VisualDL: pip install 'paddlecraft[visualdl]' "
                "(or pip install visualdl), or set trainer.visualdl=false"
            ) from e
        self._writer = LogWriter(logdir=str(loop.run_dir / self.logdir))

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        if loop.step % self.every == 0:
            for k, v in metrics.items():
                self._writer.add_scalar(tag=f"train/{k}", step=loop.step, value=float(v))

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            self._writer.add_scalar(tag=f"eval/{k}", step=loop.step, value=float(v))
        visuals = getattr(loop.arena, "visuals", None)
        for tag, image in (visuals() if callable(visuals) else {}).items():
            self._writer.add_image(tag=tag, img=image, step=loop.step)

    def on_run_end(self, loop: Loop) -> None:
        if self._writer is not None:
            self._writer.close()


class Progress(Callback):
    """Console: a progress bar with ETA, the loss and the arena's headline metric."""

    def __init__(self, enabled: bool = True, refresh_every: int = 5) -> None:
        self.enabled, self.refresh_every = enabled, max(1, refresh_every)
        self._bar: Any = None
        self._redirect: Any = None

    def on_run_start(self, loop: Loop) -> None:
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        if self.enabled:  # log lines print above the bar instead of through it
            self._redirect = logging_redirect_tqdm()
            self._redirect.__enter__()

        self._bar = tqdm(
            total=loop.total_steps,
            initial=loop.step,
            desc=type(loop.arena).__name__,
            unit="step",
            disable=not self.enabled,
            dynamic_ncols=True,
        )

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        self._bar.update(1)
        if loop.step % self.refresh_every == 0:
            post = {k: f"{v:.4g}" for k, v in list(metrics.items())[:3]}
            head = loop.arena.headline
            if head in loop.last_eval:
                post[head] = f"{loop.last_eval[head]:.4g}"
            self._bar.set_postfix(post, refresh=False)

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        log.info("step %d (epoch %d) eval: %s", loop.step, loop.epoch, _fmt(metrics))

    def on_run_end(self, loop: Loop) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
            self._redirect = None


class ResultsWriter(Callback):
    """Writes ``results.json``: status, headline metrics, the command's overrides, artifacts."""

    def __init__(self, overrides: list[str] | None = None, config: dict | None = None) -> None:
        self.overrides = list(overrides or [])
        self.config = config
        self.results: dict[str, Any] = {}

    def on_run_end(self, loop: Loop) -> None:
        results = loop.summary()
        results["overrides"] = self.overrides
        if loop.status in ("finished", "interrupted", "stopped"):
            results["artifacts"] = loop.arena.artifacts(str(loop.run_dir))
        self.results = results
        atomic_write_json(Path(loop.run_dir) / "results.json", results)
        head = loop.arena.headline
        log.info(
            "%s: %s=%s  (status %s%s) -> %s",
            type(loop.arena).__name__,
            head,
            f"{results['headline_value']:.4f}"
            if results["headline_value"] == results["headline_value"]
            else "n/a",
            loop.status,
            f": {loop.stop_reason}" if loop.stop_reason else "",
            Path(loop.run_dir) / "results.json",
        )


def standard_callbacks(
    *,
    eval_every: int = 0,
    log_every: int = 10,
    checkpoint_every: int = 0,
    keep_checkpoints: int = 3,
    early_stopping_patience: int = 0,
    progress: bool = True,
    visualdl: bool = False,
    nan_guard: bool = True,
    overrides: list[str] | None = None,
    writer: bool = True,
) -> list[Callback]:
    """The default onion, outermost first (end phases run innermost first).

    Evaluator is innermost so that, at each end phase, evaluation happens before the
    checkpoint is written and before loggers and results see the metrics. With
    ``writer=False`` (data-parallel ranks other than 0) nothing is written to disk, but
    evaluation, early stopping and the NaN guard still run so every rank stops together.
    """
    cbs: list[Callback] = []
    if writer:
        cbs += [ResultsWriter(overrides), Progress(progress), JsonlLogger(log_every)]
        if visualdl:
            cbs.append(VisualDLLogger(log_every))
        cbs.append(Checkpointer(checkpoint_every, keep_checkpoints))
    if early_stopping_patience:
        cbs.append(EarlyStopping(early_stopping_patience))
    if nan_guard:
        cbs.append(NanGuard())
    cbs.append(Evaluator(eval_every))
    return cbs
