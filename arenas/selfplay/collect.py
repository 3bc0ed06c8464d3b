"""The collection half of `SelfPlayArena`: which games a step plays
(the learner against its latest self, pool snapshots and anchors, seats alternating) and
who moves in them, in this process or in collection workers."""

from __future__ import annotations

from typing import Any

import numpy as np

from paddlecraft.agents import Policy

from .analysis import outcomes
from .league import OpponentPool, weights_of
from .workers import (
    Controller,
    PlanEntry,
    RayCollectors,
    frozen_policy,
    make_controller,
    play_games,
)

LEARNER = "latest"


class Collection:
    """Mixed into SelfPlayArena: plays each step's training games (``_collect``).

    Reads the arena's ``cfg``, ``policy``, ``spec``, ``pool``, ``league``, ``baselines``,
    ``train_anchors``, ``seed`` and ``updates`` and calls ``algo_now`` / ``games_now``;
    every draw comes from ``stream(11)``.
    """

    cfg: Any
    algo_now: Any
    games_now: Any
    policy: Policy
    _pool_workers: RayCollectors | None
    _twins: list[Policy]

    # ------------------------------------------------------------------ collection
    def _twin(self, k: int) -> Policy:
        """Frozen opponent networks (same architecture, own scope, never trained)."""
        while len(self._twins) <= k:
            name = f"{self.policy.name}_opponent_{len(self._twins)}"
            self._twins.append(frozen_policy(name, self.policy.config))
        return self._twins[k]

    def _collect(self) -> dict[str, Any]:
        """Play ``games_per_step`` games: the learner vs latest self / pool / anchors."""
        league, n = self.cfg.league, self.games_now()
        rng = self.stream(11)
        learner_seat = (np.arange(n) + self.updates) % 2  # seats alternate game to game
        # opponent plan: controller 0 = learner, 1.. = pool snapshots, then anchors
        n_anchor = {k: int(round(v * n)) for k, v in self.train_anchors.items()}
        n_pool = max(0, int(round((1.0 - league.latest_ratio) * n)) - sum(n_anchor.values()))
        k_pool = max(1, league.pool_opponents_per_step)
        snaps = self.pool.sample(k_pool, rng) if n_pool else []
        opp = np.zeros(n, np.int64)  # 0 = latest self
        names: list[str] = [LEARNER]
        learner_kind = "search" if self.algo_now() == "alphazero" else "learner"
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
        if self.cfg.workers.count:
            winner, records, moves = self._collectors().play(
                seats, self._wire_plan(plan), seed=[self.seed, 11, self.updates], record=0
            )
        else:
            controllers = [self._controller(k, entry, rng) for k, entry in enumerate(plan)]
            winner, records, moves = play_games(self.spec, n, seats, controllers, record=0)
        won = outcomes(winner, learner_seat)
        metrics: dict[str, float] = {
            "moves_per_game": moves / n,
            "positions": float(sum(len(r["game"]) for r in records)),
            "games_vs_self": float((opp == 0).sum()),  # matchup counts of this update
            "games_vs_pool": float(((opp > 0) & (opp <= len(snaps))).sum()),
        }
        for k, name in enumerate(n_anchor, start=1 + len(snaps)):
            metrics[f"games_vs_{name}"] = float((opp == k).sum())
        pool_scores = []
        for c in range(1, len(plan)):
            games = opp == c
            if not games.any():
                continue
            o = won[games]
            self.league.add(names[c], "snapshot" if names[c].startswith("snap_") else "anchor")
            self.league.record(LEARNER, names[c], o)
            if names[c].startswith("snap_"):
                pool_scores.append((o > 0) + 0.5 * (o == 0))
        if pool_scores:
            s = np.concatenate(pool_scores)
            self.pool_results.extend(s.tolist())
            metrics["score_vs_pool"] = float(s.mean())
        return {"records": records, "winner": winner, "n": n, "metrics": metrics}

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
            )
        return self._pool_workers

    def close(self) -> None:
        """Stop the collection workers, if any were started."""
        if self._pool_workers is not None:
            self._pool_workers.close()
            self._pool_workers = None
