"""A trained group's policy outside the toolkit: raw PettingZoo observations in, actions out.

from paddlecraft.arenas.marl import load_policy
policy = load_policy("runs/marl/<time>", "agent")
obs, _ = env.reset(seed=0)
while env.agents:
    obs, rewards, terms, truncs, infos = env.step(policy.act(obs) | other_groups_actions)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents import Agent
from paddlecraft.agents.group_policy import GroupPolicy
from paddlecraft.agents.settings import ConfigError

from ..engine.checkpoint import latest_good_checkpoint


class DeployedPolicy:
    """A group's `GroupPolicy` acting for every agent of its group it is given.

    ``act(obs)`` takes a PettingZoo observation dict (``{agent: array}``, any agents; those
    not in the group are ignored) and returns ``{agent: action}`` for the group's agents in
    it: an ``int`` (Discrete) or a float32 array clipped into the Box bounds. Greedy by
    default (the most likely action, the Gaussian's mean); ``greedy=False`` samples from
    a generator seeded with ``seed``.
    """

    def __init__(self, policy: GroupPolicy, greedy: bool = True, seed: int = 0) -> None:
        self.policy = policy
        self.members = list(policy.cfg.members or [])
        self.greedy = greedy
        self.rng = np.random.default_rng(seed)

    @property
    def group(self) -> str:
        return self.policy.name

    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        agents = [a for a in obs if a in self.members] if self.members else list(obs)
        if not agents:
            return {}
        batch = np.stack([np.asarray(obs[a], np.float32) for a in agents])  # [B, *obs_shape]
        act, _ = self.policy.sample(batch, self.rng, greedy=self.greedy)
        if self.policy.continuous:
            act = np.clip(act, self.policy.cfg.action_low, self.policy.cfg.action_high)
            return {a: act[i].astype(np.float32) for i, a in enumerate(agents)}
        return {a: int(act[i]) for i, a in enumerate(agents)}


def load_policy(
    run_dir: str | os.PathLike, group: str, *, greedy: bool = True, seed: int = 0,
    device: str | None = None,
) -> DeployedPolicy:  # fmt: skip
    """The trained policy of ``group`` from a MARL run folder (its newest verified
    checkpoint), or from a folder `Agent.save` wrote; see `DeployedPolicy`."""
    path = Path(run_dir)
    if not (path / "agent.json").is_file():
        found = latest_good_checkpoint(path)
        if found is None:
            raise ConfigError(f"{run_dir}: no verified checkpoint (and no agent.json) there")
        groups = sorted(p.name for p in (found[0] / "agents").iterdir() if p.is_dir())
        if group not in groups:
            raise ConfigError(f"group {group!r}: the run's groups are {groups}")
        path = found[0] / "agents" / group
    policy = Agent.load(path, device=device)
    if not isinstance(policy, GroupPolicy):
        raise ConfigError(f"{path} holds a {type(policy).__name__}, not a marl GroupPolicy")
    return DeployedPolicy(policy, greedy=greedy, seed=seed)
