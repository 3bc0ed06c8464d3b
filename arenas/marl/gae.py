"""Generalised advantage estimation and the running value normaliser (NumPy).

Arrays are time-major: ``[T, B]`` with ``B`` any flattened batch (envs x agents).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    ended: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, returns)``, both ``[T, B]`` (Schulman et al. 2016).

    ``values[t]`` is V(s_t); ``next_values[t]`` V(s_{t+1}) as the step left it: 0 where the
    agent terminated, the value of the final observation where the episode was truncated
    (time limit), the next step's value otherwise. ``ended[t]`` (1 where the episode ended
    at step t, either way) stops the lambda-sum from reaching into the next episode:
    ``A_t = delta_t + gamma * lam * (1 - ended_t) * A_{t+1}``,
    ``delta_t = r_t + gamma * next_values_t - values_t``; returns are ``A + values``.
    """
    T = rewards.shape[0]
    adv = np.zeros_like(rewards, dtype=np.float64)
    last = np.zeros(rewards.shape[1:], np.float64)
    for t in range(T - 1, -1, -1):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        last = delta + gamma * lam * (1.0 - ended[t]) * last
        adv[t] = last
    adv = adv.astype(np.float32)
    return adv, (adv + values).astype(np.float32)


class ValueNorm:
    """Running mean and variance of the value targets (MAPPO's ValueNorm: debiased
    exponential moving averages, ``beta`` per update). The critic predicts normalised
    values; `denormalize` maps them back, `normalize` maps targets in."""

    def __init__(self, beta: float = 0.99999, eps: float = 1e-5) -> None:
        self.beta, self.eps = float(beta), float(eps)
        self.mean = 0.0
        self.mean_sq = 0.0
        self.debias = 0.0

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float64)
        self.mean = self.beta * self.mean + (1 - self.beta) * float(x.mean())
        self.mean_sq = self.beta * self.mean_sq + (1 - self.beta) * float((x**2).mean())
        self.debias = self.beta * self.debias + (1 - self.beta)

    def stats(self) -> tuple[float, float]:
        """``(mean, std)`` (0 and 1 before the first update)."""
        if self.debias <= 0:
            return 0.0, 1.0
        d = max(self.debias, self.eps)
        mean, mean_sq = self.mean / d, self.mean_sq / d
        return mean, float(np.sqrt(max(mean_sq - mean**2, 1e-2)))

    def normalize(self, x: np.ndarray) -> np.ndarray:
        mean, std = self.stats()
        return ((np.asarray(x) - mean) / std).astype(np.float32)

    def denormalize(self, x: np.ndarray) -> np.ndarray:
        mean, std = self.stats()
        return (np.asarray(x) * std + mean).astype(np.float32)

    def state(self) -> dict[str, Any]:
        return {"mean": self.mean, "mean_sq": self.mean_sq, "debias": self.debias}

    def load(self, state: dict[str, Any]) -> None:
        self.mean, self.mean_sq = float(state["mean"]), float(state["mean_sq"])
        self.debias = float(state["debias"])
