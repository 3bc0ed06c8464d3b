"""A pool of Ray actors that collect an arena's training data in slices: ``arena.workers``.

An arena that collects on more cores or machines (self-play's games, arena=marl's
rollouts) subclasses `RayWorker` for what one actor holds and does, and `RayPool` for
how the lead process splits a step over the actors and merges what they return. This
module owns what every such arena shares: the settings (`WorkersConfig`), the missing
extra's error line (`require_ray`), joining a cluster or starting a local Ray on
loopback (`paddlecraft.arenas.engine.local_ray`), restarting a dead actor and replaying
its slice, and a stop or pause that takes effect within a second.

While the lead waits for its actors it polls the arena's ``check_interrupt`` between short
``ray.wait`` calls (`RayPool.poll_s`). When that raises, every outstanding call is
cancelled (``ray.cancel``; Ray refuses ``force=True`` for actor methods and sets a flag
instead, which a worker reads through `RayWorker.check`) and the step is abandoned like an
in-process one. Cancelling keeps the actors: a pause costs no restart. ``close()`` kills
them. Ray is the optional extra ``ray``, imported only here and in the actors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np

from paddlecraft.agents.settings import ConfigError

from .base import StepAborted
from .interrupt import StepInterrupted
from .local_ray import start_local_ray

log = logging.getLogger("paddlecraft")


@dataclass
class WorkersConfig:
    """``arena.workers``: where the training data is collected (games, rollouts)."""

    count: int = 0
    """Ray workers collecting the training data (0: in this process; extra ``ray``)."""
    threads: int = 1
    """``OMP_NUM_THREADS`` (and Ray CPUs) of each worker."""
    ray_address: Optional[str] = None  # noqa: UP045
    """A running Ray cluster to collect on (``auto`` after ``ray start --head``); null: this
    process's Ray, started locally when none is running."""

    def check(self, at: str = "arena.workers") -> None:
        """Refuse values no collection can use, naming ``<at>.<key>``."""
        if self.count < 0 or self.threads < 1:
            raise ConfigError(
                f"{at}.count must be >= 0 (0: collect in this process) and {at}.threads "
                f">= 1, got {self.count} and {self.threads}"
            )


class CollectorError(StepAborted):
    """A collection worker raised: the message is one line (the worker's exception); the
    full remote traceback is in ``remote_traceback`` and the log."""

    def __init__(self, message: str, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback


def weights_of(layer: Any) -> dict[str, np.ndarray]:
    """A numpy copy of ``layer.state_dict()`` (structured keys), what a pool sends its
    workers: never a live view, which would follow the optimizer."""
    return {k: np.array(v.numpy(), copy=True) for k, v in layer.state_dict().items()}


def require_ray() -> Any:
    """The ``ray`` module, or a one-line `ConfigError` naming the extra."""
    try:
        import ray
    except ImportError as e:
        raise ConfigError(
            f"arena.workers.count > 0 runs collection on Ray, which is the optional extra "
            f"'ray': pip install paddlecraft[ray] ({e})"
        ) from None
    return ray


class RayWorker:
    """Base of a pool's actor class: where it runs, and whether the lead cancelled it."""

    def where(self) -> tuple[str, int]:
        """``(Ray node id, process id)`` of this worker."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    @staticmethod
    def check() -> None:
        """Raise `StepInterrupted` when the lead cancelled the running call (a stop or
        pause): call it before every move or step of a slice."""
        import ray

        if ray.get_runtime_context().is_canceled():
            raise StepInterrupted("the learner cancelled this slice (stop or pause)")


class RayPool:
    """``workers`` Ray actors of class ``actor`` (a `RayWorker`), one per slice of a step.

    Args:
        workers: actors to start (>= 1).
        actor: the actor class; actor ``w`` is made with ``args(w)``.
        args: constructor arguments of actor ``w``.
        label: what the log and errors call one actor (``self-play collector``).
        threads_per_worker: ``OMP_NUM_THREADS`` (and CPUs reserved) of each worker.
        address: a running Ray cluster (``auto``, ``ray://host:10001``, ``host:6379``);
            ``None`` joins this process's Ray if one is initialised, else starts a local one.
        retries: times a dead worker's slice is replayed (on the restarted worker).
        check: called while waiting for the workers to start (the arena's
            ``check_interrupt``); what it raises closes the pool and propagates.
    """

    #: seconds the lead waits for results between two interruption checks
    poll_s = 0.1

    def __init__(
        self,
        workers: int,
        actor: type,
        args: Callable[[int], Sequence[Any]],
        label: str = "collection worker",
        threads_per_worker: int = 1,
        address: str | None = None,
        retries: int = 3,
        check: Callable[[], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ConfigError(
                f"arena.workers.count: Ray collection needs >= 1 worker, got {workers}"
            )
        ray = require_ray()
        self.ray, self.workers, self.retries, self.label = ray, int(workers), int(retries), label
        self.started_ray = False
        if not ray.is_initialized() and address:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        elif not ray.is_initialized():  # this machine only: every port on loopback
            start_local_ray(ray, num_cpus=max(os.cpu_count() or 1, workers))
            self.started_ray = True
        remote = ray.remote(actor).options(
            num_cpus=threads_per_worker,
            max_restarts=retries,
            scheduling_strategy="SPREAD",
            runtime_env={"env_vars": {"OMP_NUM_THREADS": str(threads_per_worker)}},
        )
        self.actors = [remote.remote(*args(w)) for w in range(self.workers)]
        self.restarts = 0  #: slices replayed after a worker died
        try:
            self.nodes = self._call(
                lambda w: self.actors[w].where.remote(), range(self.workers), check
            )
        except BaseException:  # a stop while they start: leave nothing running
            self.close()
            raise
        log.info("%s: %d Ray workers", label, self.workers)

    def _call(
        self,
        submit: Callable[[int], Any],
        workers: Iterable[int],
        check: Callable[[], None] | None = None,
    ) -> list[Any]:
        """Results of ``submit(w)`` for every worker, in order; a slice whose worker died
        is submitted again (Ray restarts the actor) up to ``retries`` times. With
        ``check``, results are awaited in `poll_s` slices with ``check()`` between them;
        whatever it raises (or a Ctrl-C) cancels the unfinished calls and propagates."""
        ray = self.ray
        workers = list(workers)
        refs = {w: submit(w) for w in workers}
        out: dict[int, Any] = {}
        tries = dict.fromkeys(workers, 0)
        try:
            while refs:
                w, ref = self._next_ready(refs, check)
                try:
                    out[w] = ray.get(ref)
                    del refs[w]
                except ray.exceptions.RayActorError as e:
                    tries[w] += 1
                    if tries[w] > self.retries or not self._await_restart(w, check=check):
                        raise CollectorError(
                            f"{self.label} {w} died and could not be restarted ({type(e).__name__})"
                        ) from None
                    log.warning("%s %d died; replaying its slice (%d)", self.label, w, tries[w])
                    self.restarts += 1
                    refs[w] = submit(w)
                except ray.exceptions.RayTaskError as e:
                    del refs[w]
                    for other in refs.values():  # no result left behind
                        with contextlib.suppress(Exception):
                            ray.get(other)
                    refs.clear()
                    text = str(e)
                    last = [line for line in text.splitlines() if line.strip()][-1].strip()
                    log.error("%s %d failed:\n%s", self.label, w, text)
                    raise CollectorError(f"{self.label} {w} failed: {last}", text) from None
        except BaseException:
            self._cancel(refs.values())
            raise
        return [out[w] for w in workers]

    def _next_ready(
        self, refs: Mapping[int, Any], check: Callable[[], None] | None
    ) -> tuple[int, Any]:
        """``(worker, ref)`` of a finished call among ``refs``; without ``check``, the
        first worker's (waiting for it), else whichever finishes first, with ``check()``
        called every `poll_s` seconds."""
        if check is None:
            return next(iter(refs.items()))
        by_ref = {ref: w for w, ref in refs.items()}
        while True:
            check()
            ready, _ = self.ray.wait(list(by_ref), num_returns=1, timeout=self.poll_s)
            if ready:
                return by_ref[ready[0]], ready[0]

    def _cancel(self, refs: Iterable[Any]) -> None:
        """Cancel unfinished actor calls: a queued one never runs, a running one ends
        at its next `RayWorker.check`."""
        cancelled = 0
        for ref in refs:
            with contextlib.suppress(Exception):  # finished, or its worker is gone
                self.ray.cancel(ref)  # force=True is refused for actor methods
                cancelled += 1
        if cancelled:
            log.info("%s: %d unfinished slices cancelled", self.label, cancelled)

    def _await_restart(
        self, w: int, timeout: float = 300.0, check: Callable[[], None] | None = None
    ) -> bool:
        """Wait until Ray has restarted worker ``w`` (it answers again); False if it is
        dead for good (restarts used up) or not back within ``timeout`` seconds. ``check``
        is called while waiting (what it raises propagates)."""
        ray, end = self.ray, time.monotonic() + timeout
        while time.monotonic() < end:
            ref = self.actors[w].where.remote()
            answer_by = min(end, time.monotonic() + 30)
            while time.monotonic() < answer_by and not ray.wait([ref], timeout=self.poll_s)[0]:
                if check is not None:
                    check()
            try:
                ray.get(ref, timeout=0)
                return True
            except ray.exceptions.ActorDiedError:
                return False
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                time.sleep(0.5)  # still restarting
        return False

    def close(self) -> None:
        """Stop the workers (idempotent); shut down the Ray this pool started."""
        for a in getattr(self, "actors", []):
            with contextlib.suppress(Exception):
                self.ray.kill(a)
        self.actors = []
        if self.started_ray and self.ray.is_initialized():
            self.ray.shutdown()
            self.started_ray = False
