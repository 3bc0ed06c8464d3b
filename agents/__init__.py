"""Agents: named scopes that own encoders, heads, an optimizer, a device and a seed."""

from encoders import cpu_tuning  # noqa: F401  (first: before paddle is imported)

from .base import Agent, load_agent
from .classifier import Classifier
from .device import DeviceError, resolve_device
from .instantiate import UnsafeConfigError, check_targets, safe_instantiate

__all__ = [
    "Agent",
    "Classifier",
    "DeviceError",
    "UnsafeConfigError",
    "check_targets",
    "load_agent",
    "resolve_device",
    "safe_instantiate",
]
