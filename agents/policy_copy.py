"""A `Policy`'s network as a NumPy copy of its weights, for searches that run while the
weights stay as they are (`Policy.frozen_evaluator`): the same priors, values and plies
left as its Paddle forward, to float32 rounding, in less time.

Functions of a policy's layers; `Policy` calls them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .value_head import expected_value_numpy

__all__ = ["numpy_evaluator"]


def _weights(layer: Any) -> tuple[np.ndarray, np.ndarray]:
    """A linear layer's ``(weight [in, out], bias [out])`` as NumPy copies."""
    return np.array(layer.weight.numpy()), np.array(layer.bias.numpy())


def numpy_evaluator(
    policy: Any,
    trunk: Callable[[np.ndarray], np.ndarray],
    channels_first: bool,
    mask_penalty: float,
) -> Callable[[Any, Any], tuple[np.ndarray, ...]]:
    """``policy``'s search evaluator over ``trunk`` (its encoder's ``numpy_forward``: the
    encoder's input, ``[B, planes, rows, cols]`` if ``channels_first`` else flattened ->
    features ``[B, F]``) and copies of its heads: ``(priors float64 [B, A], values float64
    [B])``, and the plies left ``float64 [B]`` with the moves-left head. Illegal moves'
    logits get ``- mask_penalty``, as in `Policy.masked_log_probs`."""
    pw, pb = _weights(policy.policy_head)
    vw, vb = _weights(policy.value_head)
    hidden = _weights(policy.value_hidden) if policy.value_hidden_size else None
    plies_head = _weights(policy.moves_left_head) if policy.moves_left else None
    max_plies, first = float(policy.max_plies), channels_first
    bins, penalty = policy.value_bins, np.float32(mask_penalty)

    def evaluate(observations: Any, action_masks: Any) -> tuple[np.ndarray, ...]:
        masks = np.asarray(action_masks, bool)  # [B, A]
        x = np.asarray(observations, np.float32)  # [B, rows, cols, planes]; `_prepare`'s
        h = trunk(x.transpose(0, 3, 1, 2) if first else x.reshape(len(x), -1))  # [B, F]
        logits = h @ pw + pb + (masks.astype(np.float32) - 1.0) * penalty
        z = logits - logits.max(axis=1, keepdims=True)  # log_softmax, as in Paddle's
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))  # [B, A] float32
        out = [np.where(masks, np.exp(logp.astype(np.float64)), 0.0)]
        hv = h if hidden is None else np.maximum(h @ hidden[0] + hidden[1], 0.0)  # [B, H or F]
        v = expected_value_numpy(hv @ vw + vb) if bins else np.tanh(hv @ vw + vb)[:, 0]
        out.append(v.astype(np.float64))  # [B]
        if plies_head is not None:
            plies = 1.0 / (1.0 + np.exp(-(h @ plies_head[0] + plies_head[1])[:, 0]))  # [B]
            out.append(plies.astype(np.float64) * max_plies)
        return tuple(out)

    return evaluate
