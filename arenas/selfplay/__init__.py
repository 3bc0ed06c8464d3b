"""Self-play: a policy learns a two-player board game against itself and its past selves.

Modules: `.arena` (SelfPlayArena), `.config` (its settings, in groups;
`.search_config` the search's),
`.updates` (one update rule per algorithm, from `.ppo` and `.alphazero`),
`.collect` and `.workers` (collection, in this process or on Ray workers),
`.league` (opponent pool, ratings), `.player` (trained policies as players, with
or without search), `.explain` (one position as a policy and its searches see it),
`.tournament` (round robin with fitted ratings), `.plots`.
The search itself is `paddlecraft.arenas.games.search` (it needs only the rules).
"""

from paddlecraft.agents import Policy

from .analysis import tictactoe_losing_lines
from .arena import SelfPlayArena
from .config import (
    EvalConfig,
    LeagueConfig,
    SearchConfig,
    SelfPlayConfig,
    UpdateConfig,
    WorkersConfig,
)
from .explain import explain_position
from .player import PolicyPlayer, SearchPlayer, load_policy, search_player

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"selfplay": SelfPlayArena},
    "schema/agent": {"policy": Policy},
}

__all__ = [
    "SCHEMAS",
    "EvalConfig",
    "LeagueConfig",
    "PolicyPlayer",
    "SearchConfig",
    "SearchPlayer",
    "SelfPlayArena",
    "SelfPlayConfig",
    "UpdateConfig",
    "WorkersConfig",
    "explain_position",
    "load_policy",
    "search_player",
    "tictactoe_losing_lines",
]
