"""The referential arena's checks of its settings against its world, before anything is trained."""

from __future__ import annotations

from typing import TYPE_CHECKING

from paddlecraft.errors import ConfigError

from .worlds import World

if TYPE_CHECKING:
    from .config import ReferentialConfig

#: the most bytes of candidate objects one evaluation may stack at once (``eval_size`` x
#: ``candidates`` objects go through the listener together)
MAX_CANDIDATE_BYTES = 2**31


def check_candidates(c: ReferentialConfig, world: World) -> None:
    """Refuse more candidates than the world has objects (training candidates: than its
    training objects), and an evaluation whose candidates would not fit in memory, naming
    the limit. (Distractors are drawn with replacement, so a split smaller than K repeats
    some; more than the whole world is a mistake.)"""
    if c.game != "discrimination":
        return
    n_train, n_test = len(world.train), len(world.test)
    limits = [("candidates", c.candidates, n_train + n_test, "objects"),
              ("train_candidates", c.train_candidates, n_train, "training objects")]  # fmt: skip
    for key, k, n, what in limits:
        if k > n:
            raise ConfigError(
                f"arena.{key}={k}: more candidates than {what} (the limit is {n}: "
                f"{n_train} training, {n_test} test objects); lower arena.{key}, e.g. 4, or "
                "give more objects"
            )
    item = world.train.x[0].nbytes if n_train else 0
    k_train = c.train_candidates or c.candidates
    stacks = [  # (setting, size setting, objects at once, candidates each)
        ("candidates", "eval_size", min(max(n_train, n_test), c.eval_size), c.candidates),
        ("train_candidates" if c.train_candidates else "candidates", "batch_size",
         c.batch_size, k_train),
    ]  # fmt: skip
    for key, size_key, n, k in stacks:
        held = n * k * item
        if held > MAX_CANDIDATE_BYTES:
            raise ConfigError(
                f"arena.{key}={k}: {n} objects (arena.{size_key}) among {k} candidates each "
                f"stack {held / 2**30:.1f} GiB of inputs at once (the limit is "
                f"{MAX_CANDIDATE_BYTES / 2**30:.0f} GiB); lower arena.{key} or arena.{size_key}"
            )
