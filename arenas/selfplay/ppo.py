"""Policy-gradient updates for self-play: GAE over each seat's own moves, PPO or A2C.

The learner's moves come from `play_games` records
(``obs``, ``mask``, ``action``, ``logp``, ``value`` per move, with the ``ply`` and
``game`` they belong to); the reward is the game's outcome at each seat's last move.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import paddle

from ..games.evaluators import mirror_actions


def gae_samples(
    records: list[dict[str, np.ndarray]],
    winner: np.ndarray,
    n: int,
    max_moves: int,
    gamma: float,
    gae_lambda: float,
) -> dict[str, np.ndarray]:
    """Training samples with GAE advantages and returns (``obs, mask, action, logp, adv, ret``).

    ``gamma`` discounts per own move (a seat moves every second ply), so quicker wins
    are worth more.
    """
    T = max_moves
    value = np.zeros((T + 2, n), np.float32)
    has = np.zeros((T + 2, n), bool)
    for r in records:
        value[r["ply"], r["game"]] = r["value"]
        has[r["ply"], r["game"]] = True
    adv = np.zeros((T + 2, n), np.float32)
    for t in range(T - 1, -1, -1):
        if not has[t].any():
            continue
        seat = t % 2
        last = ~has[t + 2]  # this seat never moves again in that game
        outcome = np.where(winner < 0, 0.0, np.where(winner == seat, 1.0, -1.0))
        reward = np.where(last, outcome, 0.0)
        nxt = np.where(last, 0.0, value[t + 2])
        delta = reward + gamma * nxt - value[t]
        adv[t] = np.where(has[t], delta + np.where(last, 0.0, gamma * gae_lambda * adv[t + 2]), 0)
    ply = np.concatenate([r["ply"] for r in records])
    game = np.concatenate([r["game"] for r in records])
    a = adv[ply, game]
    return {
        "obs": np.concatenate([r["obs"] for r in records]),
        "mask": np.concatenate([r["mask"] for r in records]),
        "action": np.concatenate([r["action"] for r in records]),
        "logp": np.concatenate([r["logp"] for r in records]).astype(np.float32),
        "adv": a,
        "ret": a + value[ply, game],
    }


def mirror_samples(
    data: dict[str, np.ndarray], obs_shape: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """Left-right mirror images of training samples (both games are symmetric that way).

    Boards flip their columns; per-action arrays (``mask``, search targets ``pi``) and
    ``action`` follow the mirrored action numbering; everything else
    (advantages, returns, outcomes) carries over, since a mirrored position has the same
    value.

    For PPO the behaviour log-probability carries over too: a mirrored sample is what
    the mirrored behaviour policy would have collected, with the same probability, so
    ``pi(a'|s') / pi_old(a|s)`` is the proper importance weight (clipped as usual).
    Using the current policy's own ``pi(a'|s')`` instead would treat actions it would
    not take as on-policy, which biases the update (it broke tic-tac-toe training).
    """
    perm = mirror_actions(obs_shape[0], obs_shape[1], data["mask"].shape[1])
    out = dict(data)
    out["obs"] = np.ascontiguousarray(data["obs"][:, :, ::-1, :])
    out["mask"] = np.ascontiguousarray(data["mask"][:, perm])
    if "action" in data:
        out["action"] = perm[data["action"]]
    if "pi" in data:  # per-action targets
        out["pi"] = np.ascontiguousarray(data["pi"][:, perm])
    return out


def minibatches(n: int, epochs: int, size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Index arrays: ``epochs`` shuffled passes over ``n`` samples in minibatches of ``size``
    (one full batch when ``n < size``)."""
    size = min(size, n)
    for _ in range(epochs):
        order = rng.permutation(n)
        for i in range(0, n - size + 1 if n >= size else 1, size):
            yield order[i : i + size]


def average(stats: list[dict[str, float]]) -> dict[str, float]:
    """The mean of each metric over minibatches."""
    keys = stats[0].keys() if stats else ()
    return {k: float(np.mean([s[k] for s in stats])) for k in keys}


def ppo_step(policy: Any, b: dict[str, np.ndarray], u: Any) -> dict[str, float]:
    """One PPO gradient step on a minibatch (the clipped surrogate); its metrics.
    ``u`` is ``arena.update`` (`UpdateConfig`)."""
    return _policy_gradient_step(policy, b, u, clip=True)


def a2c_step(policy: Any, b: dict[str, np.ndarray], u: Any) -> dict[str, float]:
    """One A2C gradient step (the plain policy gradient) on all of a step's samples."""
    return _policy_gradient_step(policy, b, u, clip=False)


def _policy_gradient_step(
    policy: Any, b: dict[str, np.ndarray], u: Any, clip: bool
) -> dict[str, float]:
    adv = b["adv"]
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    logp, entropy, value = policy.evaluate_actions(b["obs"], b["mask"], b["action"])
    adv_t = policy.to_tensor(adv.astype(np.float32))
    ret_t = policy.to_tensor(b["ret"].astype(np.float32))
    if clip:
        ratio = (logp - policy.to_tensor(b["logp"])).exp()
        clipped = paddle.clip(ratio, 1 - u.clip_ratio, 1 + u.clip_ratio)
        pg_loss = -paddle.minimum(ratio * adv_t, clipped * adv_t).mean()
    else:
        ratio = None
        pg_loss = -(logp * adv_t).mean()
    v_loss = ((value - ret_t) ** 2).mean()
    ent = entropy.mean()
    loss = pg_loss + u.value_coef * v_loss - u.entropy_coef * ent
    policy.update(loss)
    out = {
        "loss": float(loss),
        "policy_loss": float(pg_loss),
        "value_loss": float(v_loss),
        "entropy": float(ent),
    }
    if ratio is not None:
        r = ratio.numpy()
        out["clip_frac"] = float((np.abs(r - 1) > u.clip_ratio).mean())
        out["approx_kl"] = float(np.mean((r - 1) - np.log(r)))
    return out
