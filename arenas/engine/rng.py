"""All random-number streams of a run (paddle, numpy legacy, python) as JSON and back."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import paddle

from paddlecraft.paddle_private import get_cpu_generator_state, set_cpu_generator_state


def capture_rng() -> dict[str, Any]:
    """The state of paddle's CPU generator, numpy's global RNG and Python's ``random``."""
    np_state = np.random.get_state()
    py = random.getstate()
    return {
        "paddle_cpu": get_cpu_generator_state(),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "python": [py[0], list(py[1]), py[2]],
    }


def restore_rng(state: dict[str, Any]) -> None:
    """Restore what `capture_rng` returned."""
    set_cpu_generator_state(state["paddle_cpu"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def seed_everything(seed: int) -> None:
    """Seed paddle, numpy's global RNG and Python's ``random``."""
    paddle.seed(seed)
    np.random.seed(seed % (2**32))
    random.seed(seed)
