"""One rollout of every environment copy with each group's policy: arrays by group."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from paddlecraft.agents.group_policy import GroupPolicy

from .gae import ValueNorm
from .vector import BatchedEnv


def critic_inputs(obs: Mapping[str, np.ndarray], group: str, central: bool) -> np.ndarray:
    """The critic's input of every agent of ``group``: ``[N, Ag, critic_input]``.

    Central (MAPPO): every agent's observation flattened and concatenated, then the agent's
    one-hot index in its group; otherwise (IPPO) its own observation flattened.
    """
    mine = obs[group]
    n, ag = mine.shape[:2]
    if not central:
        return mine.reshape(n, ag, -1)
    state = BatchedEnv.state(obs)  # [N, S]
    eye = np.broadcast_to(np.eye(ag, dtype=np.float32), (n, ag, ag))
    return np.concatenate([np.broadcast_to(state[:, None], (n, ag, state.shape[1])), eye], -1)


def critic_size(venv: BatchedEnv, group: str, central: bool) -> int:
    """The length of `critic_inputs` for ``group``."""
    if central:
        return venv.state_dim + len(venv.groups[group])
    return int(np.prod(venv.obs_shape[group]))


def collect(
    venv: BatchedEnv,
    policies: Mapping[str, GroupPolicy],
    norms: Mapping[str, ValueNorm],
    steps: int,
    rng: np.random.Generator,
    seeds: Callable[[], int],
    central: bool,
    greedy: bool = False,
    check: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """``steps`` steps of every copy from fresh episodes (seeded by ``seeds()``, one per
    episode started). Returns per group ``obs [T, N, Ag, *obs]``, ``critic [T, N, Ag, C]``,
    ``actions``, ``logp``, ``values`` (normalised, as the critic said), ``rewards``,
    ``alive``, ``next_values`` (denormalised; 0 where the agent terminated), and ``ended
    [T, N]``, plus ``episode_returns``: ``{group: [summed return of each finished
    episode]}`` and ``episodes`` (finished episodes)."""
    obs = venv.reset([seeds() for _ in range(venv.num_envs)])
    n, groups = venv.num_envs, list(venv.groups)
    buf: dict[str, dict[str, list]] = {g: {} for g in groups}
    running = {g: np.zeros(n, np.float64) for g in groups}
    finished: dict[str, list[float]] = {g: [] for g in groups}
    ended_all = []

    def values_of(o: Mapping[str, np.ndarray], g: str) -> tuple[np.ndarray, np.ndarray]:
        c = critic_inputs(o, g, central)
        ag = c.shape[1]
        v = policies[g].value(c.reshape(n * ag, -1)).numpy().reshape(n, ag)  # normalised
        return c, v

    for _ in range(steps):
        check()
        actions = {}
        for g in groups:
            o = obs[g]
            ag = o.shape[1]
            act, logp = policies[g].sample(o.reshape(n * ag, *o.shape[2:]), rng, greedy)
            actions[g] = act.reshape(n, ag, *act.shape[1:])
            c, v = values_of(obs, g)
            b = buf[g]
            for key, val in (("obs", o), ("critic", c), ("actions", actions[g]),
                             ("logp", logp.reshape(n, ag)), ("values", v)):  # fmt: skip
                b.setdefault(key, []).append(val)
        out = venv.step(actions)
        ended = out["ended"]
        nxt = out["obs"]
        for g in groups:
            _, v_next = values_of(nxt, g)  # the next (or the final) observation's value
            v_next = norms[g].denormalize(v_next) * (1.0 - out["terminated"][g])
            b = buf[g]
            b.setdefault("rewards", []).append(out["rewards"][g])
            b.setdefault("alive", []).append(out["alive"][g])
            b.setdefault("next_values", []).append(v_next.astype(np.float32))
            running[g] += out["rewards"][g].sum(1)
        for i in np.flatnonzero(ended):
            for g in groups:
                finished[g].append(float(running[g][i]))
                running[g][i] = 0.0
            venv.reset_one(int(i), seeds())
        ended_all.append(ended.astype(np.float32))
        obs = venv.observations()
    result: dict[str, Any] = {g: {k: np.stack(v) for k, v in buf[g].items()} for g in groups}
    result["ended"] = np.stack(ended_all)  # [T, N]
    result["episode_returns"] = finished
    result["episodes"] = len(finished[groups[0]])
    return result
