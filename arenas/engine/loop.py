"""The training loop as an onion (the seed's Runner + RunnerItem): phases call callbacks.

Start phases (``run_start``, ``epoch_start``, ``step_start``, ``eval_start``) call the
callbacks in list order; end phases call them in reverse, so the first callback wraps all
the others like the outer skin of an onion. An evaluation is a nested onion run from
inside training (every N steps or each epoch); a loop without training callbacks is
plain inference.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paddlecraft.agents.distributed import world_size

from .base import StepAborted
from .interrupt import StepGate, StepInterrupted
from .rng import capture_rng, restore_rng

if TYPE_CHECKING:
    from .base import Arena

log = logging.getLogger("paddlecraft")

START_PHASES = ("run_start", "epoch_start", "step_start", "eval_start")
END_PHASES = ("run_end", "epoch_end", "step_end", "eval_end")


class Callback:
    """One skin of the onion. Override the phases you need; each gets the `Loop`.

    ``on_step_end`` and ``on_eval_end`` also get the metrics dict of that step/evaluation.
    A callback with state that must survive resume implements ``state_dict`` /
    ``load_state_dict`` (JSON-able dicts).
    """

    #: key under which the callback's state is checkpointed (defaults to the class name)
    key: str | None = None

    def on_run_start(self, loop: Loop) -> None: ...
    def on_run_end(self, loop: Loop) -> None: ...
    def on_epoch_start(self, loop: Loop) -> None: ...
    def on_epoch_end(self, loop: Loop) -> None: ...
    def on_step_start(self, loop: Loop) -> None: ...
    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None: ...
    def on_eval_start(self, loop: Loop) -> None: ...
    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None: ...

    def state_dict(self) -> dict:
        """JSON-able state to checkpoint."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""

    def state_key(self) -> str:
        """Where this callback's state lives in a checkpoint."""
        return self.key or type(self).__name__


class Runner:
    """Calls a phase on a list of callbacks: start phases in order, end phases reversed."""

    def __init__(self, callbacks: Sequence[Callback]) -> None:
        self.callbacks = list(callbacks)

    def fire(self, phase: str, loop: Loop, *args: Any) -> None:
        """Run ``on_<phase>`` of every callback in onion order. At ``run_end`` every
        callback runs even when one before it raised (each releases what it holds: the live
        server its ``live.json``, a logger its file); the first error is raised after."""
        order = reversed(self.callbacks) if phase in END_PHASES else self.callbacks
        first: BaseException | None = None
        for cb in order:
            try:
                getattr(cb, f"on_{phase}")(loop, *args)
            except BaseException as e:
                if phase != "run_end":
                    raise
                if first is None:
                    first = e
                else:
                    log.exception("%s.on_run_end failed too", type(cb).__name__)
        if first is not None:
            raise first


def takes_start(arena: Arena) -> bool:
    """Whether ``arena.batches`` accepts ``start=`` (begin mid-epoch without drawing earlier batches)."""
    return "start" in inspect.signature(arena.batches).parameters


class Loop:
    """Runs an `Arena`: epochs of steps, nested evaluations, stop requests.

    Position (``epoch``, ``batch_in_epoch``, ``step``) plus the arena's and callbacks'
    state are what a checkpoint stores; data order comes from ``arena.batches(epoch)``
    which must be a function of the seed and epoch, so a resumed loop skips the batches
    already consumed and continues bit-identically. Making a loop calls
    ``arena.setup(run_dir)`` (before any checkpoint is restored into it).
    """

    def __init__(
        self,
        arena: Arena,
        callbacks: Sequence[Callback] = (),
        run_dir: str | os.PathLike = ".",
        max_steps: int | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.arena = arena
        self.runner = Runner(callbacks)
        self.run_dir = Path(run_dir)
        self.max_steps = max_steps
        self.handle_signals = handle_signals
        self.epoch = 0
        self.batch_in_epoch = 0
        self.step = 0
        self.stop_reason: str | None = None
        self.status = "running"  # running | finished | interrupted | stopped | aborted | failed
        self.last_eval: dict[str, float] = {}
        self.last_metrics: dict[str, float] = {}
        self.started = time.time()
        self._signals = 0
        #: set (from any thread) to abandon an interruptible arena's running step
        self.gate = StepGate()
        arena.step_gate = self.gate
        #: called at a boundary no step ended at (an abandoned step), before it is re-run or
        #: the run stops: the live control applies its commands there (a pause waits)
        self.at_boundary: list[Callable[[Loop], None]] = []
        arena.setup(str(self.run_dir))  # a loop is one run: bind the arena to its folder

    @property
    def callbacks(self) -> list[Callback]:
        """The onion's skins, outermost first."""
        return self.runner.callbacks

    @property
    def total_steps(self) -> int | None:
        """Steps in the whole run, when the arena knows its epoch length."""
        per = self.arena.steps_per_epoch()
        total = None if per is None else per * self.arena.epochs
        if self.max_steps is not None:
            total = self.max_steps if total is None else min(total, self.max_steps)
        return total

    def request_stop(self, reason: str, status: str = "stopped") -> None:
        """Stop after the current step (callbacks still see run_end)."""
        if self.stop_reason is None:
            self.stop_reason, self.status = reason, status

    # ------------------------------------------------------------------ running
    def run(self) -> dict[str, Any]:
        """Train until the arena's epochs are done or a stop is requested; return a summary."""
        old_handlers = self._install_signals()
        try:
            self.runner.fire("run_start", self)
            while self.epoch < self.arena.epochs and self.stop_reason is None:
                self.runner.fire("epoch_start", self)
                for i, batch in enumerate(self._remaining_batches(), start=self.batch_in_epoch):
                    self.runner.fire("step_start", self)
                    metrics = self._take_step(batch)
                    if metrics is None:  # abandoned mid-step and the run stops here
                        break
                    if not isinstance(metrics, dict):
                        raise TypeError(
                            f"{type(self.arena).__name__}.train_step must return a dict of "
                            f"metrics, got {type(metrics).__name__}"
                        )
                    self.step += 1
                    self.batch_in_epoch = i + 1
                    self.last_metrics = metrics
                    self.runner.fire("step_end", self, metrics)
                    if self.max_steps is not None and self.step >= self.max_steps:
                        self.request_stop(f"max_steps={self.max_steps} reached", "finished")
                    if self.stop_reason is not None:
                        break
                else:
                    self.epoch += 1
                    self.batch_in_epoch = 0
                    self.arena.on_epoch_end(self.epoch)
                    self.runner.fire("epoch_end", self)
            if self.stop_reason is None:
                self.status = "finished"
        except StepAborted:  # nothing of the failed step applied: the checkpointer saves
            self.status = "aborted"
            raise
        except BaseException:
            self.status = "failed" if self.status == "running" else self.status
            raise
        finally:
            try:
                self.runner.fire("run_end", self)
            finally:
                self._restore_signals(old_handlers)
        return self.summary()

    def _take_step(self, batch: Any) -> dict[str, float] | None:
        """``arena.train_step(batch)``; for an interruptible arena, a step abandoned mid-way
        (`.interrupt`) is discarded: the RNG streams go back to where the step began,
        the boundary hooks run (a live pause waits there), then the step is re-run, or None
        is returned when the run is to stop."""
        if not self.arena.interruptible:
            return self.arena.train_step(batch)
        while True:
            rng = capture_rng()
            try:
                return self.arena.train_step(batch)
            except StepInterrupted:
                restore_rng(rng)
                log.info("step %d abandoned mid-way; it is re-run on resume", self.step + 1)
            for hook in self.at_boundary:
                hook(self)
            self.gate.clear()
            if self.stop_reason is not None:
                return None

    def _remaining_batches(self) -> Iterable[Any]:
        """This epoch's batches from ``batch_in_epoch`` on (the rest were consumed before the
        checkpoint we resumed from). An arena whose ``batches`` takes ``start`` begins there
        itself (a lazy reader then never decodes the skipped batches); otherwise they are
        drawn and dropped."""
        start = self.batch_in_epoch
        if start and takes_start(self.arena):
            return self.arena.batches(self.epoch, start=start)
        return islice(self.arena.batches(self.epoch), start, None)

    def evaluate(self) -> dict[str, float]:
        """Run the nested evaluation onion; training RNG streams are left untouched."""
        rng = capture_rng()
        self.runner.fire("eval_start", self)
        metrics = self.arena.evaluate()
        restore_rng(rng)
        self.last_eval = dict(metrics)
        self.runner.fire("eval_end", self, metrics)
        return metrics

    def summary(self) -> dict[str, Any]:
        """Status, position, last metrics and the headline value."""
        head = self.arena.headline
        return {
            "status": self.status,
            "stop_reason": self.stop_reason,
            "step": self.step,
            "epoch": self.epoch,
            "headline": head,
            "headline_mode": self.arena.headline_mode,  # which way is better (summaries)
            "headline_value": self.last_eval.get(head, math.nan),
            "metrics": self.last_eval,
            "last_train_metrics": self.last_metrics,
            "elapsed_s": self.elapsed_s(),
            "run_dir": str(self.run_dir),
        }

    def elapsed_s(self) -> float:
        """Seconds the run has taken; a resumed run counts its earlier sessions up to the
        checkpoint it resumed from (``state.json``'s ``elapsed_s``)."""
        return round(time.time() - self.started, 3)

    # ------------------------------------------------------------------ position state
    def position(self) -> dict[str, int]:
        """Where the loop is (checkpointed)."""
        return {"epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch, "step": self.step}

    def set_position(self, pos: dict[str, int]) -> None:
        """Jump to a checkpointed position."""
        self.epoch, self.batch_in_epoch, self.step = (
            pos["epoch"],
            pos["batch_in_epoch"],
            pos["step"],
        )

    # ------------------------------------------------------------------ signals
    def _install_signals(self) -> dict:
        if not self.handle_signals:
            return {}
        old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                old[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread
                return old
        return old

    def _restore_signals(self, old: dict) -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            os._exit(130)  # second Ctrl-C: leave now (checkpoints on disk are atomic)
        name = signal.Signals(signum).name
        self.request_stop(f"{name} received", "interrupted")
        if world_size() == 1:  # a data-parallel rank may not leave a step its peers are in
            self.gate.request()  # an interruptible arena abandons its step at once
