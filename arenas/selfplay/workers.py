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
paddlecraft[ray]``). Starting Ray, replaying a dead worker's slice and cancelling are
`paddlecraft.arenas.engine.ray_pool.RayPool`'s, shared with arena=marl's rollouts.

Worker ``w`` samples from ``np.random.default_rng([seed, COLLECT_STREAM, update, w])``: a run is
reproducible (and resumable) for a given worker count; a different count plays
different (equally distributed) games. A worker that dies (its process killed, its node
lost) is restarted by Ray and its slice replayed from the same seed and weights, so the
run goes on exactly as if nothing had happened. A worker that raises ends the run with
a `CollectorError` carrying its traceback's last line (the whole one is logged).

A stop, pause, SIGTERM or Ctrl-C during a collection takes effect within a second: the
learner waits for its workers in short `ray.wait` calls (`RayPool.poll_s`) and polls the
arena's ``check_interrupt`` between them. When that raises, every outstanding slice is cancelled
(``ray.cancel``) and the step is abandoned like an in-process collection's (the engine
puts the RNG streams back; a resume re-runs the step exactly). Ray refuses
``force=True`` for actor methods; for a running actor method it sets a flag, which each
worker reads before every move (as the in-process collection checks before every move),
and a slice not yet started never runs. Cancelling keeps the workers and their networks:
a pause costs no restart, and a resumed step is played by the same workers. A stop ends
the run, whose ``arena.close()`` kills the workers.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from paddlecraft.agents import Policy

from ..engine.interrupt import StepInterrupted
from ..engine.ray_pool import CollectorError, RayPool, RayWorker, require_ray
from ..games import GameSpec, Player
from .playing import PlanEntry, frozen_policy, play_task

__all__ = ["CollectorError", "RayCollectors", "require_ray"]


class _Collector(RayWorker):
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

    def play(
        self, task: dict, plan: list[PlanEntry]
    ) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int] | None:
        """Play one slice; a ``ray.cancel`` of this call ends it before the next move,
        returning None (nobody reads it; an exception would be reported by Ray as an
        unhandled error when its reference is dropped)."""
        try:
            return play_task(
                {**task, "plan": plan}, self.spec, self._net, self.baselines, self.check
            )
        except StepInterrupted:
            return None


class RayCollectors(RayPool):
    """``workers`` Ray actors, each with its own policy networks, playing slices of a step.

    Args:
        workers: actors to start (>= 1).
        policy_config: ``paddlecraft.agents.Policy`` constructor arguments (``policy.config``).
        game: the game's name (``GameSpec.name``).
        baselines: the scripted players anchors may name (sent once, at start).
        name: scope prefix of the workers' networks.
        **pool: `RayPool`'s ``threads_per_worker``, ``address``, ``retries``, ``check``.
    """

    def __init__(
        self,
        workers: int,
        policy_config: Mapping[str, Any],
        game: str,
        baselines: Mapping[str, Player],
        name: str = "collector",
        **pool: Any,
    ) -> None:
        self.bytes_sent = 0  #: pickled task bytes sent by the last play()
        super().__init__(
            workers,
            _Collector,
            lambda w: (f"{name}_{w}", dict(policy_config), game, dict(baselines)),
            label="self-play collector",
            **pool,
        )

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
