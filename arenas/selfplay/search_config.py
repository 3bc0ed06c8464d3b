"""``arena.search.*`` (`SearchConfig`): PUCT search in the self-play arena's training
(``arena.algo=alphazero``) and its search phase, and the checks of its values; the other
groups of the arena's settings are in `.config`, which re-exports this one. And what the
settings make of a training move's ply: its sampling temperature (`sampling_temperature`),
its search's simulations (`simulations_at`) and whether it is in the opening."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np

from paddlecraft.agents.settings import ConfigError

POLICY_TARGETS = ("visits", "completed_q")


def need(ok: bool, key: str, value: Any, rule: str, fix: str) -> None:
    """Refuse ``key=value`` unless ``ok``, in the engine's range-check wording."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: must be {rule}; {fix}")


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
    temperature_value_cutoff: Optional[float] = None  # noqa: UP045
    """Leela Chess Zero's ``--temp-value-cutoff``: a move sampled from the visits (any
    ply sampled at a temperature) is drawn only among the moves whose mean value ``Q``
    is within this of the most visited move's, so that the sampled opening varies among
    near-equal moves and plays fewer blunders (null: every visited move; ``Q`` is in
    [-1, 1], a 10 % lower win chance is 0.2)."""
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
    ply_simulations: Optional[List[List[int]]] = None  # noqa: UP006, UP045
    """``[[ply, simulations], ...]``, plies ascending: from each ply on (stones on the board),
    the training searches add that many simulations instead of ``simulations`` (null: the
    same at every ply); e.g. ``[[8, 60], [22, 15]]`` searches deeper where the opening ends."""
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
    archive_starts: float = 0.0
    """Go-Exploit's search control (Trudeau and Bowling 2023): the share of each search
    update's training games that start at a position drawn uniformly from the replay
    window (`.archive`) instead of the empty board (0: every game from the empty board;
    needs ``arena.update.replay``)."""
    gumbel_considered: int = 0
    """Gumbel AlphaZero's root in training searches (Danihelka et al. 2022, `GumbelRoot`):
    the root samples this many moves by Gumbel-top-k and shares the simulations among them
    by sequential halving; the move played at every ply is its choice (a sample of the
    improved policy, as the paper's self-play) and the policy target the completed-Q
    policy. It replaces the root noise (``dirichlet_alpha``, ``noise_fraction``), forced
    playouts and the visit sampling (``temperature_moves``, ``late_moves``), which are not
    read then; ``policy_target`` is ``completed_q`` whatever it says (0: PUCT at the root;
    16 is the paper's, every move of Connect Four)."""
    reuse: bool = False
    """Start each training search from the subtree the previous one left below the move
    played (AlphaZero's and KataGo's tree reuse, `TreeReuse`): its visits count with the
    ``simulations`` new ones, in the search and in the policy target."""

    def check(self, total: int, at: str = "arena.search") -> None:
        """Refuse values no search can use; ``total`` is the run's number of updates."""
        need(
            self.simulations >= 1,
            f"{at}.simulations",
            self.simulations,
            ">= 1",
            f"e.g. {at}.simulations=50",
        )
        need(
            self.temperature_moves >= 0,
            f"{at}.temperature_moves",
            self.temperature_moves,
            ">= 0 (0: always the most visited move)",
            f"e.g. {at}.temperature_moves=8",
        )
        alpha = self.opening_dirichlet_alpha
        if alpha is not None:
            need(alpha > 0, f"{at}.opening_dirichlet_alpha", alpha,
                  f"> 0 (null: {at}.dirichlet_alpha in the opening too)",
                  f"e.g. {at}.opening_dirichlet_alpha=0.3")  # fmt: skip
        need(self.policy_temperature > 0, f"{at}.policy_temperature", self.policy_temperature,
              "> 0 (1: the network's priors as they are)", f"e.g. {at}.policy_temperature=1.5")  # fmt: skip
        temp = self.opening_policy_temperature
        if temp is not None:
            need(temp > 0, f"{at}.opening_policy_temperature", temp,
                  f"> 0 (null: {at}.policy_temperature in the opening too)",
                  f"e.g. {at}.opening_policy_temperature=1")  # fmt: skip
        cut = self.temperature_value_cutoff
        if cut is not None:
            need(0 <= cut <= 2, f"{at}.temperature_value_cutoff", cut,
                  "in [0, 2] (a Q difference; null: every visited move may be sampled)",
                  f"e.g. {at}.temperature_value_cutoff=0.1")  # fmt: skip
        need(self.late_moves >= 0, f"{at}.late_moves", self.late_moves,
              f">= 0 (plies after {at}.temperature_moves sampled cooler; 0: none)",
              f"e.g. {at}.late_moves=4")  # fmt: skip
        need(0 < self.late_temperature <= 1, f"{at}.late_temperature", self.late_temperature,
              "in (0, 1] (visits ** (1 / T); 1: as the first plies)",
              f"e.g. {at}.late_temperature=0.5")  # fmt: skip
        need(self.late_player in (None, 0, 1), f"{at}.late_player", self.late_player,
              "null (both players), 0 (the first) or 1 (the second)",
              f"e.g. {at}.late_player=1")  # fmt: skip
        if self.second_player_simulations is not None:
            need(self.second_player_simulations >= 1, f"{at}.second_player_simulations",
                  self.second_player_simulations, ">= 1 (null: simulations)",
                  f"e.g. {at}.second_player_simulations={2 * self.simulations}")  # fmt: skip
        if self.ply_simulations is not None:
            _ply_schedule(self, at)
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
        need(0 < self.full_fraction <= 1, f"{at}.full_fraction", self.full_fraction,
              "in (0, 1] (1: every training move a full search)", f"e.g. {at}.full_fraction=0.25")  # fmt: skip
        if self.full_fraction < 1:  # the fast searches are used
            need(1 <= self.fast_simulations <= self.simulations, f"{at}.fast_simulations",
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
        need(0 <= self.archive_starts <= 1, f"{at}.archive_starts", self.archive_starts,
              "in [0, 1] (the share of games started from the replay window; 0: none)",
              f"e.g. {at}.archive_starts=0.5")  # fmt: skip
        if self.archive_starts > 0:  # its games are at different plies in one search call
            lockstep = [
                name
                for name, on in (
                    ("opening_dirichlet_alpha", self.opening_dirichlet_alpha is not None),
                    ("opening_policy_temperature", self.opening_policy_temperature is not None),
                    ("second_player_simulations", self.second_player_simulations is not None),
                    ("ply_simulations", self.ply_simulations is not None),
                )
                if on
            ]
            if lockstep:
                raise ConfigError(
                    f"{at}.archive_starts={self.archive_starts} starts games at other plies, "
                    f"and {at}.{lockstep[0]} needs one search call's games at the same ply "
                    f"(or the same player to move): set {at}.{lockstep[0]}=null or "
                    f"{at}.archive_starts=0"
                )
        need(self.gumbel_considered >= 0, f"{at}.gumbel_considered", self.gumbel_considered,
              ">= 0 (the root moves Gumbel AlphaZero samples; 0: PUCT's root)",
              f"e.g. {at}.gumbel_considered=16")  # fmt: skip
        need(self.forced_playouts >= 0, f"{at}.forced_playouts", self.forced_playouts,
              ">= 0 (KataGo's k, 2; 0: off)", f"e.g. {at}.forced_playouts=2")  # fmt: skip
        if self.games_per_step is not None and self.games_per_step < 1:
            raise ConfigError(
                f"{at}.games_per_step must be >= 1 or null (arena.games_per_step), got "
                f"{self.games_per_step}"
            )
        if self.lr is not None and not self.lr > 0:
            raise ConfigError(f"{at}.lr must be > 0 or null, got {self.lr}")


def _ply_schedule(cfg: SearchConfig, at: str) -> None:
    """Refuse an ``arena.search.ply_simulations`` no search can follow."""
    pairs = [list(p) for p in cfg.ply_simulations or ()]
    fix = f"e.g. '{at}.ply_simulations=[[8,60],[22,15]]'"
    ok = all(len(p) == 2 and p[0] >= 0 and p[1] >= 1 for p in pairs)
    ok = ok and all(a[0] < b[0] for a, b in zip(pairs, pairs[1:]))
    need(
        ok,
        f"{at}.ply_simulations",
        pairs,
        "[ply >= 0, simulations >= 1] pairs, plies ascending",
        fix,
    )
    if cfg.second_player_simulations is not None or cfg.full_fraction < 1:
        raise ConfigError(
            f"{at}.ply_simulations sizes the training searches by ply, which "
            f"{at}.second_player_simulations and {at}.full_fraction < 1 size otherwise: "
            f"set one of them ({at}.ply_simulations=null)"
        )


def simulations_at(ply: np.ndarray, schedule: list[tuple[int, int]], default: int) -> int:
    """The new simulations of a training search at ``ply [n]`` (stones on the board): those
    of the last ``(from ply, simulations)`` of ``schedule`` (``arena.search.ply_simulations``,
    plies ascending) that the ply has reached, else ``default``. Games are played in
    lockstep, so one call's positions share a ply."""
    for start, _ in schedule:
        if (ply >= start).any() and not (ply >= start).all():
            raise ValueError("simulations_at: one call mixes plies of two search sizes")
    reached = [n for start, n in schedule if (ply >= start).all()]
    return reached[-1] if reached else default


def _in_opening(ply: np.ndarray, plies: int) -> bool:
    """Whether the positions at ``ply [n]`` are all within a game's first ``plies`` (the
    sampled opening); games are played in lockstep, so one call never mixes the two."""
    opening = ply < plies
    if opening.any() and not opening.all():
        raise ValueError("the opening's searches: one call mixes opening and later plies")
    return bool(opening.all())


def sampling_temperature(ply: np.ndarray, cfg: Any) -> np.ndarray:
    """The temperature a training move at ``ply`` (stones on the board, ``[n]``) is sampled
    with: 1 for the first ``temperature_moves`` plies, ``late_temperature`` for the
    ``late_moves`` after them (only ``late_player``'s plies when it is set: 0 the even, 1
    the odd), then 0 (the most visited move)."""
    late_end = cfg.temperature_moves + cfg.late_moves
    late = ply < late_end
    if cfg.late_player is not None:  # the other player's late plies: the most visited move
        late = late & (ply % 2 == cfg.late_player)
    late = np.where(late, float(cfg.late_temperature), 0.0)
    return np.where(ply < cfg.temperature_moves, 1.0, late)
