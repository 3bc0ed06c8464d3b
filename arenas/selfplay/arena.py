"""SelfPlayArena: a policy learns a two-player board game against itself and its past selves.

Each training step plays a batch of games at once on a batched numpy game (thousands of
positions per call), the learner against its latest self, a frozen snapshot from the
pool or a scripted anchor, seats alternating, then updates the policy: PPO or A2C on
the learner's moves (`.ppo`), or AlphaZero-style on search targets
(``algo=alphazero``, `.alphazero`), or both: the last ``search.updates`` updates
form a search phase where every ``search.every``-th update searches. Snapshots join the
pool every ``league.snapshot_every`` updates or when the learner's score against the pool
reaches `SNAPSHOT_SCORE` (`.league`); a league table rates the learner, the snapshots and
fixed anchors. ``python run.py arena=selfplay game=tictactoe``.

Scores: ``score`` is win 1, draw 1/2 everywhere (metrics, pool rule, tournaments);
``no_loss_rate`` is the share of games not lost (win or draw).

This module is the one class that schedules a step (which opponents,
which update, when to snapshot); playing is in `.collect`/`.workers`, the
updates in `.updates` (one rule per algorithm: `.ppo`, `.alphazero`), the pool and ratings
in `.league`, players in `.player`, settings in `.config`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.settings import ConfigError
from paddlecraft.encoders.tensorio import atomic_write_json

from ..engine import Arena
from ..games import Player, TicTacToe
from .analysis import game_spec, outcomes, result_rates, tictactoe_losing_lines
from .collect import COLLECT_STREAM, LEARNER, Collector
from .config import CrossChecked, SelfPlayConfig, check_settings
from .league import SNAPSHOT_MIN_GAMES, SNAPSHOT_SCORE, LeagueTable, OpponentPool
from .plan import evaluation_plan
from .player import PolicyPlayer, evaluation_searcher
from .playing import Controller, play_games
from .plots import rating_history_chart, save
from .replay import ReplayBuffer
from .updates import apply_update
from .workers import require_ray

log = logging.getLogger("paddlecraft")

#: random-stream ids (``[seed, id, ...]``): minibatches, evaluation games, the perfect-move rate
MINIBATCH_STREAM, EVAL_STREAM, SOLVER_EVAL_STREAM = 13, 7, 17


class SelfPlayArena(CrossChecked, Arena):
    """Self-play with an opponent pool, PPO/A2C/AlphaZero updates, a rated league and anchors.

    Args:
        agents: must contain ``policy`` (an `paddlecraft.agents.Policy` sized for the game).
        data: the game: a `GameSpec` config (``{_target_:
            arenas.games.GameSpec, name: connect_four}``) or a name.
        seed: run seed; every random draw of a step comes from a stream of
            ``(seed, purpose, update)``, never from numpy's global generator.
        **settings: `SelfPlayConfig` fields. Evaluation after each epoch plays
            ``eval.games`` (the last one ``eval.final_games``) with the greedy policy,
            seats alternating; ``eval.search_games`` are played in the final evaluation
            by the policy with ``eval.simulations`` PUCT simulations per move (metrics
            ``search_*``). The run ends with its last policy.
    """

    Config = SelfPlayConfig
    #: a stop, pause or signal abandons a collection between moves (nothing of the step is
    #: applied before its games end); collection workers' slices are cancelled (`.workers`)
    interruptible = True

    def __init__(
        self, agents: Mapping[str, Agent], data: Any = "tictactoe", seed: int = 0, **settings: Any
    ) -> None:
        super().__init__(agents, seed=seed, **settings)
        cfg: SelfPlayConfig = self.cfg
        self.require_agents("policy")
        self.policy: Policy = self.agents["policy"]  # type: ignore[assignment]
        if not isinstance(self.policy, Policy):
            raise ConfigError(
                f"SelfPlayArena: agents.policy must be an agents.Policy, got "
                f"{type(self.policy).__name__}"
            )
        self.spec = game_spec(data)
        if self.policy.obs_shape != self.spec.obs_shape or (
            self.policy.num_actions != self.spec.num_actions
        ):
            raise ConfigError(
                f"agents.policy is sized for observations {list(self.policy.obs_shape)} and "
                f"{self.policy.num_actions} actions, but {self.spec.name} has "
                f"{list(self.spec.obs_shape)} and {self.spec.num_actions}; choose the matching "
                f"game config (game={self.spec.short_name}) or set agents.policy.obs_shape / "
                "num_actions and the encoder's input size"
            )
        check_settings(cfg)
        total = cfg.epochs * cfg.steps_per_epoch
        self.search_from = total - cfg.search.updates  # first update trained with search
        rules = self.spec.rules
        if rules is None and (
            cfg.algo == "alphazero" or cfg.search.updates or cfg.eval.search_games
        ):
            raise ConfigError(
                f"arena.algo=alphazero, arena.search.updates and arena.eval.search_games need "
                f"the native rules of "
                f"the game for the search; {self.spec.name} has none (use game=tictactoe or "
                "game=connect_four)"
            )
        if cfg.init_policy:  # e.g. search training from a PPO run; a resume overwrites it
            folder = Path(cfg.init_policy)
            folder = folder / "policy" if (folder / "policy").is_dir() else folder
            if not (folder / "agent.json").is_file():
                raise ConfigError(
                    f"arena.init_policy={cfg.init_policy!r} holds no saved policy: give a "
                    "self-play run folder (with policy/) or a saved policy folder"
                )
            self.policy.load_state(folder, optimizer=False)
        self.train_anchors = {str(k): float(v) for k, v in (cfg.league.train_anchors or {}).items()}
        plan = evaluation_plan(cfg, self.spec, self.train_anchors)
        self.eval_games, self.final_eval_games = plan.games, plan.final_games
        self.search_eval_games, self.baselines = plan.search_games, plan.baselines
        self.headline = plan.headline
        if cfg.workers.count:  # the extra is missing: one error line now, not at step 1
            require_ray()
        self.steps_per_epoch_ = cfg.steps_per_epoch

        # state that checkpoints carry (arena_state)
        self.pool = OpponentPool(cfg.league.pool_size)
        self.league = LeagueTable()
        self.league.add(LEARNER, "learner")
        self.updates = 0
        self.evaluations = 0
        self.pool_results: list[float] = []  # learner's scores vs the pool since the last snapshot
        self.last_snapshot = 0
        self.replay = ReplayBuffer(cfg.update.replay) if cfg.update.replay else None
        self.collector = Collector(
            self.policy,
            self.spec,
            self.baselines,
            self.train_anchors,
            cfg,
            self.seed,
            lambda: self.check_interrupt(),  # looked up per move: a test may wrap it
        )
        self._last_rollout: dict[str, Any] | None = None  # the live page's training board
        self._human: Any = None  # a live run's human games (.humanplay.HumanPlay)

    # ------------------------------------------------------------------ engine API
    def steps_per_epoch(self) -> int:
        return self.steps_per_epoch_

    def batches(self, epoch: int) -> Iterator[int]:
        # self-play makes its own data: a step is an update index
        return iter(range(epoch * self.steps_per_epoch_, (epoch + 1) * self.steps_per_epoch_))

    def stream(self, purpose: int) -> np.random.Generator:
        """This update's random stream for one purpose (`COLLECT_STREAM`, `MINIBATCH_STREAM`)."""
        return np.random.default_rng([self.seed, purpose, self.updates])

    def searching_now(self) -> bool:
        """Whether the current update is a search update: every ``search.every``-th update
        of the last ``search.updates`` (the phase ends on one)."""
        k = self.updates - self.search_from
        search = self.cfg.search
        return search.updates > 0 and k >= 0 and (k + 1) % search.every == 0

    def algo_now(self) -> str:
        """The algorithm of the current update: ``algo``, or alphazero in the search updates."""
        return "alphazero" if self.searching_now() else self.cfg.algo

    def games_now(self) -> int:
        """Games played in the current update."""
        if self.searching_now() and self.cfg.search.games_per_step:
            return self.cfg.search.games_per_step
        return self.cfg.games_per_step

    def _collect(self) -> dict[str, Any]:
        """Play this update's training games; record them in the league and, against pool
        snapshots, in the snapshot rule's scores."""
        rollout, played = self.collector.collect(
            self.updates, self.games_now(), self.algo_now(), self.stream(COLLECT_STREAM), self.pool
        )
        pool_scores = []
        for name, o in played:
            self.league.add(name, "snapshot" if name.startswith("snap_") else "anchor")
            self.league.record(LEARNER, name, o)
            if name.startswith("snap_"):
                pool_scores.append((o > 0) + 0.5 * (o == 0))
        if pool_scores:
            s = np.concatenate(pool_scores)
            self.pool_results.extend(s.tolist())
            rollout["metrics"]["score_vs_pool"] = float(s.mean())
        return rollout

    def close(self) -> None:
        """Stop the collection workers, if any were started."""
        self.collector.close()

    def train_step(self, batch: int) -> dict[str, float]:
        if not self.pool.snapshots:  # the pool starts with the initial policy
            self._take_snapshot()
        searching = self.searching_now()
        rollout = self._collect()
        self._last_rollout = rollout
        metrics = self._update(rollout)
        self.updates += 1
        metrics.update(rollout["metrics"])
        if self.cfg.search.updates:
            metrics["search_update"] = float(searching)
        reason = self._snapshot_due()
        if reason:
            self._take_snapshot()
            log.debug("snapshot %s (%s)", self.pool.snapshots[-1].name, reason)
        metrics["pool_size"] = float(len(self.pool))
        metrics["rating_latest"] = self.league.rating(LEARNER)[0]
        return metrics

    def evaluate(self) -> dict[str, float]:
        final = self.updates >= self.epochs * self.steps_per_epoch_
        return self._evaluate(self.final_eval_games if final else self.eval_games, final)

    def _evaluate(self, plan: Mapping[str, int], final: bool) -> dict[str, float]:
        rng = np.random.default_rng([self.seed, EVAL_STREAM, self.evaluations])
        self.evaluations += 1
        out: dict[str, float] = {}
        players: list[tuple[str, Mapping[str, int], Any]] = [("", plan, None)]
        if final and self.search_eval_games:
            searcher = evaluation_searcher(self.policy, self.spec.rules, self.cfg)
            players.append(("search_", self.search_eval_games, searcher))
        for prefix, games, me in players:
            for name, n in games.items():
                if n <= 0:
                    continue
                o = self.play_against(self.baselines[name], n, rng, me)
                if not prefix:
                    self.league.add(name, "anchor")
                    self.league.record(LEARNER, name, o)
                for k, v in result_rates(o).items():
                    out[f"{prefix}{k}_vs_{name}"] = v
        if self.cfg.eval.solver_positions:
            out.update(self._judge())
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
        return out

    def _judge(self) -> dict[str, float]:
        """Perfect-move and good-move rates of the greedy policy and of the policy with
        ``eval.simulations`` PUCT simulations (``search_`` prefix) on
        ``eval.solver_positions`` solver-judged positions (at every evaluation)."""
        from ..games.solver import perfect_move_rate, solver_positions

        positions = solver_positions(self.cfg.eval.solver_positions, seed=0)
        searcher = evaluation_searcher(self.policy, self.spec.rules, self.cfg)
        out: dict[str, float] = {}
        for prefix, player in (("", PolicyPlayer(self.policy)), ("search_", searcher)):
            rng = np.random.default_rng([self.seed, SOLVER_EVAL_STREAM])
            for k, v in perfect_move_rate(player, positions, rng).items():
                out[f"{prefix}{k}"] = v
        return out

    def arena_state(self) -> dict:
        return {
            "updates": self.updates,
            "evaluations": self.evaluations,
            "pool_results": self.pool_results,
            "last_snapshot": self.last_snapshot,
            "pool": self.pool.state(),
            "league": self.league.state(),
            "replay": None if self.replay is None else self.replay.state(),
        }

    def load_arena_state(self, state: dict) -> None:
        self.updates = int(state["updates"])
        self.evaluations = int(state["evaluations"])
        self.pool_results = [float(x) for x in state["pool_results"]]
        self.last_snapshot = int(state["last_snapshot"])
        self.pool.load_state(state["pool"])
        self.league.load_state(state["league"])
        saved = state.get("replay")
        saved_size = 0 if saved is None else int(saved["capacity"])
        if saved_size != self.cfg.update.replay:
            raise ConfigError(
                f"the checkpoint was saved with arena.update.replay={saved_size}, this run has "
                f"{self.cfg.update.replay}; resume with arena.update.replay={saved_size} (the "
                "buffer's samples are part of the run)"
            )
        if self.replay is not None:
            self.replay.load_state(saved)

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
        save(rating_history_chart(self.league.history), plot)
        log.info("league table:\n%s", self.league.format())
        return {"policy": str(d / "policy"), "league": str(d / "league.json"), "ratings": str(plot)}

    # ------------------------------------------------------------------ live runs
    def live_view(self) -> dict[str, Any]:
        """The live page's picture: the last update's first training game as a board."""
        from .liveview import training_board

        board = None
        if self._last_rollout is not None and self.spec.rules is not None:
            board = training_board(self.spec.rules, self._last_rollout, self.updates)
        return {"panels": [board] if board else []}

    def live_routes(self, live: Any) -> list[Any]:
        """A person plays the policy with its search (``eval.simulations``): routes under
        ``/api/arena/play`` (`.humanplay`); none for games without native rules."""
        if self.spec.rules is None or self.run_dir is None:
            return []
        from .humanplay import HumanPlay, play_routes

        self._human = HumanPlay(
            self.policy, self.spec.rules, self.run_dir, self.cfg.eval.simulations,
            self.cfg.search.c_puct, self.seed, lambda: self.updates,
        )  # fmt: skip
        return play_routes(self._human, live)

    def extra_results(self) -> dict[str, Any]:
        """``human_games``: the policy's wins, draws and losses against people (live runs)."""
        from .humanplay import human_score

        score = human_score(self.run_dir) if self.run_dir is not None else {"games": 0}
        return {"human_games": score} if score["games"] else {}

    # ------------------------------------------------------------------ playing
    def play_against(
        self, opponent: Player, n: int, rng: np.random.Generator, me: Player | None = None
    ) -> np.ndarray:
        """Outcomes (+1 win, 0 draw, -1 loss) of ``n`` games of the greedy policy (or of
        ``me``) against ``opponent``, seats alternating."""
        policy_seat = np.arange(n) % 2
        seats = np.ones((n, 2), np.int64)  # seat -> controller: 0 the policy, 1 the opponent
        seats[np.arange(n), policy_seat] = 0

        def mine(o: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, Any]:
            if me is None:
                return self.policy.act(o, m, greedy=True), None
            return me.act(o, m, rng=rng), None

        controllers: list[Controller] = [mine, lambda o, m: (opponent.act(o, m, rng=rng), None)]
        winner, _, _ = play_games(self.spec, n, seats, controllers)
        return outcomes(winner, policy_seat)

    # ------------------------------------------------------------------ learning
    def _update(self, rollout: dict[str, Any]) -> dict[str, float]:
        """Train on the step's games with the current update's algorithm (`.updates`)."""
        return apply_update(
            self.algo_now(), self.policy, rollout, self.spec, self.cfg, self.stream(MINIBATCH_STREAM),
            self.replay,
        )  # fmt: skip

    # ------------------------------------------------------------------ snapshots
    def _snapshot_due(self) -> str | None:
        cfg = self.cfg.league
        if cfg.snapshot_every and self.updates - self.last_snapshot >= cfg.snapshot_every:
            return f"every {cfg.snapshot_every} updates"
        if (
            len(self.pool_results) >= SNAPSHOT_MIN_GAMES
            and float(np.mean(self.pool_results)) >= SNAPSHOT_SCORE
        ):
            return f"score vs pool {np.mean(self.pool_results):.2f} >= {SNAPSHOT_SCORE}"
        return None

    def _take_snapshot(self) -> None:
        snap = self.pool.add(self.policy, self.updates)
        mu, sigma = self.league.rating(LEARNER)
        self.league.add(snap.name, "snapshot", mu, sigma)
        self.last_snapshot = self.updates
        self.pool_results = []
