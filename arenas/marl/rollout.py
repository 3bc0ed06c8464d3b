"""One rollout of every environment copy with each group's policy: arrays by group.

Every random draw of copy ``i`` (its episodes' seeds, its agents' actions) comes from that
copy's own streams, ``default_rng([*key, i])`` (`copy_streams`): a copy's rollout is the
same whether this process steps all copies or a worker steps a slice of them
(``arena.workers``), and `merge_rollouts` puts the slices back in copy order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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


def copy_streams(key: Sequence[int], copies: Iterable[int]) -> list[np.random.Generator]:
    """One stream per environment copy: ``default_rng([*key, i])`` for each ``i``."""
    return [np.random.default_rng([*key, int(i)]) for i in copies]


class CopyStreams:
    """The one generator `GroupPolicy.sample` draws from, made of one stream per copy.

    A draw's leading axis holds ``N * Ag`` rows, copy-major (``[N, Ag] -> [N * Ag]``): copy
    ``i``'s ``Ag`` rows come from ``rngs[i]``, so they do not depend on the other copies.
    Only the draws `GroupPolicy.sample` makes (``random``, ``standard_normal``) exist.
    """

    def __init__(self, rngs: Sequence[np.random.Generator]) -> None:
        self.rngs = list(rngs)

    def _split(self, size: int | Sequence[int], draw: Callable[..., np.ndarray]) -> np.ndarray:
        shape = (int(size),) if np.isscalar(size) else tuple(int(s) for s in size)
        n = len(self.rngs)
        if shape[0] % n:
            raise ValueError(f"a draw of {shape[0]} rows does not split over {n} copies")
        rows = (shape[0] // n, *shape[1:])
        return np.concatenate([draw(rng, rows) for rng in self.rngs])

    def random(self, size: int | Sequence[int]) -> np.ndarray:
        return self._split(size, lambda rng, s: rng.random(s))

    def standard_normal(self, size: int | Sequence[int]) -> np.ndarray:
        return self._split(size, lambda rng, s: rng.standard_normal(s))


def collect(
    venv: BatchedEnv,
    policies: Mapping[str, GroupPolicy],
    norms: Mapping[str, ValueNorm],
    steps: int,
    act_rngs: Sequence[np.random.Generator],
    env_rngs: Sequence[np.random.Generator],
    central: bool,
    greedy: bool = False,
    check: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """``steps`` steps of every copy from fresh episodes; copy ``i`` draws its actions from
    ``act_rngs[i]`` and one seed per episode it starts from ``env_rngs[i]``. Returns per group ``obs [T, N, Ag, *obs]``, ``critic [T, N, Ag, C]``,
    ``actions``, ``logp``, ``values`` (normalised, as the critic said), ``rewards``,
    ``alive``, ``next_values`` (denormalised; 0 where the agent terminated), and ``ended
    [T, N]``, plus ``episode_returns``: ``{group: [summed return of each finished
    episode]}``, ``episode_ends [E, 2]`` (each finished episode's step and copy, in the
    order of ``episode_returns``) and ``episodes`` (finished episodes)."""
    rng = CopyStreams(act_rngs)

    def seed_of(i: int) -> int:
        return int(env_rngs[i].integers(2**31 - 1))

    obs = venv.reset([seed_of(i) for i in range(venv.num_envs)])
    n, groups = venv.num_envs, list(venv.groups)
    buf: dict[str, dict[str, list]] = {g: {} for g in groups}
    running = {g: np.zeros(n, np.float64) for g in groups}
    finished: dict[str, list[float]] = {g: [] for g in groups}
    ended_all, ends = [], []

    def values_of(o: Mapping[str, np.ndarray], g: str) -> tuple[np.ndarray, np.ndarray]:
        c = critic_inputs(o, g, central)
        ag = c.shape[1]
        v = policies[g].value(c.reshape(n * ag, -1)).numpy().reshape(n, ag)  # normalised
        return c, v

    for t in range(steps):
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
            ends.append((t, int(i)))
            venv.reset_one(int(i), seed_of(int(i)))
        ended_all.append(ended.astype(np.float32))
        obs = venv.observations()
    result: dict[str, Any] = {g: {k: np.stack(v) for k, v in buf[g].items()} for g in groups}
    result["ended"] = np.stack(ended_all)  # [T, N]
    result["episode_returns"] = finished
    result["episode_ends"] = np.array(ends, np.int64).reshape(-1, 2)
    result["episodes"] = len(finished[groups[0]])
    return result


def merge_rollouts(parts: Sequence[Mapping[str, Any]], starts: Sequence[int]) -> dict[str, Any]:
    """The rollout of all copies from `collect`'s results on consecutive slices of them,
    slice ``k`` starting at copy ``starts[k]``: arrays joined along the copy axis,
    finished episodes ordered by step, then copy (as one `collect` orders them)."""
    groups = list(parts[0]["episode_returns"])
    out: dict[str, Any] = {
        g: {k: np.concatenate([p[g][k] for p in parts], axis=1) for k in parts[0][g]}
        for g in groups
    }  # [T, N, ...]
    out["ended"] = np.concatenate([p["ended"] for p in parts], axis=1)  # [T, N]
    ends = np.concatenate(
        [p["episode_ends"] + np.array([0, lo]) for p, lo in zip(parts, starts, strict=True)]
    )  # [E, 2]: (step, copy)
    order = np.lexsort((ends[:, 1], ends[:, 0]))
    returns = {g: [r for p in parts for r in p["episode_returns"][g]] for g in groups}
    out["episode_returns"] = {g: [v[j] for j in order] for g, v in returns.items()}
    out["episode_ends"] = ends[order]
    out["episodes"] = len(order)
    return out
