"""Settings of the self-play arena (:class:`SelfPlayConfig`) and their checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional  # noqa: UP035 (OmegaConf needs typing forms)

from paddlecraft.agents.settings import ConfigError

from ..engine import ArenaConfig

ALGOS = ("ppo", "a2c", "alphazero")
POLICY_TARGETS = ("visits", "completed_q")


@dataclass
class SelfPlayConfig(ArenaConfig):
    """paddlecraft.arenas.SelfPlayArena settings."""

    epochs: int = 10  #: evaluation after each epoch
    steps_per_epoch: int = 20  #: updates per epoch
    games_per_step: int = 256  #: games played in parallel per update
    algo: str = "ppo"  #: ppo | a2c | alphazero (search visit counts as policy targets)
    update_epochs: int = 4  #: passes over each step's samples
    minibatch_size: int = 512  #: minibatch (positions)
    clip_ratio: float = 0.2  #: PPO clipping
    gamma: float = 0.99  #: discount per own move (PPO/A2C)
    gae_lambda: float = 0.95  #: GAE lambda (PPO/A2C)
    value_coef: float = 0.5  #: value-loss weight
    policy_coef: float = 1.0
    #: ^ alphazero and search updates: weight of the visit-count loss (0: train the value only)
    entropy_coef: float = 0.01  #: entropy bonus (PPO/A2C)
    simulations: int = 50  #: alphazero: PUCT simulations per training move
    c_puct: float = 1.5  #: alphazero: exploration constant
    dirichlet_alpha: float = 1.0  #: alphazero: root noise concentration
    noise_fraction: float = 0.25  #: alphazero: share of root priors replaced by noise
    temperature_moves: int = 8  #: alphazero: plies played in proportion to visits, then greedy
    policy_target: str = "visits"
    #: ^ alphazero: ``visits`` (AlphaZero's visit counts) or ``completed_q`` (Gumbel
    #: AlphaZero's improved policy: the noise-free prior raised by the search's Q values)
    latest_ratio: float = 0.5  #: share of games against the latest self
    pool_size: int = 16  #: frozen snapshots kept
    pool_opponents_per_step: int = 4  #: snapshots drawn per update
    snapshot_every: int = 10  #: snapshot every N updates (0: off)
    snapshot_score: float = 0.7
    #: ^ snapshot when the score (win 1, draw 1/2) vs the pool reaches this (0: off)
    snapshot_min_games: int = 256  #: pool games needed before the score rule applies
    train_anchors: dict[str, float] = field(default_factory=dict)  #: {baseline: share of games}
    eval_games: dict[str, int] = field(default_factory=dict)  #: {baseline: games} per epoch
    final_eval_games: Optional[dict[str, int]] = None  #: last evaluation  # noqa: UP045
    search_eval_games: dict[str, int] = field(default_factory=dict)
    #: ^ {baseline: games} the policy plays with search in the final evaluation
    eval_simulations: int = 200  #: simulations per move of search_eval_games
    solver_positions: int = 0
    #: ^ Connect Four: the final evaluation scores the policy's moves (and, with
    #: search_eval_games, the searching policy's) on this many solver-judged positions:
    #: metrics perfect_move_rate / good_move_rate (extra ``solver``; 0: off)
    headline_metric: Optional[str] = None  #: default: per game  # noqa: UP045
    augment_mirror: bool = False  #: also train on left-right mirrored samples
    keep_best: Optional[str] = None  #: end with the policy best on this eval metric  # noqa: UP045
    search_updates: int = 0
    #: ^ the last N updates are the search phase (search updates train as algo=alphazero)
    search_every: int = 1
    #: ^ in those last updates, every N-th trains with search and the others with ``algo``
    search_games_per_step: Optional[int] = None  # noqa: UP045
    #: ^ games per search update (default: games_per_step)
    search_lr: Optional[float] = None  # noqa: UP045
    #: ^ the policy's learning rate in search updates (default: its own schedule's)
    init_policy: Optional[str] = None  # noqa: UP045
    #: ^ start from this saved policy's weights (a run folder or its policy/)
    collect_workers: int = 0
    #: ^ Ray workers playing the training games (0: in-process; extra ``ray``)
    threads_per_worker: int = 1  #: OMP_NUM_THREADS (and Ray CPUs) of each collection worker
    ray_address: Optional[str] = None  # noqa: UP045
    #: ^ a running Ray cluster to collect on (``auto`` after ``ray start --head``); default:
    #: this process's Ray, started locally when none is running


def check_settings(cfg: SelfPlayConfig) -> None:
    """Refuse settings out of range, naming the setting, before anything is built (run.py
    prints these as one ``error:`` line)."""
    if cfg.algo not in ALGOS:
        raise ConfigError(f"arena.algo must be one of {ALGOS}, got {cfg.algo!r}")
    if cfg.policy_target not in POLICY_TARGETS:
        raise ConfigError(
            f"arena.policy_target must be one of {POLICY_TARGETS}, got {cfg.policy_target!r}"
        )
    total = cfg.epochs * cfg.steps_per_epoch
    if not 0 <= cfg.search_updates <= total:
        raise ConfigError(
            f"arena.search_updates must be in [0, epochs x steps_per_epoch = {total}] (the "
            f"last updates of the run are the search phase), got {cfg.search_updates}"
        )
    if cfg.search_every < 1:
        raise ConfigError(
            f"arena.search_every must be >= 1 (1: every update of the search phase searches), "
            f"got {cfg.search_every}"
        )
    if cfg.search_games_per_step is not None and cfg.search_games_per_step < 1:
        raise ConfigError(
            f"arena.search_games_per_step must be >= 1 or null (games_per_step), got "
            f"{cfg.search_games_per_step}"
        )
    if cfg.search_lr is not None and not cfg.search_lr > 0:
        raise ConfigError(f"arena.search_lr must be > 0 or null, got {cfg.search_lr}")
    if not 0.0 <= cfg.latest_ratio <= 1.0:
        raise ConfigError(f"arena.latest_ratio must be in [0, 1], got {cfg.latest_ratio}")
    if cfg.collect_workers < 0 or cfg.threads_per_worker < 1:
        raise ConfigError(
            f"arena.collect_workers must be >= 0 (0: collect in this process) and "
            f"arena.threads_per_worker >= 1, got {cfg.collect_workers} and "
            f"{cfg.threads_per_worker}"
        )
