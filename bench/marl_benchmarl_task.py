"""mpe2's simple_spread_v3 as a BenchMARL task (bench/marl_vs_benchmarl.py; bench extra).

A module of its own, imported only by that bench's BenchMARL process: BenchMARL pickles
the task into its experiment folder, so the class must live at a module's top level, and
this module imports benchmarl, torchrl and mpe2 at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarl.environments.pettingzoo.common import PettingZooClass
from mpe2 import simple_spread_v3
from torchrl.envs import EnvBase, PettingZooWrapper


class Mpe2Spread(PettingZooClass):
    """BenchMARL's PettingZoo task class building mpe2's environment (PettingZoo 1.27 has
    no ``pettingzoo.mpe``) through torchrl's `PettingZooWrapper`: categorical actions, the
    global state returned (BenchMARL's MAPPO critic reads it). Each copy it makes gets its
    own seed, ``seed * 1000 + copy`` (BenchMARL's own task gives every copy the same)."""

    def get_env_fun(
        self, num_envs: int, continuous_actions: bool, seed: int | None, device: Any
    ) -> Callable[[], EnvBase]:
        made = [0]  # copies made so far by this factory
        kwargs = {**self.config, "continuous_actions": False}

        def make() -> EnvBase:
            made[0] += 1
            env = simple_spread_v3.parallel_env(**kwargs)
            return PettingZooWrapper(
                env, categorical_actions=True, return_state=True,
                seed=(seed or 0) * 1000 + made[0], device=device,
            )  # fmt: skip

        return make

    def supports_continuous_actions(self) -> bool:
        return False
