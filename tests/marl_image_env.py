"""A tiny PettingZoo Parallel environment whose observations are images (tests/test_marl.py).

Two agents, ``painter_0`` and ``painter_1``, each see an 8x8 RGB image (uint8) that is all
red or all blue; the action (Discrete(2)) is the colour's index, rewarded +1 when right.
Episodes last ``max_cycles`` steps; the colour is redrawn every step from the env's seed.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class ColourEnv(ParallelEnv):
    metadata = {"name": "colour_v0", "render_modes": ["rgb_array"]}

    def __init__(self, max_cycles: int = 5, render_mode: str | None = None) -> None:
        self.possible_agents = ["painter_0", "painter_1"]
        self.max_cycles, self.render_mode = max_cycles, render_mode
        self._rng = np.random.default_rng(0)
        self._colour: dict[str, int] = {}

        self._obs_space = spaces.Box(0, 255, (8, 8, 3), np.uint8)
        self._act_space = spaces.Discrete(2)

    def observation_space(self, agent: str) -> spaces.Box:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._act_space

    def _observe(self) -> dict[str, np.ndarray]:
        out = {}
        for a in self.agents:
            img = np.zeros((8, 8, 3), np.uint8)
            img[..., 0 if self._colour[a] == 0 else 2] = 255
            out[a] = img
        return out

    def _draw(self) -> None:
        self._colour = {a: int(self._rng.integers(2)) for a in self.agents}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        self._draw()
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        rewards = {a: float(int(actions[a]) == self._colour[a]) for a in self.agents}
        self.t += 1
        done = self.t >= self.max_cycles
        self._draw()
        obs = self._observe()
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def render(self):
        return np.zeros((16, 16, 3), np.uint8) if self.render_mode == "rgb_array" else None
