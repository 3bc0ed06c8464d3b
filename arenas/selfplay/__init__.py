"""Self-play: a policy learns a two-player board game against itself and its past selves.

Modules: :mod:`.arena` (SelfPlayArena and its settings), :mod:`.ppo` and
:mod:`.alphazero` (the two kinds of update), :mod:`.workers` (collection processes),
:mod:`.league` (opponent pool, ratings), :mod:`.player` (trained policies as players, with
or without search), :mod:`.tournament` (round robin with fitted ratings), :mod:`.plots`.
The search itself is :mod:`paddlecraft.arenas.games.search` (it needs only the rules).
"""

from paddlecraft.agents import Policy

from .analysis import tictactoe_losing_lines
from .arena import SelfPlayArena, SelfPlayConfig
from .player import PolicyPlayer, SearchPlayer, load_policy, search_player

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"selfplay": SelfPlayArena},
    "schema/agent": {"policy": Policy},
}

__all__ = [
    "SCHEMAS",
    "PolicyPlayer",
    "SearchPlayer",
    "SelfPlayArena",
    "SelfPlayConfig",
    "load_policy",
    "search_player",
    "tictactoe_losing_lines",
]
