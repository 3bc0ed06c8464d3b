"""SelfPlayArena: a policy learns a two-player board game against itself and its past selves.

Each training step plays a batch of games at once on a batched numpy game (thousands of
positions per call), the learner against its latest self or a frozen snapshot from the
pool, seats alternating, then updates the policy with PPO (or A2C) on the learner's
moves. Snapshots join the pool every ``snapshot_every`` updates or when the learner's
score against the pool passes ``snapshot_win_rate``; a league table rates the learner,
the snapshots and fixed anchors (random; perfect minimax for tic-tac-toe; MCTS with 10,
100, 1000 simulations for Connect Four). ``python run.py arena=selfplay game=tictactoe``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import cv2
import numpy as np
import paddle
from omegaconf import MISSING

from agents import Agent, Policy
from agents.base import AgentConfig
from agents.instantiate import safe_instantiate, to_plain
from encoders.tensorio import atomic_write_json

from .engine import Arena
from .games import GameSpec, Player, TicTacToe, make_baseline
from .league import (
    LeagueTable,
    OpponentPool,
    Snapshot,
    snapshot_from_json,
    snapshot_to_json,
    weights_of,
)
from .selfplay_workers import CollectorPool, Controller, PlanEntry, frozen_policy, play_games

log = logging.getLogger("paddlecraft")

LEARNER = "latest"


class SelfPlayArena(Arena):
    """Self-play with an opponent pool, PPO/A2C updates, a rated league and anchors.

    Args:
        agents: must contain ``policy`` (an :class:`agents.Policy` sized for the game).
        data: the game: a :class:`~arenas.games.GameSpec` config (``{_target_:
            arenas.games.GameSpec, name: connect_four}``) or a name.
        epochs, steps_per_epoch: training length in updates (evaluation after each epoch).
        games_per_step: games played in parallel per update.
        algo: ``ppo`` (clipped, ``update_epochs`` passes over ``minibatch_size``
            minibatches) or ``a2c`` (one full-batch gradient step).
        clip_ratio, gamma, gae_lambda, value_coef, entropy_coef: the loss. ``gamma``
            discounts per own move, so quicker wins are worth more.
        latest_ratio: share of games against the latest self (both seats learn from
            those); the rest go to pool snapshots (and ``train_anchors``).
        pool_size: snapshots kept (oldest leave first).
        pool_opponents_per_step: distinct snapshots drawn per update (each plays an
            equal share of the pool games, with one batched forward per move).
        snapshot_every: add a snapshot every N updates (0: never by count).
        snapshot_win_rate: add one when the learner's score (win 1, draw 0.5) against
            the pool, over at least ``snapshot_min_games`` games, reaches this (0: off).
        train_anchors: ``{baseline: share of games}`` played against fixed baselines
            during training (e.g. ``{random: 0.05}``); rated too.
        eval_games: ``{baseline: games}`` for the evaluation after each epoch;
            ``final_eval_games`` for the last one (defaults to ``eval_games``). Seats
            alternate; the policy plays greedily.
        headline_metric: the metric printed and returned (default: ``score_vs_minimax``
            for tic-tac-toe, ``win_rate_vs_mcts100`` when that anchor is evaluated,
            else ``win_rate_vs_random``).
        augment_mirror: also train on the left-right mirror image of every sample.
        keep_best: a metric of the per-epoch evaluation (e.g. ``win_rate_vs_mcts100``).
            The final evaluation first measures the last policy like every epoch, then
            plays (and the run ends with) the policy that scored best on it so far, the
            latest on ties: gating against a fixed anchor, as AlphaGo Zero gated new
            networks. Self-play policies swing from epoch to epoch; this keeps a good
            one. None: the last policy.
        collect_workers: play each step's games in this many worker processes (each
            with its own copy of the networks; see :mod:`arenas.selfplay_workers`);
            0 plays them in this process. Evaluation games stay in this process.
        threads_per_worker: ``OMP_NUM_THREADS`` of each collection worker.
        seed: run seed.
    """

    def __init__(
        self,
        agents: Mapping[str, Agent],
        data: Any = "tictactoe",
        epochs: int = 10,
        steps_per_epoch: int = 20,
        games_per_step: int = 256,
        algo: str = "ppo",
        update_epochs: int = 4,
        minibatch_size: int = 512,
        clip_ratio: float = 0.2,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        value_coef: float = 0.5,
        entropy_coef: float = 0.01,
        latest_ratio: float = 0.5,
        pool_size: int = 16,
        pool_opponents_per_step: int = 4,
        snapshot_every: int = 10,
        snapshot_win_rate: float = 0.7,
        snapshot_min_games: int = 256,
        train_anchors: Mapping[str, float] | None = None,
        eval_games: Mapping[str, int] | None = None,
        final_eval_games: Mapping[str, int] | None = None,
        headline_metric: str | None = None,
        augment_mirror: bool = False,
        keep_best: str | None = None,
        collect_workers: int = 0,
        threads_per_worker: int = 1,
        seed: int = 0,
    ) -> None:
        super().__init__(agents, epochs=epochs, seed=seed)
        self.require_agents("policy")
        self.policy: Policy = self.agents["policy"]  # type: ignore[assignment]
        if not isinstance(self.policy, Policy):
            raise ValueError(
                f"SelfPlayArena: agents.policy must be an agents.Policy, got "
                f"{type(self.policy).__name__}"
            )
        self.spec = _game_spec(data)
        if self.policy.obs_shape != self.spec.obs_shape or (
            self.policy.num_actions != self.spec.num_actions
        ):
            raise ValueError(
                f"agents.policy is sized for observations {list(self.policy.obs_shape)} and "
                f"{self.policy.num_actions} actions, but {self.spec.name} has "
                f"{list(self.spec.obs_shape)} and {self.spec.num_actions}; choose the matching "
                f"game config (game={self.spec.short_name}) or set agents.policy.obs_shape / "
                "num_actions and the encoder's input size"
            )
        if algo not in ("ppo", "a2c"):
            raise ValueError(f"arena.algo must be 'ppo' or 'a2c', got {algo!r}")
        if not 0.0 <= latest_ratio <= 1.0:
            raise ValueError(f"arena.latest_ratio must be in [0, 1], got {latest_ratio}")
        if int(collect_workers) < 0 or int(threads_per_worker) < 1:
            raise ValueError(
                f"arena.collect_workers must be >= 0 (0: collect in this process) and "
                f"arena.threads_per_worker >= 1, got {collect_workers} and {threads_per_worker}"
            )
        self.collect_workers, self.threads_per_worker = (
            int(collect_workers),
            int(threads_per_worker),
        )
        self._pool_workers: CollectorPool | None = None
        self.steps_per_epoch_ = int(steps_per_epoch)
        self.games_per_step = int(games_per_step)
        self.algo, self.update_epochs = algo, int(update_epochs)
        self.minibatch_size = int(minibatch_size)
        self.clip_ratio, self.gamma, self.gae_lambda = clip_ratio, gamma, gae_lambda
        self.value_coef, self.entropy_coef = value_coef, entropy_coef
        self.latest_ratio = float(latest_ratio)
        self.augment_mirror = bool(augment_mirror)
        self.keep_best = keep_best
        self.pool_opponents_per_step = max(1, int(pool_opponents_per_step))
        self.snapshot_every = int(snapshot_every)
        self.snapshot_win_rate = float(snapshot_win_rate)
        self.snapshot_min_games = int(snapshot_min_games)
        self.train_anchors = {str(k): float(v) for k, v in (to_plain(train_anchors) or {}).items()}
        rules = self.spec.rules
        default_eval = {"random": 100}
        if rules is TicTacToe:
            default_eval["minimax"] = 100
        self.eval_games = {
            str(k): int(v) for k, v in (to_plain(eval_games) or default_eval).items()
        }
        self.final_eval_games = {
            str(k): int(v) for k, v in (to_plain(final_eval_games) or self.eval_games).items()
        }
        self.baselines: dict[str, Player] = {}
        for name in sorted({*self.eval_games, *self.final_eval_games, *self.train_anchors}):
            if rules is None and name != "random":
                raise ValueError(
                    f"baseline {name!r} needs the native rules of the game; {self.spec.name} "
                    "only supports the random baseline"
                )
            self.baselines[name] = (
                make_baseline(name, rules) if rules else make_baseline("random", TicTacToe)
            )
        if headline_metric is None:
            if "minimax" in self.final_eval_games:
                headline_metric = "score_vs_minimax"
            elif "mcts100" in self.final_eval_games:
                headline_metric = "win_rate_vs_mcts100"
            else:
                headline_metric = "win_rate_vs_random"
        self.headline = headline_metric

        # state that checkpoints carry (arena_state)
        self.pool = OpponentPool(pool_size)
        self.league = LeagueTable()
        self.league.add(LEARNER, "learner")
        self.updates = 0
        self.evaluations = 0
        self.pool_results: list[float] = []  # learner's scores vs the pool since the last snapshot
        self.last_snapshot = 0
        self.best: Snapshot | None = None  # keep_best: the best-scoring policy so far
        self.best_value = -math.inf
        self._twins: list[Policy] = []

    # ------------------------------------------------------------------ engine API
    def steps_per_epoch(self) -> int:
        return self.steps_per_epoch_

    def batches(self, epoch: int) -> Iterator[int]:
        # self-play makes its own data: a step is an update index
        return iter(range(epoch * self.steps_per_epoch_, (epoch + 1) * self.steps_per_epoch_))

    def train_step(self, batch: int) -> dict[str, float]:
        if not self.pool.snapshots:  # the pool starts with the initial policy
            self._take_snapshot()
        rollout = self._collect()
        metrics = self._update(rollout)
        self.updates += 1
        metrics.update(rollout["metrics"])
        reason = self._snapshot_due()
        if reason:
            self._take_snapshot()
            log.debug("snapshot %s (%s)", self.pool.snapshots[-1].name, reason)
        metrics["pool_size"] = float(len(self.pool))
        metrics["rating_latest"] = self.league.rating(LEARNER)[0]
        return metrics

    def evaluate(self) -> dict[str, float]:
        final = self.updates >= self.epochs * self.steps_per_epoch_
        if not (final and self.keep_best):
            return self._evaluate(self.final_eval_games if final else self.eval_games)
        last = self._evaluate(self.eval_games)  # the last policy is a candidate too
        assert self.best is not None
        OpponentPool.load_into(self.policy, self.best)
        out = self._evaluate(self.final_eval_games)
        out["selected_update"] = float(self.best.step)
        out[f"selected_{self.keep_best}"] = self.best_value
        out[f"last_{self.keep_best}"] = float(last.get(self.keep_best, math.nan))
        log.info(
            "keep_best: playing the policy of update %d (%s=%.3f; the last one had %.3f)",
            self.best.step,
            self.keep_best,
            self.best_value,
            out[f"last_{self.keep_best}"],
        )
        return out

    def _evaluate(self, plan: Mapping[str, int]) -> dict[str, float]:
        rng = np.random.default_rng([self.seed, 7, self.evaluations])
        self.evaluations += 1
        out: dict[str, float] = {}
        for name, n in plan.items():
            if n <= 0:
                continue
            outcomes = self.play_against(self.baselines[name], n, rng)
            self.league.add(name, "anchor")
            self.league.record(LEARNER, name, outcomes)
            win, draw, loss = (
                float((outcomes > 0).mean()),
                float((outcomes == 0).mean()),
                float((outcomes < 0).mean()),
            )
            out[f"win_rate_vs_{name}"] = win
            out[f"draw_rate_vs_{name}"] = draw
            out[f"loss_rate_vs_{name}"] = loss
            out[f"score_vs_{name}"] = win + draw  # draws or wins
        if self.spec.rules is TicTacToe and not self.spec.is_pettingzoo:
            first, second = tictactoe_losing_lines(self.policy)
            out["losing_lines"] = float(first + second)
        mu, sigma = self.league.rating(LEARNER)
        out["rating_latest"] = mu
        out["rating_latest_sigma"] = sigma
        for name in plan:
            if name in self.league.players:
                out[f"rating_{name}"] = self.league.rating(name)[0]
        out["pool_size"] = float(len(self.pool))
        out["snapshots_taken"] = float(self.pool.created)
        self.league.log_history(self.updates)
        if self.keep_best:
            if self.keep_best not in out:
                raise ValueError(
                    f"arena.keep_best={self.keep_best!r} is not an evaluation metric; "
                    f"have {sorted(out)}"
                )
            if out[self.keep_best] >= self.best_value:
                self.best = Snapshot("best", self.updates, weights_of(self.policy))
                self.best_value = float(out[self.keep_best])
        return out

    def arena_state(self) -> dict:
        return {
            "updates": self.updates,
            "evaluations": self.evaluations,
            "pool_results": self.pool_results,
            "last_snapshot": self.last_snapshot,
            "pool": self.pool.state(),
            "league": self.league.state(),
            "best": None if self.best is None else snapshot_to_json(self.best),
            "best_value": self.best_value if self.best is not None else None,
        }

    def load_arena_state(self, state: dict) -> None:
        self.updates = int(state["updates"])
        self.evaluations = int(state["evaluations"])
        self.pool_results = [float(x) for x in state["pool_results"]]
        self.last_snapshot = int(state["last_snapshot"])
        self.pool.load_state(state["pool"])
        self.league.load_state(state["league"])
        best = state.get("best")
        self.best = None if best is None else snapshot_from_json(best)
        self.best_value = -math.inf if best is None else float(state["best_value"])

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """The policy (loadable with ``Agent.load``), ``league.json`` and ``ratings.png``."""
        d = Path(run_dir)
        self.policy.save(d / "policy")
        league = {
            "table": self.league.rows(),
            "matchups": self.league.matchups(LEARNER),
            "head_to_head": self.league.results,
            "pool": [{"name": s.name, "step": s.step} for s in self.pool.snapshots],
            "history": self.league.history,
        }
        atomic_write_json(d / "league.json", league)
        plot = d / "ratings.png"
        cv2.imwrite(str(plot), render_rating_history(self.league.history))
        log.info("league table:\n%s", self.league.format())
        return {"policy": str(d / "policy"), "league": str(d / "league.json"), "ratings": str(plot)}

    # ------------------------------------------------------------------ playing
    def run_games(
        self,
        n: int,
        seat_controllers: np.ndarray,
        controllers: list[Controller],
        record: int | None = None,
    ) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
        """Play ``n`` games to the end, all at once, in this process (see :func:`play_games`)."""
        return play_games(self.spec, n, seat_controllers, controllers, record)

    def play_against(self, opponent: Player, n: int, rng: np.random.Generator) -> np.ndarray:
        """Outcomes (+1 win, 0 draw, -1 loss) of ``n`` greedy-policy games, seats alternating."""
        policy_seat = np.arange(n) % 2
        seats = np.ones((n, 2), np.int64)  # seat -> controller: 0 the policy, 1 the opponent
        seats[np.arange(n), policy_seat] = 0
        controllers: list[Controller] = [
            lambda o, m: (self.policy.act(o, m, greedy=True), None),
            lambda o, m: (opponent.act(o, m, rng=rng), None),
        ]
        winner, _, _ = self.run_games(n, seats, controllers)
        return _outcomes(winner, policy_seat)

    # ------------------------------------------------------------------ collection
    def _twin(self, k: int) -> Policy:
        """Frozen opponent networks (same architecture, own scope, never trained)."""
        while len(self._twins) <= k:
            name = f"{self.policy.name}_opponent_{id(self):x}_{len(self._twins)}"
            self._twins.append(frozen_policy(name, self.policy.config))
        return self._twins[k]

    def _collect(self) -> dict[str, Any]:
        """Play ``games_per_step`` games: the learner vs latest self / pool / anchors."""
        n = self.games_per_step
        learner_seat = (np.arange(n) + self.updates) % 2  # seats alternate game to game
        # opponent plan: controller 0 = learner, 1 = latest self (also the learner),
        # 2.. = pool snapshots, then anchors
        n_anchor = {k: int(round(v * n)) for k, v in self.train_anchors.items()}
        n_pool = int(round((1.0 - self.latest_ratio) * n)) - sum(n_anchor.values())
        n_pool = max(0, n_pool)
        snaps = self.pool.sample(self.pool_opponents_per_step, np.random) if n_pool else []
        opp = np.zeros(n, np.int64)  # 0 = latest self
        names: list[str] = [LEARNER]
        plan: list[PlanEntry] = [("learner", None)]
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
        if self.collect_workers:
            winner, records, moves = self._collectors().play(
                seats, self._wire_plan(plan), seed=[self.seed, 11, self.updates], record=0
            )
        else:
            controllers = [self._controller(k, entry) for k, entry in enumerate(plan)]
            winner, records, moves = self.run_games(n, seats, controllers, record=0)
        outcomes = _outcomes(winner, learner_seat)
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
            o = outcomes[games]
            self.league.add(names[c], "snapshot" if names[c].startswith("snap_") else "anchor")
            self.league.record(LEARNER, names[c], o)
            if names[c].startswith("snap_"):
                pool_scores.append((o > 0) + 0.5 * (o == 0))
        if pool_scores:
            s = np.concatenate(pool_scores)
            self.pool_results.extend(s.tolist())
            metrics["score_vs_pool"] = float(s.mean())
        return {"records": records, "winner": winner, "n": n, "metrics": metrics}

    def _controller(self, k: int, entry: PlanEntry) -> Controller:
        """In-process controller ``k`` of a collection plan (numpy's global stream samples)."""
        kind, arg = entry
        if kind == "learner":
            return self._learner_controller
        if kind == "snapshot":
            twin = self._twin(k - 1)
            OpponentPool.load_into(twin, arg)
            return _frozen_controller(twin)
        player = self.baselines[arg]
        return lambda o, m: (player.act(o, m, rng=np.random), None)

    def _wire_plan(self, plan: list[PlanEntry]) -> list[PlanEntry]:
        """The plan as sent to worker processes: weights instead of live networks."""
        out: list[PlanEntry] = []
        for kind, arg in plan:
            if kind == "learner":
                out.append((kind, weights_of(self.policy)))
            elif kind == "snapshot":
                out.append((kind, arg.weights))
            else:
                out.append((kind, arg))
        return out

    def _collectors(self) -> CollectorPool:
        if self._pool_workers is None:
            self._pool_workers = CollectorPool(
                self.collect_workers,
                self.policy.config,
                self.spec.name,
                {k: v for k, v in self.baselines.items() if k in self.train_anchors},
                name=f"{self.policy.name}_collector",
                threads_per_worker=self.threads_per_worker,
            )
        return self._pool_workers

    def close(self) -> None:
        """Stop the collection workers, if any were started."""
        if self._pool_workers is not None:
            self._pool_workers.close()
            self._pool_workers = None

    def _learner_controller(self, obs: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, Any]:
        a, logp, value = self.policy.act(obs, masks, greedy=False, return_info=True)
        return a, (logp, value)

    # ------------------------------------------------------------------ learning
    def _advantages(self, rollout: dict[str, Any]) -> dict[str, np.ndarray]:
        """GAE over each seat's own moves; the reward is the game's outcome at its last move."""
        recs, winner, n = rollout["records"], rollout["winner"], rollout["n"]
        T = self.spec.max_moves
        value = np.zeros((T + 2, n), np.float32)
        has = np.zeros((T + 2, n), bool)
        for r in recs:
            value[r["ply"], r["game"]] = r["value"]
            has[r["ply"], r["game"]] = True
        adv = np.zeros((T + 2, n), np.float32)
        for t in range(T - 1, -1, -1):
            if not has[t].any():
                continue
            seat = t % 2
            last = ~has[t + 2]  # this seat never moves again in that game
            outcome = np.where(winner < 0, 0.0, np.where(winner == seat, 1.0, -1.0))
            reward = np.where(last, outcome, 0.0)
            nxt = np.where(last, 0.0, value[t + 2])
            delta = reward + self.gamma * nxt - value[t]
            adv[t] = np.where(
                has[t], delta + np.where(last, 0.0, self.gamma * self.gae_lambda * adv[t + 2]), 0
            )
        obs = np.concatenate([r["obs"] for r in recs])
        ply = np.concatenate([r["ply"] for r in recs])
        game = np.concatenate([r["game"] for r in recs])
        a = adv[ply, game]
        return {
            "obs": obs,
            "mask": np.concatenate([r["mask"] for r in recs]),
            "action": np.concatenate([r["action"] for r in recs]),
            "logp": np.concatenate([r["logp"] for r in recs]).astype(np.float32),
            "adv": a,
            "ret": a + value[ply, game],
        }

    def _mirrored(self, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Left-right mirror images of the samples (both games are symmetric that way).

        The mirror of a position has the same value, so advantages and returns carry
        over. A mirrored sample is what the mirrored behaviour policy would have
        collected, with the same probability, so its behaviour log-probability is the
        original one: PPO's ratio ``pi(a'|s') / pi_old(a|s)`` is then the proper
        importance weight (clipped as usual). Using the current policy's own
        ``pi(a'|s')`` instead would treat actions it would not take as on-policy, which
        biases the update (it broke tic-tac-toe training in a test run).
        """
        cols = self.spec.obs_shape[1]
        if self.spec.num_actions == cols:  # the action is a column
            perm = np.arange(cols)[::-1]
        else:  # the action is a square r * cols + c
            rows = self.spec.obs_shape[0]
            r, c = np.divmod(np.arange(rows * cols), cols)
            perm = r * cols + (cols - 1 - c)
        return {
            "obs": np.ascontiguousarray(data["obs"][:, :, ::-1, :]),
            "mask": np.ascontiguousarray(data["mask"][:, perm]),
            "action": perm[data["action"]],
            "logp": data["logp"],
            "adv": data["adv"],
            "ret": data["ret"],
        }

    def _update(self, rollout: dict[str, Any]) -> dict[str, float]:
        data = self._advantages(rollout)
        if self.augment_mirror:
            extra = self._mirrored(data)
            data = {k: np.concatenate([v, extra[k]]) for k, v in data.items()}
        policy = self.policy
        policy.train()
        N = len(data["obs"])
        if self.algo == "a2c":
            epochs, mb = 1, N
        else:
            epochs, mb = self.update_epochs, min(self.minibatch_size, N)
        sums: dict[str, float] = {}
        count = 0
        for _ in range(epochs):
            order = np.random.permutation(N)
            for i in range(0, N - mb + 1 if N >= mb else 1, mb):
                j = order[i : i + mb]
                stats = self._loss_step({k: v[j] for k, v in data.items()})
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0.0) + v
                count += 1
        return {k: v / max(count, 1) for k, v in sums.items()}

    def _loss_step(self, b: dict[str, np.ndarray]) -> dict[str, float]:
        policy = self.policy
        adv = b["adv"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        logp, entropy, value = policy.evaluate_actions(b["obs"], b["mask"], b["action"])
        adv_t = policy.to_tensor(adv.astype(np.float32))
        ret_t = policy.to_tensor(b["ret"].astype(np.float32))
        if self.algo == "ppo":
            ratio = (logp - policy.to_tensor(b["logp"])).exp()
            clipped = paddle.clip(ratio, 1 - self.clip_ratio, 1 + self.clip_ratio)
            pg_loss = -paddle.minimum(ratio * adv_t, clipped * adv_t).mean()
        else:
            ratio = None
            pg_loss = -(logp * adv_t).mean()
        v_loss = ((value - ret_t) ** 2).mean()
        ent = entropy.mean()
        loss = pg_loss + self.value_coef * v_loss - self.entropy_coef * ent
        policy.update(loss)
        out = {
            "loss": float(loss),
            "policy_loss": float(pg_loss),
            "value_loss": float(v_loss),
            "entropy": float(ent),
        }
        if ratio is not None:
            r = ratio.numpy()
            out["clip_frac"] = float((np.abs(r - 1) > self.clip_ratio).mean())
            out["approx_kl"] = float(np.mean((r - 1) - np.log(r)))
        return out

    # ------------------------------------------------------------------ snapshots
    def _snapshot_due(self) -> str | None:
        if self.snapshot_every and self.updates - self.last_snapshot >= self.snapshot_every:
            return f"every {self.snapshot_every} updates"
        if (
            self.snapshot_win_rate > 0
            and len(self.pool_results) >= self.snapshot_min_games
            and float(np.mean(self.pool_results)) >= self.snapshot_win_rate
        ):
            return f"score vs pool {np.mean(self.pool_results):.2f} >= {self.snapshot_win_rate}"
        return None

    def _take_snapshot(self) -> None:
        snap = self.pool.add(self.policy, self.updates)
        mu, sigma = self.league.rating(LEARNER)
        self.league.add(snap.name, "snapshot", mu, sigma)
        self.last_snapshot = self.updates
        self.pool_results = []


# ---------------------------------------------------------------------- helpers


def _game_spec(data: Any) -> GameSpec:
    if isinstance(data, GameSpec):
        return data
    if isinstance(data, str):
        return GameSpec(data)
    data = to_plain(data)
    if isinstance(data, dict) and "_target_" in data:
        spec = safe_instantiate(data)
        if not isinstance(spec, GameSpec):
            raise ValueError(f"data.loader must build an arenas.games.GameSpec, got {type(spec)}")
        return spec
    if isinstance(data, dict) and "name" in data:
        return GameSpec(data["name"])
    raise ValueError(
        f"SelfPlayArena: data must name a game (tictactoe, connect_four, pettingzoo:<env>), got {data!r}"
    )


def _outcomes(winner: np.ndarray, seat: np.ndarray) -> np.ndarray:
    return np.where(winner < 0, 0, np.where(winner == seat, 1, -1)).astype(np.int64)


def _frozen_controller(twin: Policy) -> Controller:
    def act(obs: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, Any]:
        return twin.act(obs, masks, greedy=False, rng=np.random), None

    return act


def tictactoe_losing_lines(policy: Any) -> tuple[int, int]:
    """Opponent move sequences that beat the greedy ``policy``, as first and second player.

    Walks the whole game tree where the policy plays its greedy move and the opponent
    tries every legal move: 0 and 0 means no opponent (random, minimax, anything) can
    ever beat it. At most 945 lines per seat, batched per depth.
    """
    lost = []
    for policy_seat in (0, 1):
        cur = np.zeros(1, np.uint64)
        mask = np.zeros(1, np.uint64)
        losses = 0
        for ply in range(9):
            if len(cur) == 0:
                break
            if ply % 2 == policy_seat:
                legal = TicTacToe.legal(mask)
                a = policy.act(TicTacToe.planes(cur, mask), legal, greedy=True)
                cur, mask, won, full = TicTacToe.play(cur, mask, a)
                keep = ~(won | full)
            else:  # every opponent reply
                legal = TicTacToe.legal(mask)
                g, a = np.nonzero(legal)
                cur, mask, won, full = TicTacToe.play(cur[g], mask[g], a)
                losses += int(won.sum())
                keep = ~(won | full)
            cur, mask = cur[keep], mask[keep]
        lost.append(losses)
    return lost[0], lost[1]


# ---------------------------------------------------------------------- plot


def render_rating_history(
    history: list[dict[str, Any]], size: tuple[int, int] = (900, 520)
) -> np.ndarray:
    """A BGR line chart of each player's rating (mu) over training updates."""
    w, h = size
    img = np.full((h, w, 3), 255, np.uint8)
    left, right, top, bottom = 70, 170, 30, 50
    cv2.putText(
        img,
        "league ratings (openskill mu)",
        (left, 20),
        cv2.FONT_HERSHEY_SIMPLEX,
        0.55,
        (0, 0, 0),
        1,
    )
    if not history:
        cv2.putText(
            img, "no evaluations yet", (left, h // 2), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 0, 0), 1
        )
        return img
    steps = [e["step"] for e in history]
    names: list[str] = []
    for e in history:
        for k in e["mu"]:
            if k not in names:
                names.append(k)
    values = [v for e in history for v in e["mu"].values()]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-6:
        lo, hi = lo - 1, hi + 1
    s0, s1 = min(steps), max(steps)
    s1 = s1 if s1 > s0 else s0 + 1

    def xy(step: float, v: float) -> tuple[int, int]:
        x = left + (step - s0) / (s1 - s0) * (w - left - right)
        y = h - bottom - (v - lo) / (hi - lo) * (h - top - bottom)
        return int(round(x)), int(round(y))

    cv2.rectangle(img, (left, top), (w - right, h - bottom), (0, 0, 0), 1)
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        _, y = xy(s0, v)
        cv2.line(img, (left - 4, y), (left, y), (0, 0, 0), 1)
        cv2.putText(img, f"{v:.0f}", (8, y + 4), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1)
    for i in range(5):
        s = s0 + (s1 - s0) * i / 4
        x, _ = xy(s, lo)
        cv2.line(img, (x, h - bottom), (x, h - bottom + 4), (0, 0, 0), 1)
        cv2.putText(
            img, f"{s:.0f}", (x - 10, h - bottom + 18), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1
        )
    cv2.putText(img, "update", (w // 2 - 30, h - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1)
    palette = [  # BGR
        (200, 60, 30),
        (30, 30, 200),
        (30, 150, 30),
        (160, 30, 160),
        (0, 140, 220),
        (120, 120, 0),
        (0, 0, 0),
        (80, 160, 240),
        (140, 90, 40),
        (200, 0, 120),
    ]
    legend_y = top + 10
    color_i = 0
    # snapshots first (thin, grey), so the learner and the anchors are drawn on top
    names = sorted(names, key=lambda n: not n.startswith("snap_"))
    for name in names:
        pts = [xy(e["step"], e["mu"][name]) for e in history if name in e["mu"]]
        if name.startswith("snap_"):
            color, thick = (200, 200, 200), 1
        else:
            color, thick = palette[color_i % len(palette)], 2
            color_i += 1
            cv2.line(img, (w - right + 10, legend_y), (w - right + 30, legend_y), color, 2)
            cv2.putText(
                img,
                name,
                (w - right + 35, legend_y + 4),
                cv2.FONT_HERSHEY_SIMPLEX,
                0.45,
                (0, 0, 0),
                1,
            )
            legend_y += 18
        for p, q in zip(pts, pts[1:]):
            cv2.line(img, p, q, color, thick, cv2.LINE_AA)
        for p in pts:
            cv2.circle(img, p, 2 if thick == 1 else 3, color, -1)
    if any(n.startswith("snap_") for n in names):
        cv2.line(img, (w - right + 10, legend_y), (w - right + 30, legend_y), (200, 200, 200), 1)
        cv2.putText(
            img,
            "snapshots",
            (w - right + 35, legend_y + 4),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.45,
            (0, 0, 0),
            1,
        )
    return img


# ---------------------------------------------------------------------- Hydra schemas


@dataclass
class PolicyConfig(AgentConfig):
    """agents.Policy: an encoder over board planes with policy and value heads."""

    _target_: str = "agents.Policy"
    encoder: Any = MISSING  #: encoder config (set by conf/game/*)
    obs_shape: list[int] = field(default_factory=lambda: [3, 3, 2])  #: [rows, cols, planes]
    num_actions: int = 9  #: size of the action space


@dataclass
class SelfPlayArenaConfig:
    """arenas.SelfPlayArena: self-play with an opponent pool and a rated league."""

    _target_: str = "arenas.SelfPlayArena"
    epochs: int = 10  #: evaluation after each epoch
    steps_per_epoch: int = 20  #: updates per epoch
    games_per_step: int = 256  #: games played in parallel per update
    algo: str = "ppo"  #: ppo | a2c
    update_epochs: int = 4  #: PPO passes over each batch
    minibatch_size: int = 512  #: PPO minibatch (positions)
    clip_ratio: float = 0.2  #: PPO clipping
    gamma: float = 0.99  #: discount per own move
    gae_lambda: float = 0.95  #: GAE lambda
    value_coef: float = 0.5  #: value-loss weight
    entropy_coef: float = 0.01  #: entropy bonus
    latest_ratio: float = 0.5  #: share of games against the latest self
    pool_size: int = 16  #: frozen snapshots kept
    pool_opponents_per_step: int = 4  #: snapshots drawn per update
    snapshot_every: int = 10  #: snapshot every N updates (0: off)
    snapshot_win_rate: float = 0.7  #: snapshot when the score vs the pool reaches this (0: off)
    snapshot_min_games: int = 256  #: pool games needed before the win-rate rule applies
    train_anchors: dict[str, float] = field(default_factory=dict)  #: {baseline: share}
    eval_games: dict[str, int] = field(default_factory=dict)  #: {baseline: games} per epoch
    final_eval_games: Optional[dict[str, int]] = None  #: last evaluation  # noqa: UP045
    headline_metric: Optional[str] = None  #: default: per game  # noqa: UP045
    augment_mirror: bool = False  #: also train on left-right mirrored samples
    keep_best: Optional[str] = None  #: end with the policy best on this eval metric  # noqa: UP045
    collect_workers: int = 0  #: worker processes playing the training games (0: in-process)
    threads_per_worker: int = 1  #: OMP_NUM_THREADS of each collection worker


SCHEMAS: dict[str, dict[str, type]] = {
    "schema/agent": {"policy": PolicyConfig},
    "schema/arena": {"selfplay": SelfPlayArenaConfig},
}
