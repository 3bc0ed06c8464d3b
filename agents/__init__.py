"""Agents: named scopes that own encoders, heads, an optimizer, a device and a seed."""

from .base import Agent, AgentConfig, load_agent
from .caption import Captioner, Listener, Recognizer, Speaker
from .classifier import Classifier, ClassifierConfig
from .device import DeviceError, resolve_device
from .gan import Discriminator, Generator
from .instantiate import UnsafeConfigError, check_targets, safe_instantiate
from .policy import Policy
from .settings import ConfigError

__all__ = [
    "Agent",
    "AgentConfig",
    "ClassifierConfig",
    "ConfigError",
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
