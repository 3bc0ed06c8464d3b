"""Shared fixtures: unique name scopes, and every test leaves Paddle in dynamic float32 mode."""

from __future__ import annotations

import itertools

import paddle
import pytest

_counter = itertools.count()


@pytest.fixture
def scope() -> str:
    """A name scope no other live encoder holds."""
    return f"t{next(_counter)}"


@pytest.fixture
def make_scope():
    """Call it for as many fresh scopes as a test needs."""
    return lambda prefix="t": f"{prefix}{next(_counter)}"


@pytest.fixture(autouse=True)
def _paddle_defaults():
    yield
    if not paddle.in_dynamic_mode():
        paddle.disable_static()
    paddle.set_default_dtype("float32")
