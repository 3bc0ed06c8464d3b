"""The policy's value head as a classifier (``agents.policy.value_bins``): HL-Gauss.

Farebrother et al. 2024 ("Stop Regressing: Training Value Functions via Classification
for Scalable Deep RL") replace the value's regression with a cross-entropy: the head
gives ``K`` logits over bins spread evenly on the value's range, the value is the mean of
their softmax, and each target ``z`` becomes a histogram, a Gaussian of width ``sigma``
bins centred on ``z``, integrated over each bin and renormalised over the range
(``hl_gauss_targets``). MuZero and KataGo learn their values as distributions too. The
scalar the search reads is the same kind of number as a tanh head's, an expected outcome
in [-1, 1]: searches, caches, exports and the NumPy copy of the network only take the
softmax's mean (`expected_value`, `expected_value_numpy`).

Functions of data; `Policy` and the AlphaZero update call them.
"""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F

__all__ = [
    "expected_value",
    "expected_value_numpy",
    "hl_gauss_targets",
    "support",
]


def support(bins: int) -> np.ndarray:
    """The bins' centres, float32 ``[bins]``: evenly from -1 to 1, both ends included."""
    return np.linspace(-1.0, 1.0, bins, dtype=np.float32)


def expected_value(logits: paddle.Tensor) -> paddle.Tensor:
    """The value, the softmax's mean over the centres: ``[B, K]`` logits -> ``[B]``."""
    p = F.softmax(logits.astype("float32"), axis=-1)  # [B, K]
    centres = paddle.linspace(-1.0, 1.0, logits.shape[-1], dtype="float32")  # [K]
    return (p * centres).sum(-1)  # [B]


def expected_value_numpy(logits: np.ndarray) -> np.ndarray:
    """`expected_value` in NumPy, float32 as Paddle's: ``[B, K]`` -> ``[B]``."""
    z = logits.astype(np.float32) - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=-1, keepdims=True)  # [B, K]
    return (p * support(logits.shape[-1])).sum(-1)  # [B]


def hl_gauss_targets(z: paddle.Tensor, bins: int, sigma: float) -> paddle.Tensor:
    """HL-Gauss histograms ``[B, bins]`` of the targets ``z`` ``[B]`` (in [-1, 1]): a
    normal of standard deviation ``sigma`` bin widths around each target, its mass over
    each bin (edges halfway between centres, the outer ones half a width past -1 and 1),
    renormalised to sum to 1 over the bins."""
    width = 2.0 / (bins - 1)
    edges = paddle.linspace(-1.0 - width / 2, 1.0 + width / 2, bins + 1, dtype="float32")
    scale = float(sigma) * width * float(np.sqrt(2.0))
    cdf = paddle.erf((edges[None, :] - z.astype("float32")[:, None]) / scale)  # [B, K + 1]
    mass = cdf[:, 1:] - cdf[:, :-1]  # [B, K] (twice the probability: the 1/2 cancels)
    return mass / (cdf[:, -1:] - cdf[:, :1])
