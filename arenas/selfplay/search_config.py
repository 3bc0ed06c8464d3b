"""``arena.search.*`` (`SearchConfig`): PUCT search in the self-play arena's training
(``arena.algo=alphazero``) and its search phase, and the checks of its values; the other
groups of the arena's settings are in `.config`, which re-exports this one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np

from paddlecraft.agents.settings import ConfigError


def need(ok: bool, key: str, value: Any, rule: str, fix: str) -> None:
    """Refuse ``key=value`` unless ``ok``, in the engine's range-check wording."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: must be {rule}; {fix}")


@dataclass
class SearchConfig:
    """``arena.search``: PUCT search while training (``algo=alphazero``) and the search phase
    that ends a run (its last ``updates`` updates)."""

    simulations: int = 50
    """PUCT simulations per training move (>= 1; with ``reuse``, new ones on top of the
    kept subtree's)."""
    c_puct: float = 1.5
    """Exploration constant of PUCT (> 0; training and the final evaluation's searching
    player)."""
    dirichlet_alpha: float = 1.0
    """Concentration of the Dirichlet noise added to the root's priors (> 0; lower: the
    noise lands on fewer moves)."""
    noise_fraction: float = 0.25
    """Share of the root's priors replaced by that noise, in [0, 1]."""
    temperature_moves: int = 8
    """Plies of a training game played in proportion to the visits (>= 0); then the most
    visited move."""
    updates: int = 0
    """The last N updates of the run are the search phase (search updates train as
    ``algo=alphazero``; 0: none)."""
    every: int = 1
    """In the search phase every N-th update searches (>= 1), the others train with ``algo``."""
    games_per_step: Optional[int] = None  # noqa: UP045
    """Games per search update (>= 1; null: ``arena.games_per_step``)."""
    forced_playouts: float = 0.0
    """KataGo's forced playouts and policy target pruning: every root move a training
    search visits gets at least ``sqrt(k P N)`` visits (``k`` this, >= 0, KataGo's 2;
    ``P`` its noised prior, ``N`` the root's visits), and those visits are pruned from the
    policy target and the move sampled (0: off)."""
    reuse: bool = False
    """Start each training search from the subtree the previous one left below the move
    played (AlphaZero's and KataGo's tree reuse, `TreeReuse`): its visits count with the
    ``simulations`` new ones, in the search and in the policy target."""

    def check(self, total: int, at: str = "arena.search") -> None:
        """Refuse values no search can use; ``total`` is the run's number of updates."""
        need(self.simulations >= 1, f"{at}.simulations", self.simulations, ">= 1",
             f"e.g. {at}.simulations=50")  # fmt: skip
        need(self.temperature_moves >= 0, f"{at}.temperature_moves", self.temperature_moves,
             ">= 0 (0: always the most visited move)", f"e.g. {at}.temperature_moves=8")  # fmt: skip
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
        need(self.forced_playouts >= 0, f"{at}.forced_playouts", self.forced_playouts,
             ">= 0 (KataGo's k, 2; 0: off)", f"e.g. {at}.forced_playouts=2")  # fmt: skip
        if self.games_per_step is not None and self.games_per_step < 1:
            raise ConfigError(
                f"{at}.games_per_step must be >= 1 or null (arena.games_per_step), got "
                f"{self.games_per_step}"
            )


def sampling_temperature(ply: np.ndarray, cfg: Any) -> np.ndarray:
    """The temperature a training move at ``ply`` (stones on the board, ``[n]``) is sampled
    with: 1 for the first ``temperature_moves`` plies, then 0 (the most visited move)."""
    return np.where(ply < cfg.temperature_moves, 1.0, 0.0)
