"""Helpers for tests of bad input: the `ConfigError` a build raises under Hydra's wrapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from paddlecraft.arenas.engine import ConfigError


def config_error(build: Callable[..., Any], *args: Any) -> ConfigError:
    """The ConfigError ``build(*args)`` raises (Hydra wraps it; the command line prints its
    line), found along the exception's causes."""
    with pytest.raises(Exception) as info:
        build(*args)
    e: BaseException | None = info.value
    while e is not None and not isinstance(e, ConfigError):
        e = e.__cause__
    assert e is not None, f"no ConfigError behind {info.value!r}"
    return e
