"""Helpers the self-play tests share."""

from __future__ import annotations


def merged(base: dict, kw: dict) -> dict:
    """``base`` with ``kw`` on top, a settings group (a dict) merged key by key."""
    out = dict(base)
    for k, v in kw.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def replay_arena(policy: object, **kw: object) -> object:
    """A tiny tic-tac-toe AlphaZero arena with a replay window; ``kw`` overrides (merged)."""
    from paddlecraft.arenas import SelfPlayArena

    base = {
        "data": "tictactoe", "algo": "alphazero", "epochs": 2, "steps_per_epoch": 2,
        "games_per_step": 8, "augment_mirror": True,
        "update": {"minibatch_size": 16, "epochs": 2, "replay": 300},
        "search": {"simulations": 6},
        "league": {"snapshot_every": 1, "latest_ratio": 1.0},
        "eval": {"games": {"random": 2, "minimax": 2}},
    }  # fmt: skip
    return SelfPlayArena({"policy": policy}, **merged(base, kw))
