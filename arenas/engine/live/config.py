"""``trainer.live``: the settings of a run's live endpoint, and the command line's shorthand.

``trainer.live=true`` is shorthand for ``trainer.live.enabled=true`` (the command line
rewrites it before Hydra composes, `expand_shorthand`); another address only by an
explicit ``trainer.live.host=...`` (logged as a warning).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the only address served without a warning
LOOPBACK = "127.0.0.1"
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0", "null")


@dataclass
class LiveConfig:
    """A live run: HTTP from inside the run to watch and steer it (docs/live.md)."""

    enabled: bool = False  #: serve the live endpoint (trainer.live=true is shorthand)
    host: str = LOOPBACK  #: address to bind; anything but loopback is logged as a warning
    port: int = 0  #: TCP port; 0 = a free one (written to live.json)


def expand_shorthand(args: Sequence[str]) -> list[str]:
    """``trainer.live=true`` -> ``trainer.live.enabled=true`` (and ``=false``); other
    arguments unchanged. Any other value is left for Hydra to refuse, naming the key."""
    out = []
    for a in args:
        key, eq, value = a.partition("=")
        if eq and key.lstrip("+") == "trainer.live" and value.strip().lower() in _TRUE + _FALSE:
            flag = "true" if value.strip().lower() in _TRUE else "false"
            a = f"{key}.enabled={flag}"
        out.append(a)
    return out


#: commands the endpoint takes (``set`` carries ``{key: value}``)
COMMANDS = ("pause", "resume", "checkpoint", "evaluate", "stop", "set")


class RunEnded(RuntimeError):
    """The run has ended: a queued command or ``call_soon`` work will never be applied."""


def write_live_json(path: Path, record: dict[str, Any]) -> None:
    """Write ``live.json`` readable by its owner only (0600), atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)
