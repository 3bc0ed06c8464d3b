"""The live control: commands from HTTP applied on the training thread at step boundaries.

`LiveControl` is the concrete `LiveContext`
and the outermost callback of a live run. HTTP handlers (the server's thread) only queue:
a command (pause, resume, checkpoint, evaluate, stop, set) or a function
(`LiveControl.call_soon`). The
training thread applies them at the end of a step, after every other callback, and
appends each applied command to ``control.jsonl`` with its step. A pause blocks the
training thread there (still applying commands and ``call_soon`` work) until a resume or
a stop; a stop or a pause also asks an interruptible arena to abandon its running step
(`..interrupt`), so a long step holds nothing hostage.

Nothing the training thread reads is changed by the server's thread, so a live run that
is paused, watched or checkpointed stays bit-identical to one that is not.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import queue
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..interrupt import StepInterrupted
from ..loop import Callback, Loop
from .config import COMMANDS, LiveConfig, RunEnded, write_live_json  # noqa: F401 (re-exported)
from .events import EventHub

if TYPE_CHECKING:
    from .server import LiveServer

log = logging.getLogger("paddlecraft")
T = TypeVar("T")

#: the run folder's control log: one JSON line per applied command
CONTROL_FILE = "control.jsonl"


@dataclass
class Command:
    """One queued command and the future its result (the ``control.jsonl`` record) lands in."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    future: Future = field(default_factory=Future)


class LiveControl(Callback):
    """The live run's control and `LiveContext`; starts the server at run start.

    Args:
        cfg: ``trainer.live``.
        serve: False on data-parallel ranks other than 0 (they follow rank 0's commands).
    """

    key = "LiveControl"

    def __init__(
        self, cfg: LiveConfig, serve: bool = True, keep: int = 3, trainer: Any = None
    ) -> None:
        self.cfg = cfg
        #: the run's ``trainer`` settings (a ``TrainerConfig``): what a ``set`` checks against
        self.trainer = trainer
        self.serve = serve
        self.keep = keep  #: checkpoints kept when a command saves one (trainer.keep_checkpoints)
        #: the bearer token every /api/* request carries (live.json, mode 0600)
        self.token = secrets.token_urlsafe(32)
        #: running | paused | stopping, then the run's end status (finished, stopped...)
        self.state = "starting"
        self.events = EventHub()
        self.loop: Loop | None = None
        self.server: LiveServer | None = None
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        self._bell = threading.Event()  # rung by anything queued and by wake()
        self._ended = False
        self._ids = itertools.count(1)
        self._log_file: Any = None
        # what status reads: replaced whole (one reference) on the training thread
        self._snap: dict[str, Any] = {"step": 0, "epoch": 0, "metrics": {}, "time": time.time()}
        self._t0 = time.monotonic()
        self._step0 = 0
        self._dp = False  # data-parallel: rank 0 hands its applied commands to the others
        #: data-parallel: seconds between rank 0's broadcasts while it is paused
        self.heartbeat_s = 5.0
        self._applied: list[tuple[str, dict[str, Any]]] = []
        self._deferred: list[Command] = []  # data-parallel: evaluations run after the broadcast

    # ------------------------------------------------------------------ LiveContext
    @property
    def run_dir(self) -> Path:
        """The run folder."""
        if self.loop is None:
            raise RuntimeError("the live control is not attached to a run yet")
        return self.loop.run_dir

    def call_soon(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the training thread at the next step boundary (at once while
        paused or idle); its result or exception lands in the returned future."""
        fut: Future[T] = Future()
        if self._ended:
            fut.set_exception(RunEnded("the run has ended"))
            return fut
        self._calls.put((fn, fut))
        self._bell.set()
        return fut

    def idle_wait(self, timeout: float) -> None:
        """On the training thread, with nothing to train on: apply what is queued, then
        sleep until `wake`, a command or ``timeout`` seconds. A pause waits here; a
        stop raises `StepInterrupted` (the arena must be
        ``interruptible``, so the loop discards the step)."""
        loop = self._need_loop()
        self.at_boundary(loop)
        if loop.stop_reason is None:
            self._bell.wait(timeout)
            self.at_boundary(loop)
        if loop.stop_reason is not None:
            raise StepInterrupted(loop.stop_reason)

    def wake(self) -> None:
        """Wake the training thread from `idle_wait`."""
        self._bell.set()

    def record(self, command: str, **fields: Any) -> None:
        """Append ``{"command", "step", "time", **fields}`` to ``control.jsonl`` (rank 0
        of a data-parallel run only)."""
        loop = self._need_loop()
        if not self.serve:
            return
        if self._log_file is None:
            self._log_file = (loop.run_dir / CONTROL_FILE).open("a")
        line = {"command": command, "step": loop.step, "time": round(time.time(), 3), **fields}
        self._log_file.write(json.dumps(line, default=str) + "\n")
        self._log_file.flush()

    # ------------------------------------------------------------------ from the server
    def submit(self, name: str, args: dict[str, Any] | None = None) -> Command:
        """Queue a command (any thread); stop and pause also ask an interruptible arena to
        abandon its running step. Its future holds the ``control.jsonl`` record."""
        if name not in COMMANDS:
            raise ValueError(f"unknown live command {name!r}; one of {COMMANDS}")
        cmd = Command(name, dict(args or {}))
        if self._ended:
            cmd.future.set_exception(RunEnded("the run has ended"))
            return cmd
        self._commands.put(cmd)
        # a data-parallel rank may not leave a step its peers are inside (their collective
        # would wait for it forever): there, commands wait for the boundary
        if name in ("stop", "pause") and self.loop is not None and not self._dp:
            self.loop.gate.request()
        self._bell.set()
        return cmd

    def status(self) -> dict[str, Any]:
        """State, position, rate, ETA and the last metrics (any thread; no lock: the
        training thread replaces the snapshot whole)."""
        snap = self._snap
        loop = self.loop
        total = loop.total_steps if loop is not None else None
        elapsed = time.monotonic() - self._t0
        rate = (snap["step"] - self._step0) / elapsed if elapsed > 0 else 0.0
        eta = (total - snap["step"]) / rate if total and rate > 0 else None
        return {
            "state": self.state,
            "step": snap["step"],
            "epoch": snap["epoch"],
            "total_steps": total,
            "steps_per_s": round(rate, 4),
            "eta_s": None if eta is None else round(eta, 1),
            "last_metrics": _finite(snap["metrics"]),
            "last_eval": _finite(loop.last_eval) if loop is not None else {},
            "arena": type(loop.arena).__name__ if loop is not None else None,
            "headline": loop.arena.headline if loop is not None else None,
            "stop_reason": loop.stop_reason if loop is not None else None,
        }

    # ------------------------------------------------------------------ callback
    def on_run_start(self, loop: Loop) -> None:
        self.loop = loop
        self._step0 = loop.step
        self._t0 = time.monotonic()
        self._snap = {"step": loop.step, "epoch": loop.epoch, "metrics": {}, "time": time.time()}
        loop.at_boundary.append(self.at_boundary)
        loop.arena.live = self
        self.state = "running"
        from paddlecraft.agents.distributed import world_size

        self._dp = world_size() > 1
        if self.serve:
            from .server import LiveServer

            self.server = LiveServer(self, self.cfg)
            self.server.start()

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        self._snap = {"step": loop.step, "epoch": loop.epoch, "metrics": metrics,
                      "time": time.time()}  # fmt: skip
        self.events.publish({"kind": "train", "step": loop.step, "epoch": loop.epoch,
                             **_finite(metrics)})  # fmt: skip
        if self.serve and (self._bell.is_set() or self.state == "paused"):
            self.at_boundary(loop, max_wait=self.heartbeat_s if self._dp else None)
        if self._dp:
            self._share(loop)

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        self.events.publish({"kind": "eval", "step": loop.step, "epoch": loop.epoch,
                             **_finite(metrics)})  # fmt: skip

    def on_run_end(self, loop: Loop) -> None:
        self._ended = True
        self.state = loop.status
        self.events.publish({"kind": "state", "state": self.state, "step": loop.step})
        self._fail_pending()
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        loop.arena.live = None
        if self.at_boundary in loop.at_boundary:
            loop.at_boundary.remove(self.at_boundary)

    # ------------------------------------------------------------------ the boundary
    def at_boundary(self, loop: Loop, max_wait: float | None = None) -> None:
        """Apply what is queued; while paused, wait here for more (a resume or a stop), or
        at most ``max_wait`` seconds (then return paused)."""
        end = None if max_wait is None else time.monotonic() + max_wait
        while True:
            self._bell.clear()
            self._drain(loop)
            if self.state != "paused" or loop.stop_reason is not None:
                break
            if end is not None and time.monotonic() >= end:
                break
            self._bell.wait(0.25)  # wakes for a command; the timeout lets a signal's stop in
        loop.gate.clear()
        if not self._commands.empty() and not self._dp:  # queued while we cleared
            loop.gate.request()

    def _share(self, loop: Loop) -> None:
        """Data-parallel: rank 0 broadcasts the commands it applied at this boundary; the
        other ranks apply the ones that change the run (stop, set, evaluate), so every rank
        does so at the same step. While rank 0 is paused it broadcasts again every
        `heartbeat_s` seconds (with what it applied meanwhile) and the other ranks wait for
        the next one: none waits in a single broadcast longer than the collective backend
        allows (gloo gives up after 30 s). An evaluation command runs after the broadcast,
        on every rank at once, so no rank waits in a collective while another evaluates."""
        import paddle.distributed as dist

        while True:
            paused = self.serve and self.state == "paused" and loop.stop_reason is None
            box: list[Any] = [(self._applied, paused) if self.serve else None]
            dist.broadcast_object_list(box, src=0)
            self._applied = []
            applied, paused = box[0]
            if not self.serve:
                self._follow(loop, applied)
            deferred, self._deferred = self._deferred, []
            for cmd in deferred:
                try:
                    cmd.future.set_result(self._apply(loop, cmd))
                except Exception as e:  # noqa: BLE001 (the handler reports it)
                    cmd.future.set_exception(e)
            if not paused:
                return
            if self.serve:
                self.at_boundary(loop, max_wait=self.heartbeat_s)

    def _follow(self, loop: Loop, applied: list[tuple[str, dict[str, Any]]]) -> None:
        """A data-parallel follower applies the commands rank 0 applied at this step."""
        for name, args in applied:
            if name == "stop":
                loop.request_stop("stopped from the live endpoint", "stopped")
            elif name == "evaluate":
                loop.evaluate()
            elif name == "set":
                from .changes import apply_live_changes

                changes = apply_live_changes(loop, args, write=False)
                log.info("live: set from rank 0 applied at step %d: %s", loop.step, changes)

    def _drain(self, loop: Loop) -> None:
        while True:
            try:
                fn, fut = self._calls.get_nowait()
            except queue.Empty:
                break
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except Exception as e:  # noqa: BLE001 (the caller's handler reports it)
                    fut.set_exception(e)
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if not cmd.future.set_running_or_notify_cancel():
                continue
            if self._dp and cmd.name == "evaluate":  # every rank evaluates after `_share`
                self._applied.append((cmd.name, cmd.args))
                self._deferred.append(cmd)
                continue
            try:
                cmd.future.set_result(self._apply(loop, cmd))
            except Exception as e:  # noqa: BLE001 (a refused set: the handler answers 400)
                cmd.future.set_exception(e)

    def _apply(self, loop: Loop, cmd: Command) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if cmd.name == "pause":
            if loop.stop_reason is None:
                self.state = "paused"
        elif cmd.name == "resume":
            if self.state == "paused":
                self.state = "running"
        elif cmd.name == "stop":
            loop.request_stop("stopped from the live endpoint", "stopped")
            self.state = "stopping"
        elif cmd.name == "checkpoint":
            fields["path"] = str(self._checkpoint(loop).relative_to(loop.run_dir))
        elif cmd.name == "evaluate":
            fields["metrics"] = _finite(loop.evaluate())
        elif cmd.name == "set":
            from .changes import apply_live_changes

            fields["changes"] = apply_live_changes(
                loop, cmd.args, checkpoint=lambda: self._checkpoint(loop)
            )
        if self._dp and cmd.name in ("stop", "set"):
            self._applied.append((cmd.name, cmd.args))
        self.record(cmd.name, **fields)
        self.events.publish({"kind": "command", "command": cmd.name, "step": loop.step,
                             "state": self.state})  # fmt: skip
        return {"command": cmd.name, "step": loop.step, "state": self.state, **fields}

    def _checkpoint(self, loop: Loop) -> Path:
        from ..checkpoint import save_checkpoint

        return save_checkpoint(loop, keep=self.keep)

    def _fail_pending(self) -> None:
        for q in (self._commands, self._calls):
            while True:
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
                fut = item.future if isinstance(item, Command) else item[1]
                if not fut.done():
                    fut.set_exception(RunEnded("the run has ended"))

    def _need_loop(self) -> Loop:
        if self.loop is None:
            raise RuntimeError("the live control is not attached to a run yet")
        return self.loop


def _finite(metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics as strict JSON: NaN and inf become None."""
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v)
        for k, v in metrics.items()
    }


def live_callback(
    cfg: LiveConfig, serve: bool = True, keep: int = 3, trainer: Any = None
) -> LiveControl:
    """The live control for ``trainer.live`` (``serve=False``: a data-parallel follower;
    ``keep``: checkpoints kept when a command saves one; ``trainer``: the run's trainer
    settings, which a ``set`` is checked against)."""
    return LiveControl(cfg, serve=serve, keep=keep, trainer=trainer)
