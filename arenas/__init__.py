"""Arenas: link agents (chains) or pit them against each other, on the onion engine."""

from encoders import cpu_tuning  # noqa: F401  (first: before paddle is imported)

from .app import ConfigError, run_arena, run_from_config
from .base import Arena
from .callbacks import standard_callbacks
from .caption import CaptionArena
from .check import ArenaCheckError, check_arena
from .classify import ClassifyArena
from .engine import Callback, Loop, Runner
from .gan import GanArena
from .selfplay import SelfPlayArena

__all__ = [
    "Arena",
    "ArenaCheckError",
    "Callback",
    "CaptionArena",
    "ClassifyArena",
    "GanArena",
    "ConfigError",
    "Loop",
    "Runner",
    "SelfPlayArena",
    "check_arena",
    "run_arena",
    "run_from_config",
    "standard_callbacks",
]
