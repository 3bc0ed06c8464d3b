"""Settings of the self-play arena (`SelfPlayConfig`), grouped, and their checks.

The run's shape stays at the top (``arena.epochs``, ``arena.games_per_step``, ``arena.algo``);
everything else lives in one group per concern, each a small dataclass that checks its
own values:

- ``arena.update.*`` (`UpdateConfig`): the gradient update of every step (PPO, A2C
  and the search updates alike);
- ``arena.search.*`` (`SearchConfig`): PUCT search in training and the search phase;
- ``arena.league.*`` (`LeagueConfig`): who the learner plays (latest self, pool, anchors);
- ``arena.eval.*`` (`EvalConfig`): the evaluations and the run's headline;
- ``arena.workers.*`` (`WorkersConfig`): collection on Ray workers.

The flat names of PaddleCraft 0.2 (``arena.collect_workers``...) are `RENAMED`: a
saved run's ``config.yaml`` is upgraded on resume, and a flat key typed on the command
line is refused with one line naming its new place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional  # noqa: UP035 (OmegaConf needs typing forms)

from paddlecraft.agents.settings import ConfigError
from paddlecraft.compat import RENAMED

from ..engine import ArenaConfig
from .alphazero import EXPLORED_VALUES

ALGOS = ("ppo", "a2c", "alphazero")
POLICY_TARGETS = ("visits", "completed_q")


def _need(ok: bool, key: str, value: Any, rule: str, fix: str) -> None:
    """Refuse ``key=value`` unless ``ok``, in the engine's range-check wording."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: must be {rule}; {fix}")


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
    policy_coef: float = 1.0
    """Search updates (``algo=alphazero`` and the search phase): weight of the visit-count
    loss (0: train the value head only)."""
    opponent_policy_coef: float = 0.15
    """Search updates with a policy that has the opponent-policy head
    (``agents.policy.opponent_policy``): weight of its cross-entropy to the opponent's
    search at the reply (KataGo's 0.15); unused without the head."""
    ownership_coef: float = 1.5
    """Search updates with a policy that has the ownership head (``agents.policy.ownership``):
    weight of its per-cell cross-entropy, averaged over the cells (KataGo's 1.5 / cells x
    the sum); unused without the head."""
    entropy_coef: float = 0.01
    """PPO/A2C: entropy bonus."""
    root_value_weight: float = 0.0
    """Search updates: the value target is ``(1 - w) x`` the game's (discounted) outcome
    ``+ w x`` the search's value of the position (0: the outcome alone, as AlphaZero)."""
    proven_values: bool = False
    """Search updates with a policy that proves positions (``agents.policy.search_proofs``):
    where the search proved a position, its value target is the proof's exact value (the
    soonest win, the longest defence) instead of the game's outcome. Refused without
    ``search_proofs``."""
    explored_values: str = "outcome"
    """Search updates: the value target of the positions of a game up to its last move
    sampled away from the most visited one (training games sample their first
    ``arena.search.temperature_moves`` plies from the visits): ``outcome``, the game's
    (discounted) result, as every other position; ``search``, the search's value of the
    position, since the result that followed came after a move its search rated lower."""
    replay: int = 0
    """Search updates: keep the last N samples (mirror images included) and draw every
    minibatch from them, ``epochs`` x the update's new samples per update (0: train on the
    update's own samples only). PPO and A2C learn from their own update's games only."""
    replay_min: int = 0
    """With ``replay``: the window grows from this many samples to ``replay`` as the run
    adds samples (KataGo's power law, `replay.window`; 0: full-size from the start)."""
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
        _need(self.opponent_policy_coef >= 0, f"{at}.opponent_policy_coef",
              self.opponent_policy_coef, ">= 0", f"e.g. {at}.opponent_policy_coef=0.15")  # fmt: skip
        _need(self.ownership_coef >= 0, f"{at}.ownership_coef", self.ownership_coef, ">= 0",
              f"e.g. {at}.ownership_coef=1.5")  # fmt: skip
        _need(0.0 <= self.root_value_weight <= 1.0, f"{at}.root_value_weight",
              self.root_value_weight, "in [0, 1]", f"e.g. {at}.root_value_weight=0.5")  # fmt: skip
        _need(self.explored_values in EXPLORED_VALUES, f"{at}.explored_values",
              self.explored_values, f"one of {', '.join(EXPLORED_VALUES)}",
              f"e.g. {at}.explored_values=search")  # fmt: skip
        _need(self.replay >= 0, f"{at}.replay", self.replay, ">= 0 (0: no replay buffer)",
              f"e.g. {at}.replay=200000")  # fmt: skip
        _need(0 <= self.replay_min <= self.replay or self.replay_min == 0, f"{at}.replay_min",
              self.replay_min, f"in [0, {at}.replay] (a window growing from it to replay; 0: off)",
              f"e.g. {at}.replay_min=30000 with {at}.replay=200000")  # fmt: skip


@dataclass
class SearchConfig:
    """``arena.search``: PUCT search while training (``algo=alphazero``) and the search phase
    that ends a run (its last ``updates`` updates)."""

    simulations: int = 50
    """PUCT simulations per training move."""
    c_puct: float = 1.5
    """Exploration constant (training and the final evaluation's searching player)."""
    dirichlet_alpha: float = 1.0
    """Concentration of the Dirichlet noise added to the root's priors."""
    opening_dirichlet_alpha: Optional[float] = None  # noqa: UP045
    """The noise's concentration in the sampled opening, a game's first
    ``temperature_moves`` plies (null: ``dirichlet_alpha`` at every ply)."""
    noise_fraction: float = 0.25
    """Share of the root's priors replaced by that noise."""
    policy_temperature: float = 1.0
    """Leela Chess Zero's policy softmax temperature in training searches: the network's
    priors to the power ``1 / t``, renormalised (`prior_tempered`), before the root noise
    (1: as the network gives them; a searching player's is the policy's
    ``search_policy_temperature``)."""
    opening_policy_temperature: Optional[float] = None  # noqa: UP045
    """The policy temperature of the training searches in the sampled opening, a game's
    first ``temperature_moves`` plies (null: ``policy_temperature`` at every ply). With
    ``reuse`` a subtree kept from the opening keeps the priors it was searched with."""
    temperature_moves: int = 8
    """Plies of a training game played in proportion to the visits; then the most visited."""
    late_moves: int = 0
    """Plies after ``temperature_moves`` sampled from ``visits ** (1 / late_temperature)``:
    a cooler sampling that keeps to the moves the search rates near the best (0: none)."""
    late_temperature: float = 0.5
    """The temperature of the ``late_moves`` plies (1: as the first ones; near 0: the most
    visited)."""
    late_player: Optional[int] = None  # noqa: UP045
    """Whose ``late_moves`` are sampled: null both players', 0 the first player's (even
    plies), 1 the second's (odd plies; a defender that varies its replies, as a solver
    picking among equally good ones does); the other player's are the most visited."""
    second_player_simulations: Optional[int] = None  # noqa: UP045
    """Simulations of the second player's training moves (null: ``simulations``): a
    deeper search on one side, e.g. a stronger defender in a first-player win."""
    policy_target: str = "visits"
    """``visits`` (AlphaZero's visit counts) or ``completed_q`` (Gumbel AlphaZero's improved
    policy: the noise-free prior raised by the search's Q values)."""
    updates: int = 0
    """The last N updates of the run are the search phase (search updates train as
    ``algo=alphazero``; 0: none)."""
    every: int = 1
    """In the search phase every N-th update searches, the others train with ``algo``."""
    games_per_step: Optional[int] = None  # noqa: UP045
    """Games per search update (null: ``arena.games_per_step``)."""
    lr: Optional[float] = None  # noqa: UP045
    """The policy's learning rate in search updates (null: its own schedule's)."""
    full_fraction: float = 1.0
    """KataGo's playout cap randomisation: the share of training moves searched with
    ``simulations`` and root noise, which become training samples; the others are played
    after a ``fast_simulations`` search without noise and are not trained on (1: every
    move is a full search)."""
    fast_simulations: int = 10
    """Simulations of the fast searches (``full_fraction`` < 1)."""
    forced_playouts: float = 0.0
    """KataGo's forced playouts and policy target pruning: every root move a training
    search visits gets at least ``sqrt(k P N)`` visits (``k`` this, KataGo's 2; ``P`` its
    noised prior, ``N`` the root's visits), and those visits are pruned from the policy
    target and the move sampled (0: off)."""
    cache: bool = True
    """Keep the network's priors and value of every position a collection's searches
    evaluate, and look them up when a later search (the next move's, another game's)
    meets the position again (`CachedEvaluator`): the same search, fewer network calls.
    The results match uncached ones up to float rounding, so runs differ in their last
    bits (false: every leaf is evaluated, as before)."""
    network_copy: bool = True
    """Evaluate a collection's searches, and the evaluations' searching player, with a
    NumPy copy of the network made when each starts (`Policy.frozen_evaluator`: MLP and
    line-feature encoders on the CPU; others use Paddle's forward either way): the same
    priors and values up to float rounding, fewer seconds per network call, so runs differ
    from Paddle-forward ones in their last bits (false: Paddle's forward, as before)."""
    reuse: bool = False
    """Start each training search from the subtree the previous one left below the move
    played (AlphaZero's and KataGo's tree reuse, `TreeReuse`): its visits count with the
    ``simulations`` new ones, in the search and in the policy target."""

    def check(self, total: int, at: str = "arena.search") -> None:
        """Refuse values no search can use; ``total`` is the run's number of updates."""
        _need(
            self.simulations >= 1,
            f"{at}.simulations",
            self.simulations,
            ">= 1",
            f"e.g. {at}.simulations=50",
        )
        _need(
            self.temperature_moves >= 0,
            f"{at}.temperature_moves",
            self.temperature_moves,
            ">= 0 (0: always the most visited move)",
            f"e.g. {at}.temperature_moves=8",
        )
        alpha = self.opening_dirichlet_alpha
        if alpha is not None:
            _need(alpha > 0, f"{at}.opening_dirichlet_alpha", alpha,
                  f"> 0 (null: {at}.dirichlet_alpha in the opening too)",
                  f"e.g. {at}.opening_dirichlet_alpha=0.3")  # fmt: skip
        _need(self.policy_temperature > 0, f"{at}.policy_temperature", self.policy_temperature,
              "> 0 (1: the network's priors as they are)", f"e.g. {at}.policy_temperature=1.5")  # fmt: skip
        temp = self.opening_policy_temperature
        if temp is not None:
            _need(temp > 0, f"{at}.opening_policy_temperature", temp,
                  f"> 0 (null: {at}.policy_temperature in the opening too)",
                  f"e.g. {at}.opening_policy_temperature=1")  # fmt: skip
        _need(self.late_moves >= 0, f"{at}.late_moves", self.late_moves,
              f">= 0 (plies after {at}.temperature_moves sampled cooler; 0: none)",
              f"e.g. {at}.late_moves=4")  # fmt: skip
        _need(0 < self.late_temperature <= 1, f"{at}.late_temperature", self.late_temperature,
              "in (0, 1] (visits ** (1 / T); 1: as the first plies)",
              f"e.g. {at}.late_temperature=0.5")  # fmt: skip
        _need(self.late_player in (None, 0, 1), f"{at}.late_player", self.late_player,
              "null (both players), 0 (the first) or 1 (the second)",
              f"e.g. {at}.late_player=1")  # fmt: skip
        if self.second_player_simulations is not None:
            _need(self.second_player_simulations >= 1, f"{at}.second_player_simulations",
                  self.second_player_simulations, ">= 1 (null: simulations)",
                  f"e.g. {at}.second_player_simulations={2 * self.simulations}")  # fmt: skip
        if self.policy_target not in POLICY_TARGETS:
            raise ConfigError(
                f"{at}.policy_target must be one of {POLICY_TARGETS}, got {self.policy_target!r}"
            )
        if not 0 <= self.updates <= total:
            raise ConfigError(
                f"{at}.updates must be in [0, epochs x steps_per_epoch = {total}] (the "
                f"last updates of the run are the search phase), got {self.updates}"
            )
        if self.every < 1:
            raise ConfigError(
                f"{at}.every must be >= 1 (1: every update of the search phase searches), "
                f"got {self.every}"
            )
        _need(0 < self.full_fraction <= 1, f"{at}.full_fraction", self.full_fraction,
              "in (0, 1] (1: every training move a full search)", f"e.g. {at}.full_fraction=0.25")  # fmt: skip
        if self.full_fraction < 1:  # the fast searches are used
            _need(1 <= self.fast_simulations <= self.simulations, f"{at}.fast_simulations",
                  self.fast_simulations, f"in [1, {at}.simulations = {self.simulations}]",
                  f"e.g. {at}.fast_simulations={max(1, self.simulations // 5)}")  # fmt: skip
            if self.reuse:
                raise ConfigError(
                    f"{at}.reuse keeps a search's tree for the next move, which "
                    f"{at}.full_fraction < 1 searches with another search: set one of "
                    f"them ({at}.reuse=false or {at}.full_fraction=1)"
                )
            if self.second_player_simulations is not None:
                raise ConfigError(
                    f"{at}.second_player_simulations sizes full searches by side, and "
                    f"{at}.full_fraction < 1 sizes them by a draw: set one of them "
                    f"({at}.second_player_simulations=null or {at}.full_fraction=1)"
                )
        _need(self.forced_playouts >= 0, f"{at}.forced_playouts", self.forced_playouts,
              ">= 0 (KataGo's k, 2; 0: off)", f"e.g. {at}.forced_playouts=2")  # fmt: skip
        if self.games_per_step is not None and self.games_per_step < 1:
            raise ConfigError(
                f"{at}.games_per_step must be >= 1 or null (arena.games_per_step), got "
                f"{self.games_per_step}"
            )
        if self.lr is not None and not self.lr > 0:
            raise ConfigError(f"{at}.lr must be > 0 or null, got {self.lr}")


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
    """Snapshot the learner every N updates (0: off)."""
    snapshot_score: float = 0.7
    """Snapshot when the learner's score (win 1, draw 1/2) vs the pool reaches this (0: off)."""
    snapshot_min_games: int = 256
    """Pool games needed before the score rule applies."""
    train_anchors: dict[str, float] = field(default_factory=dict)
    """``{baseline: share of games}``: scripted opponents in training."""

    def check(self, at: str = "arena.league") -> None:
        """Refuse values no league can use, naming ``<at>.<key>``."""
        if not 0.0 <= self.latest_ratio <= 1.0:
            raise ConfigError(f"{at}.latest_ratio must be in [0, 1], got {self.latest_ratio}")
        _need(self.pool_size >= 1, f"{at}.pool_size", self.pool_size, ">= 1",
              f"e.g. {at}.pool_size=16")  # fmt: skip
        for key in ("pool_opponents_per_step", "snapshot_every", "snapshot_min_games"):
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
    keep_best: Optional[str] = None  # noqa: UP045
    """End with the policy best on this per-epoch metric instead of the last one."""
    average_last: int = 0
    """End with the mean of the policy's weights at its last N evaluated epoch ends
    (stochastic weight averaging; 0: the last weights). With ``trainer.eval_every=0``, the
    default, every epoch end is evaluated; an evaluation between them (a live run's) does
    not count. Training is unchanged; the final evaluation plays the average and the run
    saves it; ``last_<metric>`` report the last policy's figures beside it."""

    def check(self, at: str = "arena.eval") -> None:
        """Refuse values no evaluation can use, naming ``<at>.<key>``."""
        _need(self.simulations >= 1, f"{at}.simulations", self.simulations, ">= 1",
              f"e.g. {at}.simulations=200")  # fmt: skip
        _need(self.solver_positions >= 0, f"{at}.solver_positions", self.solver_positions,
              ">= 0 (0: off)", f"e.g. {at}.solver_positions=400")  # fmt: skip
        _need(self.average_last >= 0, f"{at}.average_last", self.average_last,
              ">= 0 (0: the last weights)", f"e.g. {at}.average_last=4")  # fmt: skip
        if self.average_last and self.keep_best:
            raise ConfigError(
                f"{at}.keep_best and {at}.average_last each choose the policy the run ends "
                f"with; set one of them ({at}.keep_best=null or {at}.average_last=0)"
            )


@dataclass
class WorkersConfig:
    """``arena.workers``: where the training games are played."""

    count: int = 0
    """Ray workers playing the training games (0: in this process; extra ``ray``)."""
    threads: int = 1
    """``OMP_NUM_THREADS`` (and Ray CPUs) of each worker."""
    ray_address: Optional[str] = None  # noqa: UP045
    """A running Ray cluster to collect on (``auto`` after ``ray start --head``); null: this
    process's Ray, started locally when none is running."""

    def check(self, at: str = "arena.workers") -> None:
        """Refuse values no collection can use, naming ``<at>.<key>``."""
        if self.count < 0 or self.threads < 1:
            raise ConfigError(
                f"{at}.count must be >= 0 (0: collect in this process) and {at}.threads "
                f">= 1, got {self.count} and {self.threads}"
            )


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
    #: settings added since whose default changed how a run plays, and the value a run
    #: saved before them resumes with (`paddlecraft.compat.settings_as_saved`)
    AS_BEFORE: ClassVar[dict[str, Any]] = {"search.cache": False, "search.network_copy": False}


def check_settings(cfg: SelfPlayConfig, proofs: bool = False) -> None:
    """Refuse settings out of range, naming the setting, before anything is built (run.py
    prints these as one ``error:`` line): the algorithm, then each group's own checks.
    ``proofs``: whether the policy's searches prove positions (``search_proofs``)."""
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
    if cfg.update.proven_values and not proofs:
        raise ConfigError(
            "arena.update.proven_values=true trains proven positions toward their proofs, but "
            "agents.policy.search_proofs is false, so its searches prove nothing; set "
            "agents.policy.search_proofs=true or arena.update.proven_values=false"
        )
    cfg.league.check()
    cfg.eval.check()
    cfg.workers.check()
