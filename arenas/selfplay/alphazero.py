"""Training with search (``arena.algo=alphazero`` and the updates of the search phase,
``arena.search.updates``): the learner plays its moves with PUCT search guided by its own
network; the search's visit counts become the policy targets and the game outcomes the
value targets (Silver et al., AlphaZero). With ``arena.search.policy_target=completed_q``
the policy target is Gumbel AlphaZero's improved policy instead
(:func:`~arenas.games.search.completed_q_policy`).

Training games add Dirichlet noise at the root and sample moves in proportion to the
visit counts for the first ``search.temperature_moves`` plies of a game, then play the
most visited move. All games of a step are searched together, one network call per
simulation (:class:`~arenas.games.search.PUCTSearch`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..games.core import BoardGame
from ..games.search import PUCTSearch, choose_moves, completed_q_policy


def search_controller(
    policy: Any, rules: type[BoardGame], cfg: Any, rng: np.random.Generator
) -> Any:
    """A collection controller: ``(planes, masks) -> (actions, {"pi", "root_value"})``.

    ``cfg`` is ``arena.search`` (:class:`~.config.SearchConfig`): ``simulations``,
    ``c_puct``, ``dirichlet_alpha``, ``noise_fraction``, ``temperature_moves`` and
    ``policy_target`` are read. ``pi`` is the
    policy target: the visit distribution, or the completed-Q policy
    (:func:`~arenas.games.search.completed_q_policy`).
    """
    search = PUCTSearch(
        rules,
        policy.priors_and_values,
        simulations=cfg.simulations,
        c_puct=cfg.c_puct,
        dirichlet_alpha=cfg.dirichlet_alpha,
        noise_fraction=cfg.noise_fraction,
    )

    def act(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cur, mask = rules.from_planes(planes)
        res = search.search(cur, mask, rng, noise=True)
        ply = planes.reshape(len(planes), -1).sum(axis=1)  # stones on the board
        temperature = np.where(ply < cfg.temperature_moves, 1.0, 0.0)
        actions = choose_moves(res.visits, temperature, rng)
        if cfg.policy_target == "completed_q":
            pi = completed_q_policy(res)  # [n, A]
        else:
            pi = res.visits / res.visits.sum(axis=1, keepdims=True)  # [n, A]
        return actions, {"pi": pi.astype(np.float32), "root_value": res.value.astype(np.float32)}

    return act


def outcome_samples(
    records: list[dict[str, np.ndarray]], winner: np.ndarray
) -> dict[str, np.ndarray]:
    """Training samples ``obs, mask, pi, z``: ``z`` is the game's outcome for the mover
    (+1 win, 0 draw, -1 loss)."""
    ply = np.concatenate([r["ply"] for r in records])
    game = np.concatenate([r["game"] for r in records])
    w = winner[game]
    z = np.where(w < 0, 0.0, np.where(w == ply % 2, 1.0, -1.0)).astype(np.float32)
    return {
        "obs": np.concatenate([r["obs"] for r in records]),
        "mask": np.concatenate([r["mask"] for r in records]),
        "pi": np.concatenate([r["pi"] for r in records]).astype(np.float32),
        "z": z,
    }


def alphazero_step(policy: Any, b: dict[str, np.ndarray], u: Any) -> dict[str, float]:
    """One gradient step: ``policy_coef`` x cross-entropy to the visit distribution +
    ``value_coef`` x MSE to the outcome (``u`` is ``arena.update``); returns its metrics."""
    logits, value = policy(b["obs"])
    logp = policy.masked_log_probs(logits, b["mask"])  # [B, A], ~-1e9 on illegal moves
    pi = policy.to_tensor(b["pi"])
    policy_loss = -(pi * logp).sum(-1).mean()  # pi is 0 where a move is illegal
    value_loss = ((value - policy.to_tensor(b["z"])) ** 2).mean()
    loss = u.policy_coef * policy_loss + u.value_coef * value_loss
    policy.update(loss)
    p = logp.exp()
    entropy = -(p * logp).sum(-1).mean()
    return {
        "loss": float(loss),
        "policy_loss": float(policy_loss),
        "value_loss": float(value_loss),
        "entropy": float(entropy),
    }
