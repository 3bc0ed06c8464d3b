"""Agents that act at once: PettingZoo Parallel environments (mpe2), IPPO and MAPPO.

``python run.py arena=marl env=simple_spread``; `MarlArena` (the arena), `GroupPolicy`
(one group's shared policy, an Agent), `load_policy` (a trained group's policy acting on
raw PettingZoo observations). Modules: `.envs` (which environment, the groups), `.vector`
(batched copies), `.rollout`, `.workers` (rollouts on Ray), `.gae`, `.losses`, `.update`,
`.league` (teams against teams: snapshots and ratings), `.media`, `.deploy`.
"""

from paddlecraft.agents.group_policy import GroupPolicy

from .arena import MarlArena
from .config import EnvConfig, MarlConfig
from .deploy import DeployedPolicy, load_policy
from .envs import default_groups, make_env
from .gae import ValueNorm, gae

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"marl": MarlArena},
    "schema/agent": {"group_policy": GroupPolicy},
}

__all__ = [
    "SCHEMAS",
    "DeployedPolicy",
    "EnvConfig",
    "GroupPolicy",
    "MarlArena",
    "MarlConfig",
    "ValueNorm",
    "default_groups",
    "gae",
    "load_policy",
    "make_env",
]
