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
from ..games import GameSpec, Player
from .alphazero import search_controller
from .league import OpponentPool, Snapshot
from .local_ray import start_local_ray

log = logging.getLogger("paddlecraft")

#: a controller maps (planes, masks) of the games where it moves to actions and a dict of
#: per-move arrays to record (``{"logp", "value"}`` for PPO, ``{"pi", "root_value"}`` for
#: search), or None
Controller = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, Any]]

#: one seat-controller of a collection plan: ``("learner", weights)`` samples and records
#: log-probabilities and values; ``("search", (weights, arena.search))`` plays with
#: PUCT search and records visit distributions; ``("snapshot", weights)`` samples;
#: ``("anchor", name)`` is a scripted baseline
PlanEntry = tuple[str, Any]


def play_games(
    spec: GameSpec,
    n: int,
    seat_controllers: np.ndarray,
    controllers: Sequence[Controller],
    record: int | None = None,
    check: Callable[[], None] | None = None,
) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
    """Play ``n`` games of ``spec`` to the end, all at once.

    ``seat_controllers[g, s]`` is the index in ``controllers`` that plays seat ``s`` of
    game ``g``; each move, every controller gets one batched call with the boards it has
    to move on. Returns ``(winner [n], records, total moves)``, where ``records`` holds,
    per move, the boards, masks, actions and recorded arrays of controller ``record``.
    ``check`` is called before each move (the arena's ``check_interrupt``: a stop or a
    pause abandons the collection there).
    """
    game = spec.make(n)
    records: list[dict[str, np.ndarray]] = []
    moves = 0
    ply = 0
    while not game.done.all():
        if check is not None:
            check()
        idx = np.flatnonzero(~game.done)
        planes, masks = game.observe(idx)
        who = seat_controllers[idx, game.to_move[idx]]
        actions = np.zeros(len(idx), np.int64)
        for c in np.unique(who):
            sel = who == c
            a, extra = controllers[c](planes[sel], masks[sel])
            actions[sel] = a
            if record is not None and c == record:
                records.append(
                    {
                        "ply": np.full(int(sel.sum()), ply),
                        "game": idx[sel],
                        "obs": planes[sel],
                        "mask": masks[sel],
                        "action": a,
                        **(extra or {}),
                    }
                )
        game.step(actions, idx)
        moves += len(idx)
        ply += 1
    return game.winner.copy(), records, moves


def frozen_policy(name: str, config: Mapping[str, Any]) -> Policy:
    """An opponent network: ``paddlecraft.agents.Policy`` with ``config``, in eval mode, never trained.

    Built seeded, so building one never draws from a global stream (resume-safe); its
    initial weights are overwritten by whatever it is loaded with.
    """
    policy = Policy(name, **{**config, "seed": 0})
    policy.eval()
    return policy


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
    ) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
        return _play_task({**task, "plan": plan}, self.spec, self._net, self.baselines)


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
    """

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
        self.nodes = self._call(lambda w: self.actors[w].where.remote(), range(self.workers))
        log.info("self-play collection: %d Ray workers", self.workers)

    def play(
        self,
        seats: np.ndarray,
        plan: Sequence[PlanEntry],
        seed: Sequence[int],
        record: int | None = 0,
    ) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
        """Play the games of ``seats [n, 2]`` (indices into ``plan``) across the workers.

        Games are split into contiguous slices, one per worker; worker ``w`` samples
        with ``np.random.default_rng([*seed, w])``. Returns what `play_games`
        returns for all ``n`` games (record game indices are global).
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
        results = self._call(lambda w: self.actors[w].play.remote(tasks[w], plan_ref), tasks)
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

    def _call(self, submit: Callable[[int], Any], workers: Iterable[int]) -> list[Any]:
        """Results of ``submit(w)`` for every worker, in order; a slice whose worker died
        is submitted again (Ray restarts the actor) up to ``retries`` times."""
        ray = self.ray
        workers = list(workers)
        refs = {w: submit(w) for w in workers}
        out: dict[int, Any] = {}
        tries = dict.fromkeys(workers, 0)
        while refs:
            w, ref = next(iter(refs.items()))
            try:
                out[w] = ray.get(ref)
                del refs[w]
            except ray.exceptions.RayActorError as e:
                tries[w] += 1
                if tries[w] > self.retries or not self._await_restart(w):
                    raise CollectorError(
                        f"self-play collector {w} died and could not be restarted "
                        f"({type(e).__name__})"
                    ) from None
                log.warning("self-play collector %d died; replaying its slice (%d)", w, tries[w])
                self.restarts += 1
                refs[w] = submit(w)
            except ray.exceptions.RayTaskError as e:
                for other in refs.values():  # no result left behind
                    with contextlib.suppress(Exception):
                        ray.get(other)
                text = str(e)
                last = [line for line in text.splitlines() if line.strip()][-1].strip()
                log.error("self-play collector %d failed:\n%s", w, text)
                raise CollectorError(f"self-play collector {w} failed: {last}", text) from None
        return [out[w] for w in workers]

    def _await_restart(self, w: int, timeout: float = 300.0) -> bool:
        """Wait until Ray has restarted worker ``w`` (it answers again); False if it is
        dead for good (restarts used up) or not back within ``timeout`` seconds."""
        ray, end = self.ray, time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                ray.get(self.actors[w].where.remote(), timeout=30)
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


# ---------------------------------------------------------------------- worker side
KINDS = ("learner", "search", "snapshot", "anchor")


def make_controller(
    kind: str, actor: Any, rng: np.random.Generator, rules: Any = None, search: Any = None
) -> Controller:
    """The one controller factory of collection, in the learner's process and in workers.

    ``actor`` is the network (``learner``: samples and records log-probabilities and
    values; ``snapshot``: samples; ``search``: PUCT search on ``rules`` with the ``search``
    settings, ``arena.search``, recording visit targets) or a scripted `Player`
    (``anchor``). Every draw comes from ``rng``.
    """
    if kind == "anchor":
        return lambda o, m: (actor.act(o, m, rng=rng), None)
    if kind == "search":
        return search_controller(actor, rules, search, rng)
    if kind == "learner":
        return lambda o, m: _with_info(actor.act(o, m, greedy=False, rng=rng, return_info=True))
    if kind == "snapshot":
        return lambda o, m: (actor.act(o, m, greedy=False, rng=rng), None)
    raise ValueError(f"unknown controller kind {kind!r}: {' | '.join(KINDS)}")


def _play_task(
    task: dict, spec: GameSpec, net: Callable[[int], Any], baselines: Mapping[str, Player]
) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
    """A worker's slice: the plan's weights loaded into its own networks, then played."""
    rng = np.random.default_rng(task["seed"])
    controllers: list[Controller] = []
    for k, (kind, arg) in enumerate(task["plan"]):
        if kind not in KINDS:
            make_controller(kind, None, rng)  # raises, naming the kinds
        search = None
        if kind == "anchor":
            actor = baselines[arg]
        else:
            actor = net(k)
            weights, search = arg if kind == "search" else (arg, None)
            OpponentPool.load_into(actor, Snapshot(kind, 0, weights))
        controllers.append(make_controller(kind, actor, rng, spec.rules, search))
    seats = np.asarray(task["seats"])
    return play_games(spec, len(seats), seats, controllers, task["record"])


def _with_info(out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, Any]:
    a, logp, value = out
    return a, {"logp": logp, "value": value}
