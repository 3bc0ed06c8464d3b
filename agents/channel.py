"""Discrete channels: Gumbel-softmax with a hand-written straight-through estimator, and
REINFORCE sampling with a running-mean baseline.

Why hand-written: in Paddle 3.3.1 ``F.gumbel_softmax(x, hard=True)`` passes a ZERO gradient to
``x`` (a referential game built on it stalls), so the straight-through estimator here is ``y_hard - y_soft.detach() + y_soft``: the forward value is the one-hot
sample, the gradient is exactly the soft sample's.
"""

from __future__ import annotations

from dataclasses import dataclass

import paddle
import paddle.nn.functional as F

__all__ = [
    "RunningBaseline",
    "categorical_sample",
    "gumbel_softmax_st",
    "gumbel_symbols",
    "temperature_at",
]


def gumbel_softmax_st(
    logits: paddle.Tensor, temperature: float, hard: bool = True, noise: bool = True
) -> paddle.Tensor:
    """A (straight-through) Gumbel-softmax sample of ``logits`` [B, V] -> [B, V].

    ``noise=False`` drops the Gumbel noise (greedy evaluation: the one-hot argmax).
    ``hard=False`` returns the relaxed sample itself.
    """
    if not hard:
        return F.softmax(_relaxed_logits(logits, temperature, noise), axis=-1)
    return gumbel_symbols(logits, temperature, noise)[0]


def gumbel_symbols(
    logits: paddle.Tensor, temperature: float, noise: bool = True
) -> tuple[paddle.Tensor, paddle.Tensor]:
    """The straight-through sample of `gumbel_softmax_st` [..., V] and its symbols,
    int64 [...] (the argmax it already took: no second pass over the sample)."""
    y_soft = F.softmax(_relaxed_logits(logits, temperature, noise), axis=-1)  # [..., V]
    symbols = y_soft.argmax(-1)  # [...]
    y_hard = F.one_hot(symbols, y_soft.shape[-1])  # [..., V]
    if y_hard.dtype != y_soft.dtype:
        y_hard = y_hard.astype(y_soft.dtype)
    return y_hard - y_soft.detach() + y_soft, symbols


def _relaxed_logits(logits: paddle.Tensor, temperature: float, noise: bool) -> paddle.Tensor:
    """``(logits + Gumbel(0, 1) noise) / temperature``.

    Every op here is one eager dispatch per step of a small game (a tenth of its time in
    the default referential game), so none is spent on an identity: x - y is bit for bit
    x + (-y), x / 1.0 is x, and in float32/float64 -log(u) of u <= 1 - 1e-7 is >= 1e-7, so
    clipping it at 1e-10 (kept for half precision, where 1 - 1e-7 rounds to 1) never binds.
    """
    if noise:
        u = paddle.rand(logits.shape, dtype=logits.dtype).clip(1e-10, 1.0 - 1e-7)
        e = -paddle.log(u)  # Exponential(1), > 0
        if logits.dtype not in (paddle.float32, paddle.float64):
            e = e.clip(min=1e-10)
        logits = logits - paddle.log(e)  # + Gumbel(0, 1) noise
    if temperature != 1.0:
        logits = logits / temperature
    return logits


def categorical_sample(
    logits: paddle.Tensor, greedy: bool = False
) -> tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor]:
    """Sample symbols from ``logits`` [B, V]: (symbols int64 [B], log-prob [B], entropy [B]).

    Log-probabilities and entropy come from ``log_softmax`` (``paddle.distribution.Categorical``
    normalises by the sum, not by softmax). ``greedy`` takes the argmax instead.
    """
    logp = F.log_softmax(logits, axis=-1)  # [B, V]
    probs = logp.exp()
    if greedy:
        sym = logits.argmax(-1)
    else:
        sym = paddle.multinomial(probs.detach(), 1).squeeze(-1)  # [B]
    picked = paddle.take_along_axis(logp, sym.unsqueeze(-1), axis=-1).squeeze(-1)  # [B]
    ent = -(probs * logp).sum(-1)  # [B]
    return sym, picked, ent


def temperature_at(step: int, start: float, end: float, decay_steps: int) -> float:
    """Gumbel temperature at ``step``: geometric from ``start`` to ``end`` over ``decay_steps``
    (constant ``start`` when ``decay_steps`` is 0)."""
    if decay_steps <= 0:
        return float(start)
    frac = min(1.0, step / decay_steps)
    return float(start * (end / start) ** frac)


@dataclass
class RunningBaseline:
    """The mean reward seen so far (REINFORCE's variance-reducing baseline), checkpointable.

    ``advantage = reward - baseline.value``; then `update` with the batch mean.
    """

    value: float = 0.0
    count: int = 0

    def update(self, batch_mean: float) -> None:
        """Fold one batch's mean reward into the running mean."""
        self.count += 1
        self.value += (float(batch_mean) - self.value) / self.count

    def state(self) -> dict:
        """JSON-able state (floats round-trip exactly through JSON)."""
        return {"value": self.value, "count": self.count}

    def load(self, state: dict) -> None:
        """Restore `state`."""
        self.value, self.count = float(state["value"]), int(state["count"])
