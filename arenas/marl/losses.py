"""The PPO losses of one group's minibatch (clipped surrogate, value, entropy)."""

from __future__ import annotations

from dataclasses import dataclass

import paddle


@dataclass
class PPOTerms:
    """The loss terms of one minibatch (0-d tensors)."""

    total: paddle.Tensor  #: policy + value_coef * value - entropy_coef * entropy
    policy: paddle.Tensor  #: -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
    value: paddle.Tensor  #: 0.5 * mean((V - R)^2), the clipped form's max with value_clip
    entropy: paddle.Tensor  #: mean entropy of the action distribution
    clip_fraction: paddle.Tensor  #: share of samples whose ratio left [1 - eps, 1 + eps]


def ppo_terms(
    logp: paddle.Tensor,
    old_logp: paddle.Tensor,
    advantages: paddle.Tensor,
    values: paddle.Tensor,
    old_values: paddle.Tensor,
    returns: paddle.Tensor,
    entropy: paddle.Tensor,
    clip: float,
    value_clip: float,
    value_coef: float,
    entropy_coef: float,
) -> PPOTerms:
    """PPO's terms (Schulman et al. 2017; MAPPO's value clipping, Yu et al. 2022); all ``[B]``.

    ``values``/``old_values``/``returns`` are on the critic's (normalised) scale;
    ``value_clip`` > 0 clips the new value to ``old_values +- value_clip`` and takes the
    larger of the two squared errors, 0 leaves it unclipped.
    """
    ratio = paddle.exp(logp - old_logp)
    surr = paddle.minimum(ratio * advantages, paddle.clip(ratio, 1 - clip, 1 + clip) * advantages)
    policy = -surr.mean()
    err = (values - returns) ** 2
    if value_clip > 0:
        clipped = old_values + paddle.clip(values - old_values, -value_clip, value_clip)
        err = paddle.maximum(err, (clipped - returns) ** 2)
    value = 0.5 * err.mean()
    ent = entropy.mean()
    total = policy + value_coef * value - entropy_coef * ent
    frac = ((ratio - 1).abs() > clip).astype("float32").mean()
    return PPOTerms(total, policy, value, ent, frac)
