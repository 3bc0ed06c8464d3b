"""Agents: named scopes that own encoders, heads, an optimizer, a device and a seed."""

from encoders import cpu_tuning  # noqa: F401  (first: before paddle is imported)

from .base import Agent, load_agent
from .caption import Captioner, Listener, Recognizer, Speaker
from .classifier import Classifier
from .device import DeviceError, resolve_device
from .gan import Discriminator, Generator
from .instantiate import UnsafeConfigError, check_targets, safe_instantiate
from .policy import Policy

__all__ = [
    "Agent",
    "Captioner",
    "Classifier",
    "DeviceError",
    "Listener",
    "Recognizer",
    "Speaker",
    "Discriminator",
    "Generator",
    "Policy",
    "UnsafeConfigError",
    "check_targets",
    "load_agent",
    "resolve_device",
    "safe_instantiate",
]
