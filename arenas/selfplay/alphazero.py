"""Training with search (``arena.algo=alphazero`` and the updates of the search phase,
``arena.search.updates``): the learner plays its moves with PUCT search guided by its own
network; the search's visit counts become the policy targets and the game outcomes the
value targets (Silver et al., AlphaZero).

Training games add Dirichlet noise at the root and sample moves in proportion to the
visit counts for the first ``search.temperature_moves`` plies of a game, then play the
most visited move. All games of a step are searched together, one network call per
simulation (`PUCTSearch`).

A policy with ``value_discount`` below 1 learns discounted outcomes (``+-discount ** k``
for a game decided ``k`` plies after the position) and its searches back values up with
the same discount: among winning moves the sooner win is worth more, among losing ones
the later loss, as the perfect solver's exact scores order them. With
``arena.update.replay`` the samples of past search updates are trained on again
(`.replay`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..games.core import BoardGame
from ..games.search import (
    CachedEvaluator,
    NetworkEvaluator,
    PUCTSearch,
    SearchSettings,
    TreeReuse,
    choose_moves,
    decided_visits,
    pruned_visits,
)
from .search_config import sampling_temperature


def search_controller(
    policy: Any, rules: type[BoardGame], cfg: Any, rng: np.random.Generator
) -> Any:
    """A collection controller: ``(planes, masks) -> (actions, {"pi", "root_value"})``.

    ``cfg`` is ``arena.search`` (`SearchConfig`). Make one per collection: its searches
    reuse the network's results for positions met before (`CachedEvaluator`), which is
    right only while the weights stay as they are, and search a NumPy copy of the weights
    as they were when it was made (`Policy.frozen_evaluator`); with ``reuse`` each search
    starts from the subtree its predecessor left below the move played (`TreeReuse`). ``pi`` is the policy target,
    the visit distribution (forced playouts pruned, proven roots' best moves only).
    """
    network = policy.search_settings(frozen=True)
    # kept for this controller's life: the weights do not change in it
    network["evaluate"] = CachedEvaluator(NetworkEvaluator(network["evaluate"]))
    settings = SearchSettings(
        simulations=cfg.simulations, c=cfg.c_puct, dirichlet_alpha=cfg.dirichlet_alpha,
        noise_fraction=cfg.noise_fraction, forced_playouts=cfg.forced_playouts,
        **{k: network[k] for k in ("discount", "tactics", "proofs", "fpu_reduction")},
    )  # fmt: skip
    search = PUCTSearch(rules, network["evaluate"], settings)
    reuse = TreeReuse() if cfg.reuse else None  # each search starts from the last one's

    def act(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cur, mask = rules.from_planes(planes)
        training = policy.training
        policy.eval()  # once per search, not once per simulation
        ply = planes.reshape(len(planes), -1).sum(axis=1)  # stones on the board
        res = search.search(cur, mask, rng, noise=True, reuse=reuse)
        if training:
            policy.train()
        temperature = sampling_temperature(ply, cfg)  # [n]
        visits = decided_visits(res)  # where the search proved the root: its best moves
        if cfg.forced_playouts > 0:  # the forced visits out of the target and the move
            visits = pruned_visits(visits, res, cfg.c_puct, cfg.forced_playouts)
        actions = choose_moves(visits, temperature, rng)
        pi = visits / visits.sum(axis=1, keepdims=True)  # [n, A]
        if reuse is not None:
            reuse.played(actions)
        return actions, {"pi": pi.astype(np.float32), "root_value": res.value.astype(np.float32)}

    act.search = search  # type: ignore[attr-defined]  # the tree it plays with
    act.reuse = reuse  # type: ignore[attr-defined]  # the subtrees it keeps (None: none)
    return act


def alphazero_step(policy: Any, b: dict[str, np.ndarray], u: Any) -> dict[str, float]:
    """One gradient step: cross-entropy to the visit distribution + ``value_coef`` x MSE
    to the outcome (``u`` is ``arena.update``); returns its metrics."""
    logits, value = policy(b["obs"])  # [B, A], [B]
    logp = policy.masked_log_probs(logits, b["mask"])  # [B, A], ~-1e9 on illegal moves
    pi = policy.to_tensor(b["pi"])
    policy_loss = -(pi * logp).sum(-1).mean()  # pi is 0 where a move is illegal
    z = policy.to_tensor(b["z"])  # [B]
    value_loss = ((value - z) ** 2).mean()
    loss = policy_loss + u.value_coef * value_loss
    policy.update(loss)
    p = logp.exp()
    entropy = -(p * logp).sum(-1).mean()
    return {
        "loss": float(loss),
        "policy_loss": float(policy_loss),
        "value_loss": float(value_loss),
        "entropy": float(entropy),
    }
