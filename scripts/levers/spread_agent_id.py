"""A lever measured on arena=marl: simple_spread with each agent's one-hot index appended.

    python run.py arena=marl env=simple_spread arena.env.name=null \
        arena.env.cls=scripts.levers.spread_agent_id:SpreadWithAgentId arena.epochs=6 seed=0

Terry et al. 2020 ("Revisiting parameter sharing in multi-agent deep RL"): a shared policy
told which agent it acts for can learn role-specific behaviour. Measured inside the seed
noise (docs/results.json, ablations, section marl); removed in the next commit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box
from mpe2 import simple_spread_v3
from pettingzoo.utils.env import ParallelEnv


class SpreadWithAgentId(ParallelEnv):
    """mpe2 simple_spread_v3 whose observations end with the agent's one-hot index [N]."""

    metadata = {"name": "spread_agent_id", "render_modes": ["rgb_array"]}

    def __init__(self, **kwargs: Any) -> None:
        self.env = simple_spread_v3.parallel_env(**kwargs)
        self.possible_agents = list(self.env.possible_agents)
        self.render_mode = self.env.render_mode

    def observation_space(self, agent: str) -> Box:
        base = self.env.observation_space(agent)
        return Box(-np.inf, np.inf, (base.shape[0] + len(self.possible_agents),), np.float32)

    def action_space(self, agent: str) -> Any:
        return self.env.action_space(agent)

    def _with_index(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        eye = np.eye(len(self.possible_agents), dtype=np.float32)
        return {a: np.concatenate([o, eye[self.possible_agents.index(a)]]).astype(np.float32)
                for a, o in obs.items()}  # fmt: skip

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        return self._with_index(obs), info

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rew, term, trunc, info = self.env.step(actions)
        self.agents = list(self.env.agents)
        return self._with_index(obs), rew, term, trunc, info

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()
