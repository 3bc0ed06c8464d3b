"""Self-play collection on more cores and machines: Ray actors that each play a slice of
the games.

The learner keeps every decision about *what* is played (seats, which snapshot or anchor
sits where, ratings, the pool); each worker (a Ray actor) holds its own copies of the
policy network, receives the step's weights and its slice of the games, plays them to the
end with batched moves and returns the winners and the learner's moves. The learner then
updates on all of them, exactly as with in-process collection.

    python run.py arena=selfplay game=connect_four arena.workers.count=2
    ray start --head   # on a cluster; then, on the learner's machine:
    python run.py arena=selfplay game=connect_four arena.workers.count=8 \
        arena.workers.ray_address=auto

With no ``workers.ray_address`` a local Ray starts in this process when it has none (nothing
to set up on a laptop). Ray is the optional extra ``ray`` (``pip install
paddlecraft[ray]``), imported only here.

Worker ``w`` samples from ``np.random.default_rng([seed, COLLECT_STREAM, update, w])``: a run is
reproducible (and resumable) for a given worker count; a different count plays
different (equally distributed) games. A worker that dies (its process killed, its node
lost) is restarted by Ray and its slice replayed from the same seed and weights, so the
run goes on exactly as if nothing had happened. A worker that raises ends the run with
a `CollectorError` carrying its traceback's last line (the whole one is logged).

A stop, pause, SIGTERM or Ctrl-C during a collection takes effect within a second: the
learner waits for its workers in short `ray.wait` calls (`RayCollectors.poll_s`) and polls
the arena's ``check_interrupt`` between them. When that raises, every outstanding slice is cancelled
(``ray.cancel``) and the step is abandoned like an in-process collection's (the engine
puts the RNG streams back; a resume re-runs the step exactly). Ray refuses
``force=True`` for actor methods; for a running actor method it sets a flag, which each
worker reads before every move (as the in-process collection checks before every move),
and a slice not yet started never runs. Cancelling keeps the workers and their networks:
a pause costs no restart, and a resumed step is played by the same workers. A stop ends
the run, whose ``arena.close()`` kills the workers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from paddlecraft.agents import Policy
from paddlecraft.agents.settings import ConfigError

from ..engine.base import StepAborted
from ..engine.interrupt import StepInterrupted
from ..games import GameSpec, Player
from .local_ray import start_local_ray
from .playing import PlanEntry, frozen_policy, play_task

log = logging.getLogger("paddlecraft")


class CollectorError(StepAborted):
    """A collection worker raised: the message is one line (the worker's exception); the
    full remote traceback is in ``remote_traceback`` and the log."""

    def __init__(self, message: str, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback


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


class _Collector:
    """A collection worker's state (made a Ray actor by `RayCollectors`): the game,
    its policy networks (built on demand, one per plan entry) and the anchors."""

    def __init__(self, name: str, cfg: dict, game: str, baselines: dict) -> None:
        self.spec = GameSpec(game)
        self.name, self.cfg, self.baselines = name, cfg, baselines
        self.nets: list[Policy] = []
        self._net(0)

    def _net(self, k: int) -> Policy:
        while len(self.nets) <= k:
            self.nets.append(frozen_policy(f"{self.name}_{len(self.nets)}", self.cfg))
        return self.nets[k]

    def where(self) -> tuple[str, int]:
        """``(Ray node id, process id)`` of this worker."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def play(
        self, task: dict, plan: list[PlanEntry]
    ) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int] | None:
        """Play one slice; a ``ray.cancel`` of this call ends it before the next move,
        returning None (nobody reads it; an exception would be reported by Ray as an
        unhandled error when its reference is dropped)."""
        import ray

        context = ray.get_runtime_context()

        def check() -> None:
            if context.is_canceled():
                raise StepInterrupted("the learner cancelled this slice (stop or pause)")

        try:
            return play_task({**task, "plan": plan}, self.spec, self._net, self.baselines, check)
        except StepInterrupted:
            return None


class RayCollectors:
    """``workers`` Ray actors, each with its own policy networks, playing slices of a step.

    Args:
        workers: actors to start (>= 1).
        policy_config: ``paddlecraft.agents.Policy`` constructor arguments (``policy.config``).
        game: the game's name (``GameSpec.name``).
        baselines: the scripted players anchors may name (sent once, at start).
        name: scope prefix of the workers' networks.
        threads_per_worker: ``OMP_NUM_THREADS`` (and CPUs reserved) of each worker.
        address: a running Ray cluster (``auto``, ``ray://host:10001``, ``host:6379``);
            ``None`` joins this process's Ray if one is initialised, else starts a local one.
        retries: times a dead worker's slice is replayed (on the restarted worker).
        check: called while waiting for the workers to start (the arena's
            ``check_interrupt``); what it raises closes the pool and propagates.
    """

    #: seconds the learner waits for results between two interruption checks
    poll_s = 0.1

    def __init__(
        self,
        workers: int,
        policy_config: Mapping[str, Any],
        game: str,
        baselines: Mapping[str, Player],
        name: str = "collector",
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
        self.ray, self.workers, self.retries = ray, int(workers), int(retries)
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
        actor = ray.remote(_Collector).options(
            num_cpus=threads_per_worker,
            max_restarts=retries,
            scheduling_strategy="SPREAD",
            runtime_env={"env_vars": {"OMP_NUM_THREADS": str(threads_per_worker)}},
        )
        self.actors = [
            actor.remote(f"{name}_{w}", dict(policy_config), game, dict(baselines))
            for w in range(self.workers)
        ]
        self.restarts = 0  #: slices replayed after a worker died
        self.bytes_sent = 0  #: pickled task bytes sent by the last play()
        try:
            self.nodes = self._call(
                lambda w: self.actors[w].where.remote(), range(self.workers), check
            )
        except BaseException:  # a stop while they start: leave nothing running
            self.close()
            raise
        log.info("self-play collection: %d Ray workers", self.workers)

    def play(
        self,
        seats: np.ndarray,
        plan: Sequence[PlanEntry],
        seed: Sequence[int],
        record: int | None = 0,
        check: Callable[[], None] | None = None,
    ) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
        """Play the games of ``seats [n, 2]`` (indices into ``plan``) across the workers.

        Games are split into contiguous slices, one per worker; worker ``w`` samples
        with ``np.random.default_rng([*seed, w])``. Returns what `play_games`
        returns for all ``n`` games (record game indices are global). ``check`` (the
        arena's ``check_interrupt``) is called while waiting; what it raises cancels
        every unfinished slice and is raised here.
        """
        n = len(seats)
        bounds = np.linspace(0, n, self.workers + 1).astype(int)
        plan_ref = self.ray.put(list(plan))  # the weights go once per node, not per worker
        tasks = {}
        for w in range(self.workers):
            lo, hi = int(bounds[w]), int(bounds[w + 1])
            if hi > lo:
                tasks[w] = {"seats": seats[lo:hi], "seed": [*seed, w], "record": record}
        self.bytes_sent = len(pickle.dumps(list(plan))) + sum(
            len(pickle.dumps(t)) for t in tasks.values()
        )
        results = self._call(lambda w: self.actors[w].play.remote(tasks[w], plan_ref), tasks, check)
        winners: list[np.ndarray] = []
        records: list[dict[str, np.ndarray]] = []
        moves = 0
        for w, (win, recs, m) in zip(tasks, results, strict=True):
            lo = int(bounds[w])
            winners.append(win)
            for r in recs:
                r["game"] = r["game"] + lo
            records += recs
            moves += m
        return np.concatenate(winners), records, moves

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
                            f"self-play collector {w} died and could not be restarted "
                            f"({type(e).__name__})"
                        ) from None
                    log.warning(
                        "self-play collector %d died; replaying its slice (%d)", w, tries[w]
                    )
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
                    log.error("self-play collector %d failed:\n%s", w, text)
                    raise CollectorError(f"self-play collector {w} failed: {last}", text) from None
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
        before its next move (the worker polls Ray's cancellation flag)."""
        cancelled = 0
        for ref in refs:
            with contextlib.suppress(Exception):  # finished, or its worker is gone
                self.ray.cancel(ref)  # force=True is refused for actor methods
                cancelled += 1
        if cancelled:
            log.info("self-play collection: %d unfinished slices cancelled", cancelled)

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
