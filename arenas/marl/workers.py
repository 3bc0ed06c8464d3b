"""arena=marl's rollouts on Ray workers: ``arena.workers.count=k`` splits the copies.

    python run.py arena=marl env=simple_spread arena.workers.count=2

The lead process keeps the policies, the value normalisers and the PPO update; worker
``w`` (a Ray actor, `RolloutWorker`) holds copies ``[lo, hi)`` of the environment (its
own `BatchedEnv` slice) and a copy of each group's policy. Every update the lead sends
each group's weights and value-normaliser state (once into Ray's object store), each
worker rolls its slice and returns `collect`'s arrays, and `merge_rollouts` joins them
in copy order. A copy draws from its own streams (`copy_streams`), so a copy's rollout
is the same on a worker as in the lead process. Starting Ray, restarting a dead worker
(its slice replayed), and a stop or pause while the workers roll are
`paddlecraft.arenas.engine.ray_pool.RayPool`'s, shared with arena=selfplay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import paddle

from paddlecraft.agents.group_policy import GroupPolicy

from ..engine.interrupt import StepInterrupted
from ..engine.ray_pool import RayPool, RayWorker, weights_of
from .envs import make_env
from .gae import ValueNorm
from .rollout import collect, copy_streams, merge_rollouts
from .vector import BatchedEnv

#: what builds a worker's environments: ``(env.name, env.kwargs, env.cls)`` of `make_env`
EnvSpec = tuple[Any, dict, Any]


def load_weights(layer: Any, weights: Mapping[str, np.ndarray]) -> None:
    """Set ``layer``'s tensors to ``weights`` (the same structured keys, all of them)."""
    own = layer.state_dict()
    if own.keys() != weights.keys():
        raise ValueError(f"weights for {sorted(weights)[:3]}... do not fit {sorted(own)[:3]}...")
    with paddle.no_grad():
        for k, t in own.items():
            t.set_value(weights[k])


def slice_bounds(num_envs: int, workers: int) -> list[int]:
    """Where each worker's copies start, then ``num_envs``: worker ``w`` steps copies
    ``[bounds[w], bounds[w + 1])`` (contiguous, sizes differing by at most one)."""
    return [int(b) for b in np.linspace(0, num_envs, workers + 1).astype(int)]


class RolloutWorker(RayWorker):
    """One worker's slice: copies ``[lo, hi)`` of the environment and a policy per group.

    Args:
        env: `EnvSpec` of the run's environment.
        groups: ``{group: [agent names]}``.
        policies: ``{group: (GroupPolicy config, allowed encoder targets)}`` (built sizes).
        central: MAPPO's centralised critic inputs.
        copies: ``(lo, hi)``.
        name: scope prefix of this worker's policy copies.
    """

    def __init__(
        self,
        env: EnvSpec,
        groups: Mapping[str, Sequence[str]],
        policies: Mapping[str, tuple[dict, tuple[str, ...]]],
        central: bool,
        copies: tuple[int, int],
        name: str,
    ) -> None:
        self.lo, self.hi = int(copies[0]), int(copies[1])
        self.venv = BatchedEnv(lambda: make_env(*env), self.hi - self.lo, groups)
        self.policies = {
            g: GroupPolicy(
                f"{name}_{g}", allow_targets=targets, **{**config, "seed": 0, "device": "cpu"}
            )
            for g, (config, targets) in policies.items()
        }
        for pol in self.policies.values():
            pol.eval()
        self.norms = {g: ValueNorm() for g in groups}
        self.central = central

    def rollout(
        self, task: Mapping[str, Any], check: Callable[[], None] | None = None
    ) -> dict[str, Any] | None:
        """`collect` on this slice with ``task``'s ``weights`` and ``norms`` (by group),
        ``steps`` and the stream keys ``act_key`` / ``env_key``. ``check`` (default: Ray's
        cancellation flag) is called before every step; a cancelled slice returns None."""
        for g, pol in self.policies.items():
            load_weights(pol, task["weights"][g])
            self.norms[g].load(task["norms"][g])
        copies = range(self.lo, self.hi)
        try:
            return collect(
                self.venv, self.policies, self.norms, int(task["steps"]),
                copy_streams(task["act_key"], copies), copy_streams(task["env_key"], copies),
                self.central, check=check or self.check,
            )  # fmt: skip
        except StepInterrupted:
            return None

    def close(self) -> None:
        self.venv.close()


def rollout_task(
    policies: Mapping[str, GroupPolicy],
    norms: Mapping[str, ValueNorm],
    steps: int,
    act_key: Sequence[int],
    env_key: Sequence[int],
) -> dict[str, Any]:
    """What every worker receives for one update (plain arrays and numbers)."""
    return {
        "weights": {g: weights_of(p) for g, p in policies.items()},
        "norms": {g: n.state() for g, n in norms.items()},
        "steps": int(steps),
        "act_key": [int(k) for k in act_key],
        "env_key": [int(k) for k in env_key],
    }


class RolloutPool(RayPool):
    """``workers`` `RolloutWorker` actors over ``num_envs`` copies (`slice_bounds`).

    Args:
        workers: actors (1 <= workers <= num_envs).
        num_envs: copies of the run.
        env, groups, central: as `RolloutWorker`'s.
        policies: the lead's policies (their configs build the workers' copies).
        name: scope prefix of the workers' policy copies.
        threads_per_worker, address, check: as `RayPool`'s.
    """

    def __init__(
        self,
        workers: int,
        num_envs: int,
        env: EnvSpec,
        groups: Mapping[str, Sequence[str]],
        policies: Mapping[str, GroupPolicy],
        central: bool,
        name: str = "marl_worker",
        threads_per_worker: int = 1,
        address: str | None = None,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.bounds = slice_bounds(num_envs, workers)
        configs = {g: (dict(p.config), tuple(p.allow_targets)) for g, p in policies.items()}
        plain = {g: list(m) for g, m in groups.items()}
        bounds = self.bounds
        super().__init__(
            workers,
            RolloutWorker,
            lambda w: (env, plain, configs, central, (bounds[w], bounds[w + 1]), f"{name}{w}"),
            label="marl rollout worker",
            threads_per_worker=threads_per_worker,
            address=address,
            check=check,
        )

    def collect(self, task: Mapping[str, Any], check: Callable[[], None] | None = None) -> dict:
        """Every worker's slice of one update's rollout (`rollout_task`), merged in copy
        order; ``check`` (the arena's ``check_interrupt``) is polled while waiting."""
        ref = self.ray.put(dict(task))  # the weights go once per node, not per worker
        parts = self._call(lambda w: self.actors[w].rollout.remote(ref), range(self.workers), check)
        return merge_rollouts(parts, self.bounds[:-1])
