"""One update strategy per algorithm: how a step's games become gradient steps.

`UPDATES` maps each algorithm (``arena.algo``, and ``alphazero`` for the updates of
the search phase) to an `UpdateRule`: the training samples a step's games give
(`.ppo`'s GAE advantages, `.alphazero`'s search targets and outcomes) and the
gradient step on a minibatch of them. `apply_update` runs any of them the same way:
mirrored samples (``arena.augment_mirror``), then ``arena.update.epochs`` shuffled passes
in minibatches (A2C: one step on everything), or, for search updates with a replay buffer
(``arena.update.replay``), as many steps on minibatches drawn from the buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..games import GameSpec
from .alphazero import alphazero_step
from .config import SelfPlayConfig, UpdateConfig
from .ppo import a2c_step, average, gae_samples, minibatches, mirror_samples, ppo_step
from .replay import ReplayBuffer, average_duplicates
from .targets import outcome_samples

#: (a step's rollout (``records``, ``winner``, ``n``), the game, ``arena.update``, the
#: policy) -> training samples (arrays by name)
Samples = Callable[[dict[str, Any], GameSpec, UpdateConfig, Any], dict[str, np.ndarray]]
#: (policy, a minibatch of samples, ``arena.update``) -> the gradient step's metrics
Step = Callable[[Any, dict[str, np.ndarray], UpdateConfig], dict[str, float]]


@dataclass(frozen=True)
class UpdateRule:
    """One algorithm's update."""

    samples: Samples
    """The training samples of a step's games."""
    step: Step
    """One gradient step on a minibatch of them."""
    full_batch: bool = False
    """One gradient step on all the samples (A2C) instead of minibatch passes."""
    replays: bool = False
    """Off-policy: may train on the samples of earlier updates (``arena.update.replay``)."""


def _gae(
    rollout: dict[str, Any], spec: GameSpec, u: UpdateConfig, policy: Any
) -> dict[str, np.ndarray]:
    return gae_samples(
        rollout["records"], rollout["winner"], rollout["n"], spec.max_moves, u.gamma, u.gae_lambda
    )


def _outcomes(
    rollout: dict[str, Any], spec: GameSpec, u: UpdateConfig, policy: Any
) -> dict[str, np.ndarray]:
    return outcome_samples(
        rollout["records"], rollout["winner"], policy.value_discount, spec.max_moves
    )


#: the update of each algorithm
UPDATES: dict[str, UpdateRule] = {
    "ppo": UpdateRule(_gae, ppo_step),
    "a2c": UpdateRule(_gae, a2c_step, full_batch=True),
    "alphazero": UpdateRule(_outcomes, alphazero_step, replays=True),
}


def apply_update(
    algo: str,
    policy: Any,
    rollout: dict[str, Any],
    spec: GameSpec,
    cfg: SelfPlayConfig,
    rng: np.random.Generator,
    replay: ReplayBuffer | None = None,
) -> dict[str, float]:
    """Train ``policy`` on a step's games with ``algo``'s rule; the minibatch order comes
    from ``rng``. With ``replay`` (an off-policy rule only) the samples join the buffer
    and every minibatch is drawn from it. Returns the mean of each metric over the
    gradient steps."""
    rule, u = UPDATES[algo], cfg.update
    data = rule.samples(rollout, spec, u, policy)
    if cfg.augment_mirror:
        extra = mirror_samples(data, spec.obs_shape)
        data = {k: np.concatenate([v, extra[k]]) for k, v in data.items()}
    policy.train()
    n = len(data["obs"])
    if replay is not None and rule.replays:
        replay.add(data)
        steps = max(1, round(u.epochs * n / u.minibatch_size))
        batches = replay.minibatches(steps, u.minibatch_size, rng, u.average_duplicates)
        stats = [rule.step(policy, b, u) for b in batches]
        return {**average(stats), "replay_size": float(len(replay))}
    if u.average_duplicates and rule.replays:
        data = average_duplicates(data)
    epochs, size = (1, n) if rule.full_batch else (u.epochs, u.minibatch_size)
    stats = [
        rule.step(policy, {k: v[j] for k, v in data.items()}, u)
        for j in minibatches(n, epochs, size, rng)
    ]
    return average(stats)
