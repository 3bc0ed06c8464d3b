"""The checks of a `Policy`'s settings (``agents.<name>.*``): each bad value is a
`ConfigError` that names the setting, what it expects and an example, before any layer is
built.

Functions of data; `Policy` calls them.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from .settings import ConfigError

__all__ = ["SEARCH_MOVES", "check_policy_settings"]

#: the search's move rules (``paddlecraft.arenas.games.search.MOVE_RULES``; agents do not
#: import the arenas): what ``search_move`` accepts
SEARCH_MOVES = ("visits", "lcb")


def check_policy_settings(name: str, cfg: Any) -> None:
    """Raise a `ConfigError` for the first setting of ``cfg`` (a `PolicyConfig`) out of its
    range: the value discount, the draw score, the value head's bins and hidden layer,
    the moves-left weight and the searching player's settings."""
    if not 0 < float(cfg.value_discount) <= 1:
        raise ConfigError(
            f"agents.{name}.value_discount={cfg.value_discount!r}: must be in (0, 1] "
            f"(1: the game's outcome undiscounted); e.g. agents.{name}.value_discount=0.95"
        )
    if not -1 <= float(cfg.draw_score) <= 1:
        raise ConfigError(
            f"agents.{name}.draw_score={cfg.draw_score!r}: must be in [-1, 1] (a draw's "
            f"worth to the first player; 0: nothing, AlphaZero's); e.g. "
            f"agents.{name}.draw_score=-0.5"
        )
    bins = cfg.value_bins
    if isinstance(bins, bool) or not isinstance(bins, Integral) or not (bins == 0 or bins >= 2):
        raise ConfigError(
            f"agents.{name}.value_bins={bins!r}: expected 0 (a tanh value trained by MSE) or "
            f"an integer >= 2 (logits over that many bins on [-1, 1], trained by HL-Gauss "
            f"cross-entropy); e.g. agents.{name}.value_bins=51"
        )
    hidden = cfg.value_hidden
    if isinstance(hidden, bool) or not isinstance(hidden, Integral) or hidden < 0:
        raise ConfigError(
            f"agents.{name}.value_hidden={hidden!r}: expected an integer >= 0 (the value "
            f"head's hidden layer's width; 0: none, the value read linearly from the shared "
            f"features); e.g. agents.{name}.value_hidden=256"
        )
    if not float(cfg.value_sigma) > 0:
        raise ConfigError(
            f"agents.{name}.value_sigma={cfg.value_sigma!r}: must be > 0 (the target "
            f"Gaussian's width in bins; 0.75 is HL-Gauss's); e.g. agents.{name}.value_sigma=0.75"
        )
    weight = float(cfg.moves_left_weight)
    if not weight >= 0:
        raise ConfigError(
            f"agents.{name}.moves_left_weight={cfg.moves_left_weight!r}: must be >= 0 "
            f"(0: off); e.g. agents.{name}.moves_left_weight=0.02"
        )
    if weight > 0 and not cfg.moves_left:
        raise ConfigError(
            f"agents.{name}.moves_left_weight={weight}: the search's "
            f"moves-left utility reads the moves-left head, which is off; set "
            f"agents.{name}.moves_left=true (or moves_left_weight=0)"
        )
    if cfg.search_move not in SEARCH_MOVES:
        raise ConfigError(
            f"agents.{name}.search_move={cfg.search_move!r}: expected one of "
            f"{', '.join(SEARCH_MOVES)}; e.g. agents.{name}.search_move=lcb"
        )
    if cfg.search_fpu is not None and not float(cfg.search_fpu) >= 0:
        raise ConfigError(
            f"agents.{name}.search_fpu={cfg.search_fpu!r}: must be null (an unvisited "
            f"move is worth 0) or >= 0 (the node's mean minus that reduction); e.g. "
            f"agents.{name}.search_fpu=0"
        )
    if not float(cfg.search_policy_temperature) > 0:
        raise ConfigError(
            f"agents.{name}.search_policy_temperature={cfg.search_policy_temperature!r}"
            f": must be > 0 (1: the priors as the network gives them); e.g. "
            f"agents.{name}.search_policy_temperature=1.5"
        )
