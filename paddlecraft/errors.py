"""The errors a user can fix: one base, `PaddleCraftError`, in the lowest layer.

Everything raised for a mistake in what the user asked for (a setting, a data file, a
device, a checkpoint folder, an input shape) derives from `PaddleCraftError`. The
command line prints such an error as one ``error: <message>`` line and exits with status 2;
any other exception is a bug and keeps its traceback. Messages name the setting, what was
expected and the fix.

Each type also derives from the builtin it always was (``ValueError``, or ``RuntimeError``
for `CheckpointError`), so ``except ValueError`` in user code keeps working. The
types stay importable where they were defined before (``paddlecraft.agents.settings.
ConfigError``, ``paddlecraft.encoders.tensorio.CheckpointError`` ...).

This module imports nothing at import time: every layer (encoders, craftdata, agents, arenas) uses it.
"""

from __future__ import annotations

__all__ = [
    "command",
    "AmpError",
    "BadDataError",
    "CheckpointError",
    "ConfigError",
    "DeviceError",
    "EncoderInputError",
    "PaddleCraftError",
    "ScopeError",
    "UnsafeConfigError",
]


def command() -> str:
    """How the user started this process, for the commands messages suggest:
    ``python run.py`` in a checkout, ``paddlecraft`` for the installed command (and for
    scripts and notebooks, where there is no command line to repeat)."""
    import os
    import sys

    return "python run.py" if os.path.basename(sys.argv[0] or "") == "run.py" else "paddlecraft"


class PaddleCraftError(Exception):
    """A mistake in what the user asked for: the message says which setting fixes it."""


class ConfigError(PaddleCraftError, ValueError):
    """A setting is unknown, missing or of the wrong type; raised before any work starts."""


class BadDataError(PaddleCraftError, ValueError):
    """A data file or folder cannot be used; the message names it and the setting to change."""


class UnsafeConfigError(PaddleCraftError, ValueError):
    """A config names a ``_target_`` outside the allow-list."""


class DeviceError(PaddleCraftError, ValueError):
    """A requested device cannot be used on this machine or Paddle build."""


class AmpError(PaddleCraftError, ValueError):
    """An ``amp`` setting this device or build cannot honour."""


class CheckpointError(PaddleCraftError, RuntimeError):
    """A weights file is missing, corrupted, or does not match the model it is loaded into."""


class ScopeError(PaddleCraftError, ValueError):
    """A name scope is malformed, or two parameters one optimizer or program would step
    share a physical name."""


class EncoderInputError(PaddleCraftError, ValueError):
    """An input given to an encoder has the wrong shape or dtype."""
