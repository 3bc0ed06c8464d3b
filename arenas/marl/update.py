"""One group's PPO update on its rollout: GAE, normalisation, epochs of minibatches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from paddlecraft.agents.group_policy import GroupPolicy

from .config import MarlConfig
from .gae import ValueNorm, gae
from .losses import ppo_terms


def advantages(
    d: Mapping[str, np.ndarray], ended: np.ndarray, norm: ValueNorm, cfg: MarlConfig
) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, returns)`` ``[T, N, Ag]`` (returns on the environment's scale) of one
    group's rollout ``d`` (`paddlecraft.arenas.marl.rollout.collect`)."""
    t, n, ag = d["rewards"].shape
    values = norm.denormalize(d["values"])  # the critic predicts normalised values
    ends = np.broadcast_to(ended[:, :, None], (t, n, ag)).reshape(t, n * ag)
    adv, ret = gae(
        d["rewards"].reshape(t, n * ag), values.reshape(t, n * ag),
        d["next_values"].reshape(t, n * ag), ends, cfg.gamma, cfg.gae_lambda,
    )  # fmt: skip
    return adv.reshape(t, n, ag), ret.reshape(t, n, ag)


def update_group(
    pol: GroupPolicy,
    norm: ValueNorm,
    d: Mapping[str, np.ndarray],
    ended: np.ndarray,
    cfg: MarlConfig,
    rng: np.random.Generator,
) -> dict[str, float]:
    """PPO on one group's rollout: ``ppo_epochs`` passes of ``minibatches`` minibatches over
    every (step, copy, agent) sample the agent was alive for; returns the last pass's means."""
    adv, ret = advantages(d, ended, norm, cfg)
    alive = d["alive"].reshape(-1) > 0
    if cfg.value_norm:
        norm.update(ret.reshape(-1)[alive])
    targets = norm.normalize(ret).reshape(-1)[alive]
    adv = adv.reshape(-1)[alive]
    if cfg.adv_norm:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    obs = d["obs"].reshape(-1, *d["obs"].shape[3:])[alive]
    critic = d["critic"].reshape(-1, d["critic"].shape[-1])[alive]
    acts = d["actions"].reshape(-1, *d["actions"].shape[3:])[alive]
    logp0 = d["logp"].reshape(-1)[alive]
    v0 = d["values"].reshape(-1)[alive]
    size = len(adv)
    sums: dict[str, float] = {}
    pol.train()
    for _ in range(cfg.ppo_epochs):
        sums = {}
        order = rng.permutation(size)
        for idx in np.array_split(order, cfg.minibatches):
            t = pol.to_tensor
            out = pol.actor(obs[idx])
            logp, ent = pol.log_prob_entropy(out, t(acts[idx]))
            terms = ppo_terms(
                logp, t(logp0[idx]), t(adv[idx].astype(np.float32)), pol.value(critic[idx]),
                t(v0[idx]), t(targets[idx]), ent, cfg.clip, cfg.value_clip, cfg.value_coef,
                cfg.entropy_coef,
            )  # fmt: skip
            pol.update(terms.total)
            for k in ("policy", "value", "entropy", "clip_fraction"):
                sums[k] = sums.get(k, 0.0) + float(getattr(terms, k)) / cfg.minibatches
    out: dict[str, Any] = {f"{k}_loss" if k in ("policy", "value") else k: v
                           for k, v in sums.items()}  # fmt: skip
    return out
