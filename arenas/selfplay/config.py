"""Settings of the self-play arena (`SelfPlayConfig`), grouped, and their checks.

The run's shape stays at the top (``arena.epochs``, ``arena.games_per_step``, ``arena.algo``);
everything else lives in one group per concern, each a small dataclass that checks its
own values:

- ``arena.update.*`` (`UpdateConfig`): the gradient update of every step (PPO, A2C
  and the search updates alike);
- ``arena.search.*`` (`SearchConfig`, in `.search_config`): PUCT search in training and
  the search phase;
- ``arena.league.*`` (`LeagueConfig`): who the learner plays (latest self, pool, anchors);
- ``arena.eval.*`` (`EvalConfig`): the evaluations and the run's headline;
- ``arena.workers.*`` (`WorkersConfig`): collection on Ray workers.

The flat names of PaddleCraft 0.2 (``arena.collect_workers``...) are `RENAMED`: a
saved run's ``config.yaml`` is upgraded on resume, and a flat key typed on the command
line is refused with one line naming its new place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional  # noqa: UP035 (OmegaConf needs typing forms)

from paddlecraft.agents.settings import ConfigError
from paddlecraft.compat import RENAMED

from ..engine import ArenaConfig
from ..engine.ray_pool import WorkersConfig
from .search_config import SearchConfig
from .search_config import need as _need

ALGOS = ("ppo", "a2c", "alphazero")


@dataclass
class UpdateConfig:
    """``arena.update``: how each step's games become gradient steps."""

    epochs: int = 4
    """Passes over each step's samples (PPO and search updates; A2C makes one)."""
    minibatch_size: int = 512
    """Positions per gradient step (PPO and search updates; A2C takes them all at once)."""
    clip_ratio: float = 0.2
    """PPO: how far the probability ratio may move from 1 before the loss is clipped."""
    gamma: float = 0.99
    """PPO/A2C: discount per own move (a quicker win is worth more)."""
    gae_lambda: float = 0.95
    """PPO/A2C: GAE lambda (1: Monte Carlo returns; 0: one-step TD)."""
    value_coef: float = 0.5
    """Weight of the value loss (every algorithm)."""
    entropy_coef: float = 0.01
    """PPO/A2C: entropy bonus."""
    replay: int = 0
    """Search updates: keep the last N samples (mirror images included) and draw every
    minibatch from them, ``epochs`` x the update's new samples per update (0: train on the
    update's own samples only). PPO and A2C learn from their own update's games only."""
    average_duplicates: bool = False
    """Search updates: train each sample toward the mean targets (visit distribution,
    outcome) of every sample of the same position in the replay window, or in the update's
    own samples without one (the Oracle series' position averaging)."""

    def check(self, at: str = "arena.update") -> None:
        """Refuse values no update can use, naming ``<at>.<key>``."""
        _need(self.epochs >= 1, f"{at}.epochs", self.epochs, ">= 1", f"e.g. {at}.epochs=4")
        _need(
            self.minibatch_size >= 1,
            f"{at}.minibatch_size",
            self.minibatch_size,
            ">= 1",
            f"e.g. {at}.minibatch_size=512",
        )
        _need(self.replay >= 0, f"{at}.replay", self.replay, ">= 0 (0: no replay buffer)",
              f"e.g. {at}.replay=200000")  # fmt: skip


@dataclass
class LeagueConfig:
    """``arena.league``: the learner's opponents in training and when snapshots join them."""

    latest_ratio: float = 0.5
    """Share of games against the latest self."""
    pool_size: int = 16
    """Frozen snapshots kept in the pool."""
    pool_opponents_per_step: int = 4
    """Snapshots drawn from the pool per update."""
    snapshot_every: int = 10
    """Snapshot the learner every N updates (0: off); it is also snapshotted once its
    score vs the pool reaches `SNAPSHOT_SCORE` over `SNAPSHOT_MIN_GAMES` games (`.league`)."""
    train_anchors: dict[str, float] = field(default_factory=dict)
    """``{baseline: share of games}``: scripted opponents in training."""

    def check(self, at: str = "arena.league") -> None:
        """Refuse values no league can use, naming ``<at>.<key>``."""
        if not 0.0 <= self.latest_ratio <= 1.0:
            raise ConfigError(f"{at}.latest_ratio must be in [0, 1], got {self.latest_ratio}")
        _need(self.pool_size >= 1, f"{at}.pool_size", self.pool_size, ">= 1",
              f"e.g. {at}.pool_size=16")  # fmt: skip
        for key in ("pool_opponents_per_step", "snapshot_every"):
            value = getattr(self, key)
            _need(value >= 0, f"{at}.{key}", value, ">= 0", f"e.g. {at}.{key}=0")


@dataclass
class EvalConfig:
    """``arena.eval``: the evaluation after each epoch, the final one and the headline."""

    games: dict[str, int] = field(default_factory=dict)
    """``{baseline: games}`` the greedy policy plays after each epoch (empty: random, and
    minimax on tic-tac-toe, 100 each)."""
    final_games: Optional[dict[str, int]] = None  # noqa: UP045
    """``{baseline: games}`` of the last evaluation (null: ``games``)."""
    search_games: dict[str, int] = field(default_factory=dict)
    """``{baseline: games}`` the policy plays with PUCT search in the final evaluation
    (metrics ``search_*``)."""
    simulations: int = 200
    """Simulations per move of ``search_games``."""
    solver_positions: int = 0
    """Connect Four: every evaluation scores the greedy policy's moves and those of the
    policy searching with ``simulations`` on this many solver-judged positions: metrics
    perfect_move_rate / good_move_rate and search_perfect_move_rate /
    search_good_move_rate (extra ``solver``; 0: off)."""
    headline_metric: Optional[str] = None  # noqa: UP045
    """The run's headline metric (null: chosen by the final opponents)."""

    def check(self, at: str = "arena.eval") -> None:
        """Refuse values no evaluation can use, naming ``<at>.<key>``."""
        _need(self.simulations >= 1, f"{at}.simulations", self.simulations, ">= 1",
              f"e.g. {at}.simulations=200")  # fmt: skip
        _need(self.solver_positions >= 0, f"{at}.solver_positions", self.solver_positions,
              ">= 0 (0: off)", f"e.g. {at}.solver_positions=400")  # fmt: skip


@dataclass
class SelfPlayConfig(ArenaConfig):
    """paddlecraft.arenas.SelfPlayArena settings: the run's shape, then one group per concern."""

    epochs: int = 10
    """Evaluations: one after each epoch."""
    steps_per_epoch: int = 20
    """Updates per epoch."""
    games_per_step: int = 256
    """Games played in parallel per update."""
    algo: str = "ppo"
    """``ppo`` | ``a2c`` | ``alphazero`` (PUCT search's visit counts as policy targets)."""
    augment_mirror: bool = False
    """Also train on left-right mirrored samples."""
    init_policy: Optional[str] = None  # noqa: UP045
    """Start from this saved policy's weights (a run folder or its ``policy/``)."""
    update: UpdateConfig = field(default_factory=UpdateConfig)
    """The gradient update of each step."""
    search: SearchConfig = field(default_factory=SearchConfig)
    """PUCT search in training and the search phase."""
    league: LeagueConfig = field(default_factory=LeagueConfig)
    """The learner's training opponents and the snapshot pool."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluations and the headline."""
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    """Collection on Ray workers."""

    #: the flat keys of PaddleCraft 0.2 and where they are now (``old: group.new``), from
    #: the one rename table of `paddlecraft.compat`
    RENAMED: ClassVar[dict[str, str]] = RENAMED["selfplay_setting"]
    #: the `paddlecraft.compat.REMOVED` table of the settings removed since
    REMOVED: ClassVar[str] = "selfplay_setting"


def check_settings(cfg: SelfPlayConfig) -> None:
    """Refuse settings out of range, naming the setting, before anything is built (run.py
    prints these as one ``error:`` line): the algorithm, then each group's own checks."""
    if cfg.algo not in ALGOS:
        raise ConfigError(f"arena.algo must be one of {ALGOS}, got {cfg.algo!r}")
    cfg.update.check()
    cfg.search.check(total=cfg.epochs * cfg.steps_per_epoch)
    if cfg.update.replay and cfg.algo != "alphazero" and not cfg.search.updates:
        raise ConfigError(
            f"arena.update.replay={cfg.update.replay}: the replay buffer holds search-update "
            f"samples, and arena.algo={cfg.algo} with arena.search.updates=0 makes none (PPO "
            "and A2C learn from their own games only); set arena.algo=alphazero or "
            "arena.search.updates, or arena.update.replay=0"
        )
    if cfg.update.average_duplicates and cfg.algo != "alphazero" and not cfg.search.updates:
        raise ConfigError(
            "arena.update.average_duplicates=true averages the targets of search updates, and "
            f"arena.algo={cfg.algo} with arena.search.updates=0 makes none; set "
            "arena.algo=alphazero or arena.search.updates, or "
            "arena.update.average_duplicates=false"
        )
    cfg.league.check()
    cfg.eval.check()
    cfg.workers.check()


class CrossChecked:
    """The self-play arena's `check_config`: the constructor's `check_settings` of a
    changed ``Config`` (a live ``set`` of ``arena.*``)."""

    def check_config(self, cfg: SelfPlayConfig) -> None:
        """Refuse (`ConfigError`) settings the arena could not have been built with."""
        check_settings(cfg)
