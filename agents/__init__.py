"""Agents: named scopes that own encoders, heads, an optimizer, a device and a seed."""

import paddlecraft._needs_paddle  # noqa: F401  (no Paddle: one line naming both installs)

from .base import Agent, AgentConfig, load_agent
from .captioner import Captioner
from .classifier import Classifier, ClassifierConfig
from .device import DeviceError, resolve_device
from .gan import Discriminator, Generator
from .instantiate import UnsafeConfigError, check_targets, safe_instantiate
from .joint import update_together
from .listener import Listener
from .plug import image_inputs
from .policy import Policy
from .recognizer import Recognizer
from .referential import Receiver, Sender
from .settings import ConfigError
from .speaker import Speaker
from .towers import ImageTower, TextTower

__all__ = [
    "Agent",
    "AgentConfig",
    "ClassifierConfig",
    "ConfigError",
    "Captioner",
    "Classifier",
    "DeviceError",
    "Listener",
    "Receiver",
    "Recognizer",
    "Sender",
    "Speaker",
    "Discriminator",
    "Generator",
    "ImageTower",
    "TextTower",
    "Policy",
    "UnsafeConfigError",
    "check_targets",
    "image_inputs",
    "load_agent",
    "resolve_device",
    "safe_instantiate",
    "update_together",
]
