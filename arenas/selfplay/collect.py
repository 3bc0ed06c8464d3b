"""Collection for `SelfPlayArena`: which games a step plays (the
learner against its latest self, pool snapshots and anchors, seats alternating) and who
moves in them, in this process or in collection workers. The arena owns a
`Collector` and keeps the league table and snapshot rule itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from paddlecraft.agents import Policy

from ..games.evaluators import CachedEvaluator
from .analysis import outcomes
from .league import OpponentPool, weights_of
from .playing import Controller, PlanEntry, frozen_policy, make_controller, play_games
from .workers import RayCollectors

LEARNER = "latest"
#: random-stream id of an update's training games: ``[seed, COLLECT_STREAM, update]`` (the
#: arena draws the plan from it; worker ``w`` plays from ``[..., w]``)
COLLECT_STREAM = 11


class Collector:
    """Plays each step's training games for a self-play arena (`collect`).

    Made once with what does not change during a run: the learner ``policy`` (trained in
    place by the arena), the game ``spec``, the fixed ``baselines`` by name, the anchors'
    shares of the training games ``train_anchors``, the arena's settings ``cfg`` (its
    ``league``, ``search`` and ``workers`` groups) and the run's ``seed``. Each step passes
    the rest. It owns the frozen opponent networks and the collection workers.
    """

    def __init__(
        self,
        policy: Policy,
        spec: Any,
        baselines: Mapping[str, Any],
        train_anchors: Mapping[str, float],
        cfg: Any,
        seed: int,
        check_interrupt: Callable[[], None] = lambda: None,
    ) -> None:
        self.policy, self.spec, self.baselines = policy, spec, baselines
        self.train_anchors, self.cfg, self.seed = train_anchors, cfg, seed
        #: called before each move of an in-process collection and while waiting for
        #: collection workers (the arena's ``check_interrupt``: a stop or pause abandons
        #: the step there)
        self.check_interrupt = check_interrupt
        self._twins: list[Policy] = []
        self._pool_workers: RayCollectors | None = None

    def _twin(self, k: int) -> Policy:
        """Frozen opponent networks (same architecture, own scope, never trained)."""
        while len(self._twins) <= k:
            name = f"{self.policy.name}_opponent_{len(self._twins)}"
            self._twins.append(frozen_policy(name, self.policy.config))
        return self._twins[k]

    def collect(
        self,
        updates: int,
        n: int,
        algo: str,
        rng: np.random.Generator,
        pool: OpponentPool,
    ) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
        """Play ``n`` games of update ``updates`` (``algo``: its algorithm): the learner vs
        its latest self, snapshots sampled from ``pool`` and the anchors; every draw comes
        from ``rng``.

        Returns the rollout (``records``, ``winner``, ``n``, ``metrics``) and, in plan order,
        each opponent's name with the learner's outcomes against it (+1 / 0 / -1 per game),
        for the arena's league table and snapshot rule.
        """
        league = self.cfg.league
        learner_seat = (np.arange(n) + updates) % 2  # seats alternate game to game
        # opponent plan: controller 0 = learner, 1.. = pool snapshots, then anchors
        n_anchor = {k: int(round(v * n)) for k, v in self.train_anchors.items()}
        n_pool = max(0, int(round((1.0 - league.latest_ratio) * n)) - sum(n_anchor.values()))
        k_pool = max(1, league.pool_opponents_per_step)
        snaps = pool.sample(k_pool, rng) if n_pool else []
        opp = np.zeros(n, np.int64)  # 0 = latest self
        names: list[str] = [LEARNER]
        learner_kind = "search" if algo == "alphazero" else "learner"
        plan: list[PlanEntry] = [(learner_kind, None)]
        pos = n - n_pool - sum(n_anchor.values())
        for k, snap in enumerate(snaps):
            share = n_pool // len(snaps) + (1 if k < n_pool % len(snaps) else 0)
            opp[pos : pos + share] = len(plan)
            names.append(snap.name)
            plan.append(("snapshot", snap))
            pos += share
        for name, count in n_anchor.items():
            opp[pos : pos + count] = len(plan)
            names.append(name)
            plan.append(("anchor", name))
            pos += count
        seats = np.zeros((n, 2), np.int64)
        rows = np.arange(n)
        seats[rows, learner_seat] = 0
        seats[rows, 1 - learner_seat] = opp  # 0 for self-play games: both seats learn
        controllers: list[Controller] = []  # in-process ones
        if self.cfg.workers.count:
            winner, records, moves = self._collectors().play(
                seats,
                self._wire_plan(plan),
                seed=[self.seed, COLLECT_STREAM, updates],
                record=0,
                check=self.check_interrupt,  # a stop or pause cancels the workers' slices
            )
        else:
            controllers = [self._controller(k, entry, rng) for k, entry in enumerate(plan)]
            winner, records, moves = play_games(
                self.spec, n, seats, controllers, 0, self.check_interrupt
            )
        won = outcomes(winner, learner_seat)
        metrics: dict[str, float] = {
            **cache_metrics(controllers),
            "moves_per_game": moves / n,
            "positions": float(sum(len(r["game"]) for r in records)),
            "games_vs_self": float((opp == 0).sum()),  # matchup counts of this update
            "games_vs_pool": float(((opp > 0) & (opp <= len(snaps))).sum()),
        }
        for k, name in enumerate(n_anchor, start=1 + len(snaps)):
            metrics[f"games_vs_{name}"] = float((opp == k).sum())
        played = [(names[c], won[opp == c]) for c in range(1, len(plan)) if (opp == c).any()]
        return {"records": records, "winner": winner, "n": n, "metrics": metrics}, played

    def _controller(self, k: int, entry: PlanEntry, rng: np.random.Generator) -> Controller:
        """In-process controller ``k`` of a collection plan, sampling from ``rng``."""
        kind, arg = entry
        if kind in ("learner", "search"):
            actor: Any = self.policy
        elif kind == "snapshot":
            actor = self._twin(k - 1)
            OpponentPool.load_into(actor, arg)
        else:
            actor = self.baselines[arg]
        return make_controller(kind, actor, rng, self.spec.rules, self.cfg.search)

    def _wire_plan(self, plan: list[PlanEntry]) -> list[PlanEntry]:
        """The plan as sent to worker processes: weights instead of live networks."""
        out: list[PlanEntry] = []
        for kind, arg in plan:
            if kind == "learner":
                out.append((kind, weights_of(self.policy)))
            elif kind == "search":
                out.append((kind, (weights_of(self.policy), self.cfg.search)))
            elif kind == "snapshot":
                out.append((kind, arg.weights))
            else:
                out.append((kind, arg))
        return out

    def _collectors(self) -> RayCollectors:
        if self._pool_workers is None:
            workers = self.cfg.workers
            self._pool_workers = RayCollectors(
                workers.count,
                self.policy.config,
                self.spec.name,
                {k: v for k, v in self.baselines.items() if k in self.train_anchors},
                name=f"{self.policy.name}_collector",
                threads_per_worker=workers.threads,
                address=workers.ray_address,
                check=self.check_interrupt,
            )
        return self._pool_workers

    def close(self) -> None:
        """Stop the collection workers, if any were started."""
        if self._pool_workers is not None:
            self._pool_workers.close()
            self._pool_workers = None


def cache_metrics(controllers: list[Controller]) -> dict[str, float]:
    """``{"search_cache_hits": share}``: the share of the learner's leaf evaluations its
    evaluation cache answered in this collection (`CachedEvaluator`), and
    ``{"search_reused": share}``: the share of its searches that started from a kept
    subtree (`TreeReuse`); each empty without one (``arena.search.reuse=false``, PPO, or
    the games played on workers)."""
    out: dict[str, float] = {}
    search = getattr(controllers[0], "search", None) if controllers else None
    cache = getattr(search, "evaluator", None)
    if isinstance(cache, CachedEvaluator) and cache.lookups:
        out["search_cache_hits"] = cache.hits / cache.lookups
    reuse = getattr(controllers[0], "reuse", None) if controllers else None
    if reuse is not None and reuse.searched:
        out["search_reused"] = reuse.reused / reuse.searched
    return out
