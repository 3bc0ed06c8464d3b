"""Self-play collection on more cores: worker processes that each play a slice of the games.

The learner keeps every decision about *what* is played (seats, which snapshot or anchor
sits where, ratings, the pool); each worker process holds its own copies of the policy
network, receives the step's weights and its slice of the games, plays them to the end
with batched moves and returns the winners and the learner's moves. The learner then
updates on all of them, exactly as with in-process collection.

    python run.py arena=selfplay game=connect_four arena.collect_workers=2

Worker ``w`` samples from ``np.random.default_rng([seed, 11, update, w])``: a run is
reproducible (and resumable) for a given worker count; a different count plays
different (equally distributed) games.

Workers are spawned (not forked: Paddle's OpenMP pools do not survive a fork), run with
``OMP_NUM_THREADS=threads_per_worker`` and end with :meth:`CollectorPool.close` (the
arena's ``close``), or when the learner process exits.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import signal
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

import numpy as np

from paddlecraft.agents import Policy

from ..games import GameSpec, Player
from .alphazero import search_controller
from .league import OpponentPool, Snapshot

log = logging.getLogger("paddlecraft")

#: a controller maps (planes, masks) of the games where it moves to actions and a dict of
#: per-move arrays to record (``{"logp", "value"}`` for PPO, ``{"pi", "root_value"}`` for
#: search), or None
Controller = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, Any]]

#: one seat-controller of a collection plan: ``("learner", weights)`` samples and records
#: log-probabilities and values; ``("search", (weights, search settings))`` plays with
#: PUCT search and records visit distributions; ``("snapshot", weights)`` samples;
#: ``("anchor", name)`` is a scripted baseline
PlanEntry = tuple[str, Any]


def play_games(
    spec: GameSpec,
    n: int,
    seat_controllers: np.ndarray,
    controllers: Sequence[Controller],
    record: int | None = None,
) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
    """Play ``n`` games of ``spec`` to the end, all at once.

    ``seat_controllers[g, s]`` is the index in ``controllers`` that plays seat ``s`` of
    game ``g``; each move, every controller gets one batched call with the boards it has
    to move on. Returns ``(winner [n], records, total moves)``, where ``records`` holds,
    per move, the boards, masks, actions and recorded arrays of controller ``record``.
    """
    game = spec.make(n)
    records: list[dict[str, np.ndarray]] = []
    moves = 0
    ply = 0
    while not game.done.all():
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


class CollectorPool:
    """``workers`` processes, each with its own policy networks, playing slices of a step.

    Args:
        workers: processes to start (>= 1).
        policy_config: ``paddlecraft.agents.Policy`` constructor arguments (``policy.config``).
        game: the game's name (``GameSpec.name``).
        baselines: the scripted players anchors may name (sent once, at start).
        name: scope prefix of the workers' networks.
        threads_per_worker: ``OMP_NUM_THREADS`` of each worker.
        start_timeout: seconds to wait for a worker to build its network.
    """

    def __init__(
        self,
        workers: int,
        policy_config: Mapping[str, Any],
        game: str,
        baselines: Mapping[str, Player],
        name: str = "collector",
        threads_per_worker: int = 1,
        start_timeout: float = 300.0,
    ) -> None:
        if workers < 1:
            raise ValueError(f"arena.collect_workers: a pool needs >= 1 worker, got {workers}")
        ctx = mp.get_context("spawn")
        self.workers = int(workers)
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        with _child_env(OMP_NUM_THREADS=str(threads_per_worker)):
            for w in range(self.workers):
                parent, child = ctx.Pipe()
                p = ctx.Process(
                    target=_serve,
                    args=(child, f"{name}_{w}", dict(policy_config), game, dict(baselines)),
                    name=f"paddlecraft-{name}-{w}",
                    daemon=True,
                )
                p.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(p)
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._conns)
        for w, conn in enumerate(self._conns):
            if not conn.poll(start_timeout):
                self.close()
                raise RuntimeError(
                    f"self-play collector {w} did not start within {start_timeout:.0f} s"
                )
            status, payload = self._receive(w)
            if status != "ok":
                self.close()
                raise RuntimeError(f"self-play collector {w} could not start:\n{payload}")
        log.info("self-play collection: %d worker processes", self.workers)

    def play(
        self,
        seats: np.ndarray,
        plan: Sequence[PlanEntry],
        seed: Sequence[int],
        record: int | None = 0,
    ) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
        """Play the games of ``seats [n, 2]`` (indices into ``plan``) across the workers.

        Games are split into contiguous slices, one per worker; worker ``w`` samples
        with ``np.random.default_rng([*seed, w])``. Returns what :func:`play_games`
        returns for all ``n`` games (record game indices are global).
        """
        n = len(seats)
        bounds = np.linspace(0, n, self.workers + 1).astype(int)
        busy = []
        for w in range(self.workers):
            lo, hi = int(bounds[w]), int(bounds[w + 1])
            if hi > lo:
                task = {"seats": seats[lo:hi], "plan": list(plan), "seed": [*seed, w],
                        "record": record}  # fmt: skip
                self._send(w, task)
                busy.append((w, lo, hi))
        # receive from every busy worker before raising, so no result is left in a pipe
        replies = [(w, lo, *self._receive(w)) for w, lo, _ in busy]
        for w, _, status, payload in replies:
            if status != "ok":
                raise RuntimeError(f"self-play collector {w} failed:\n{payload}")
        winners: list[np.ndarray] = []
        records: list[dict[str, np.ndarray]] = []
        moves = 0
        for _, lo, _, (win, recs, m) in replies:
            winners.append(win)
            for r in recs:
                r["game"] = r["game"] + lo
            records += recs
            moves += m
        return np.concatenate(winners), records, moves

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        self._finalizer()

    # ------------------------------------------------------------------ plumbing
    def _send(self, w: int, task: Any) -> None:
        try:
            self._conns[w].send(task)
        except (BrokenPipeError, OSError) as e:
            self.close()
            raise RuntimeError(f"self-play collector {w} is gone ({self._exit(w)})") from e

    def _receive(self, w: int) -> tuple[str, Any]:
        """``("ok", result)`` or ``("error", traceback)``; a dead worker closes the pool."""
        try:
            return self._conns[w].recv()
        except (EOFError, OSError) as e:
            self.close()
            raise RuntimeError(f"self-play collector {w} died ({self._exit(w)})") from e

    def _exit(self, w: int) -> str:
        p = self._procs[w]
        p.join(timeout=1.0)
        return f"exit code {p.exitcode}"


# ---------------------------------------------------------------------- worker side
def _serve(conn: Connection, name: str, cfg: dict, game: str, baselines: dict) -> None:
    """A worker's loop: build the networks, then play tasks until told to stop (None).

    Ctrl-C and SIGTERM reach the whole process group; the learner handles them (it
    finishes the step, checkpoints, then stops its workers), so workers ignore them.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        spec = GameSpec(game)
        nets: list[Policy] = []

        def net(k: int) -> Policy:
            while len(nets) <= k:
                nets.append(frozen_policy(f"{name}_{len(nets)}", cfg))
            return nets[k]

        net(0)
        conn.send(("ok", None))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the learner is gone
            return
        if task is None:
            return
        try:
            conn.send(("ok", _play_task(task, spec, net, baselines)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


def _play_task(
    task: dict, spec: GameSpec, net: Callable[[int], Any], baselines: Mapping[str, Player]
) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
    rng = np.random.default_rng(task["seed"])
    controllers: list[Controller] = []
    for k, (kind, arg) in enumerate(task["plan"]):
        if kind not in ("learner", "search", "snapshot", "anchor"):
            raise ValueError(
                f"unknown controller kind {kind!r}: learner | search | snapshot | anchor"
            )
        if kind == "anchor":
            player = baselines[arg]
            controllers.append(lambda o, m, p=player: (p.act(o, m, rng=rng), None))
            continue
        policy = net(k)
        weights, settings = arg if kind == "search" else (arg, None)
        OpponentPool.load_into(policy, Snapshot(kind, 0, weights))
        if kind == "search":
            controllers.append(
                search_controller(policy, spec.rules, SimpleNamespace(**settings), rng)
            )
        elif kind == "learner":  # records log-probabilities and values for the update
            controllers.append(
                lambda o, m, p=policy: _with_info(
                    p.act(o, m, greedy=False, rng=rng, return_info=True)
                )
            )
        else:
            controllers.append(lambda o, m, p=policy: (p.act(o, m, greedy=False, rng=rng), None))
    seats = np.asarray(task["seats"])
    return play_games(spec, len(seats), seats, controllers, task["record"])


def _with_info(out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, Any]:
    a, logp, value = out
    return a, {"logp": logp, "value": value}


def _shutdown(procs: list[Any], conns: list[Connection]) -> None:
    for conn in conns:
        with contextlib.suppress(Exception):
            conn.send(None)
    for p in procs:
        p.join(timeout=5.0)
        if p.is_alive():  # workers ignore SIGTERM (see _serve)
            p.kill()
            p.join(timeout=1.0)
    for conn in conns:
        with contextlib.suppress(Exception):
            conn.close()


@contextlib.contextmanager
def _child_env(**env: str) -> Iterator[None]:
    """Set environment variables while child processes start (spawned children copy them)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
