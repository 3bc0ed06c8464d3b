"""One update strategy per algorithm: how a step's games become gradient steps.

`UPDATES` maps each algorithm (``arena.algo``, and ``alphazero`` for the updates of
the search phase) to an `UpdateRule`: the training samples a step's games give
(`.ppo`'s GAE advantages, `.alphazero`'s search targets and outcomes) and the
gradient step on a minibatch of them. `apply_update` runs any of them the same way:
search samples written out by their surprise (``arena.update.surprise_weight``, `.surprise`),
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
from .surprise import repeat_by_frequency, surprise_frequency
from .targets import (
    full_search_rows,
    moves_left_targets,
    opponent_policy_targets,
    outcome_samples,
    ownership_targets,
)

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
    data = outcome_samples(
        rollout["records"], rollout["winner"], policy.value_discount, u.root_value_weight,
        proven_values=u.proven_values, explored_values=u.explored_values,
        draw_score=policy.draw_score, max_moves=spec.max_moves,
    )  # fmt: skip
    if policy.moves_left:  # the moves-left head's targets (default: no such samples)
        data["moves_left"] = moves_left_targets(
            rollout["records"], rollout["winner"], spec.max_moves
        )
    if getattr(policy, "opponent_policy", False):  # the replies, fast searches' included
        data["opponent_pi"] = opponent_policy_targets(rollout["records"])
    if getattr(policy, "ownership", False):  # each cell's holder at the game's end
        data["ownership"] = ownership_targets(rollout["records"], spec.rules)
    keep = full_search_rows(rollout["records"])
    if u.surprise_weight > 0:  # each sample's frequency (`apply_update` writes it out)
        data["frequency"] = surprise_frequency(rollout["records"], u.surprise_weight, keep)
    if keep is not None:  # playout cap randomisation: the full searches' samples only
        data = {k: v[keep] for k, v in data.items()}
    return data


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
    frequency = data.pop("frequency", None)
    if frequency is not None:  # policy surprise weighting: surprising samples more often
        data = repeat_by_frequency(data, frequency, rng)
    if cfg.augment_mirror:
        extra = mirror_samples(data, spec.obs_shape)
        data = {k: np.concatenate([v, extra[k]]) for k, v in data.items()}
    policy.train()
    n = len(data["obs"])
    if replay is not None and rule.replays:
        replay.add(data)
        if not len(replay):  # nothing to train on yet: every move so far a fast search
            return {"replay_size": 0.0}
        steps = max(1, round(u.epochs * n / u.minibatch_size))
        batches = replay.minibatches(steps, u.minibatch_size, rng, u.average_duplicates)
        stats = [rule.step(policy, b, u) for b in batches]
        return {**average(stats), "replay_size": float(len(replay))}
    if n == 0:  # no samples (playout cap randomisation: every move a fast search)
        return {}
    if u.average_duplicates and rule.replays:
        data = average_duplicates(data)
    epochs, size = (1, n) if rule.full_batch else (u.epochs, u.minibatch_size)
    stats = [
        rule.step(policy, {k: v[j] for k, v in data.items()}, u)
        for j in minibatches(n, epochs, size, rng)
    ]
    return average(stats)
