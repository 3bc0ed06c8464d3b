"""Many copies of one Parallel environment stepped as one batch, arrays by group.

Own batching (a list of environments stepped in turn in this process) rather than
SuperSuit's vector wrappers or gymnasium's vector API: SuperSuit's
``pettingzoo_env_to_vec_env_v1`` turns every agent into one index of a gymnasium vector
env, so agents lose their names and groups, and it needs every agent to share one
observation and action space (simple_tag's two teams and simple_speaker_listener's two
roles do not); gymnasium's vector API takes single-agent envs only. In one process both
would step the same Python simulator one copy after another, which is the cost
(bench/marl_bench.py: the training loop over the bare batched envs stepping random
actions). Arrays come out as ``[envs, agents of the group, ...]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


class BatchedEnv:
    """``num_envs`` copies of a ParallelEnv, observations and rewards stacked by group.

    Args:
        make: builds one environment (a ParallelEnv).
        num_envs: copies stepped together.
        groups: ``{group: [agent names]}`` (`paddlecraft.arenas.marl.envs.check_groups`).

    An episode of one copy ends when all its agents are done (terminated or truncated)
    or none is left; `reset_one` starts the next. An agent that leaves early is masked
    (``alive`` 0), its observation zeros.
    """

    def __init__(
        self, make: Callable[[], Any], num_envs: int, groups: Mapping[str, Sequence[str]]
    ) -> None:
        self.envs = [make() for _ in range(num_envs)]
        self.groups = {g: list(m) for g, m in groups.items()}
        env = self.envs[0]
        self.agents = [a for m in self.groups.values() for a in m]
        self.obs_space = {g: env.observation_space(m[0]) for g, m in self.groups.items()}
        self.act_space = {g: env.action_space(m[0]) for g, m in self.groups.items()}
        self.obs_shape = {g: tuple(s.shape) for g, s in self.obs_space.items()}
        self.num_envs = num_envs
        self._last: list[dict[str, Any]] = [{} for _ in self.envs]

    @property
    def state_dim(self) -> int:
        """Length of the centralised critic's input: every agent's observation, flattened."""
        return int(sum(np.prod(self.obs_shape[g]) * len(m) for g, m in self.groups.items()))

    def _stack(self, per_env: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        out = {}
        for g, members in self.groups.items():
            shape = self.obs_shape[g]
            arr = np.zeros((len(per_env), len(members), *shape), np.float32)  # [N, Ag, *obs]
            for i, obs in enumerate(per_env):
                for j, a in enumerate(members):
                    if a in obs:
                        arr[i, j] = obs[a]
            out[g] = arr
        return out

    def reset_one(self, i: int, seed: int) -> None:
        """Start a new episode in copy ``i`` (seeded)."""
        obs, _ = self.envs[i].reset(seed=int(seed))
        self._last[i] = obs

    def reset(self, seeds: Sequence[int]) -> dict[str, np.ndarray]:
        """Start every copy, copy ``i`` with ``seeds[i]``; the observations by group."""
        for i, s in enumerate(seeds):
            self.reset_one(i, s)
        return self.observations()

    def observations(self) -> dict[str, np.ndarray]:
        """The current observations by group, ``[N, Ag, *obs_shape]``."""
        return self._stack(self._last)

    @staticmethod
    def state(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The centralised critic's input ``[N, state_dim]``: all observations, flattened,
        in group order."""
        return np.concatenate([o.reshape(o.shape[0], -1) for o in obs.values()], axis=1)

    def _env_actions(self, i: int, actions: Mapping[str, np.ndarray]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        live = set(self.envs[i].agents)
        for g, members in self.groups.items():
            space = self.act_space[g]
            for j, a in enumerate(members):
                if a not in live:
                    continue
                act = actions[g][i, j]
                if hasattr(space, "n"):
                    out[a] = int(act)
                else:  # a Box: the Gaussian's sample clipped into the bounds
                    out[a] = np.clip(act, space.low, space.high).astype(space.dtype)
        return out

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Step every copy; ``actions[g]`` is ``[N, Ag]`` (discrete) or ``[N, Ag, dim]``.

        Returns ``obs`` (by group; the final observation where an episode ended),
        ``rewards`` / ``alive`` / ``terminated`` (by group, ``[N, Ag]``) and ``ended``
        (``[N]`` bool: the copy's episode is over; `reset_one` it).
        """
        n = self.num_envs
        rewards = {g: np.zeros((n, len(m)), np.float32) for g, m in self.groups.items()}
        alive = {g: np.zeros((n, len(m)), np.float32) for g, m in self.groups.items()}
        term = {g: np.zeros((n, len(m)), bool) for g, m in self.groups.items()}
        ended = np.zeros(n, bool)
        for i, env in enumerate(self.envs):
            acts = self._env_actions(i, actions)
            for g, members in self.groups.items():
                for j, a in enumerate(members):
                    alive[g][i, j] = a in acts
            obs, rew, te, tr, _ = env.step(acts)
            for g, members in self.groups.items():
                for j, a in enumerate(members):
                    rewards[g][i, j] = float(rew.get(a, 0.0))
                    term[g][i, j] = bool(te.get(a, False))
            done = [bool(te.get(a, False) or tr.get(a, False)) for a in acts]
            ended[i] = not env.agents or all(done)
            self._last[i] = obs
        return {
            "obs": self.observations(),
            "rewards": rewards,
            "alive": alive,
            "terminated": term,
            "ended": ended,
        }

    def close(self) -> None:
        for env in self.envs:
            env.close()
