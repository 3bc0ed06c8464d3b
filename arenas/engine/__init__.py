"""The arena engine: the Arena base, the onion loop, callbacks, checkpoints, resume, the app.

It knows no arena family. A family (built in, or a user's own package) subclasses
`Arena`, declares its settings dataclass, and registers its Hydra schemas with
`register_schemas`; ``run.py`` and `run_from_config` do the rest.
"""

from paddlecraft.agents.settings import ConfigError

from .app import build_agents, build_arena, run_arena, run_from_config, validate
from .base import Arena, ArenaConfig, StepAborted
from .callbacks import standard_callbacks
from .check import ArenaCheckError, check_arena
from .loop import Callback, Loop, Runner
from .media import Audio, Image, Text
from .schema import DataConfig, RunConfig, TrainerConfig, register_schemas

__all__ = [
    "Arena",
    "StepAborted",
    "ArenaCheckError",
    "ArenaConfig",
    "Audio",
    "Callback",
    "ConfigError",
    "DataConfig",
    "Image",
    "Loop",
    "RunConfig",
    "Runner",
    "Text",
    "TrainerConfig",
    "build_agents",
    "build_arena",
    "check_arena",
    "register_schemas",
    "run_arena",
    "run_from_config",
    "standard_callbacks",
    "validate",
]
