"""Small self-play helpers: which game a config names, game outcomes, tic-tac-toe holes."""

from __future__ import annotations

from typing import Any

import numpy as np

from paddlecraft.agents.instantiate import safe_instantiate, to_plain
from paddlecraft.errors import ConfigError

from ..games import GameSpec, TicTacToe


def game_spec(data: Any) -> GameSpec:
    """A `GameSpec` from itself, a name, or a ``data.loader`` config."""
    if isinstance(data, GameSpec):
        return data
    if isinstance(data, str):
        return GameSpec(data)
    data = to_plain(data)
    if isinstance(data, dict) and "_target_" in data:
        spec = safe_instantiate(data)
        if not isinstance(spec, GameSpec):
            raise ConfigError(f"data.loader must build an arenas.games.GameSpec, got {type(spec)}")
        return spec
    if isinstance(data, dict) and "name" in data:
        return GameSpec(data["name"])
    raise ValueError(
        "SelfPlayArena: data must name a game (tictactoe, connect_four, pettingzoo:<env>), "
        f"got {data!r}"
    )


def outcomes(winner: np.ndarray, seat: np.ndarray) -> np.ndarray:
    """+1 / 0 / -1 per game for the player in ``seat`` (winner -1: draw)."""
    return np.where(winner < 0, 0, np.where(winner == seat, 1, -1)).astype(np.int64)


def result_rates(o: np.ndarray) -> dict[str, float]:
    """``win_rate``, ``draw_rate``, ``loss_rate``, ``score`` (win 1, draw 1/2) and
    ``no_loss_rate`` (win or draw) of outcomes +1/0/-1."""
    o = np.asarray(o)
    win, draw, loss = float((o > 0).mean()), float((o == 0).mean()), float((o < 0).mean())
    return {
        "win_rate": win,
        "draw_rate": draw,
        "loss_rate": loss,
        "score": win + 0.5 * draw,
        "no_loss_rate": win + draw,
    }


def tictactoe_losing_lines(policy: Any) -> tuple[int, int]:
    """Opponent move sequences that beat the greedy ``policy``, as first and second player.

    Walks the whole game tree where the policy plays its greedy move and the opponent
    tries every legal move: 0 and 0 means no opponent (random, minimax, anything) can
    ever beat it. At most 945 lines per seat, batched per depth.
    """
    lost = []
    for policy_seat in (0, 1):
        cur = np.zeros(1, np.uint64)
        mask = np.zeros(1, np.uint64)
        losses = 0
        for ply in range(9):
            if len(cur) == 0:
                break
            if ply % 2 == policy_seat:
                legal = TicTacToe.legal(mask)
                a = policy.act(TicTacToe.planes(cur, mask), legal, greedy=True)
                cur, mask, won, full = TicTacToe.play(cur, mask, a)
                keep = ~(won | full)
            else:  # every opponent reply
                legal = TicTacToe.legal(mask)
                g, a = np.nonzero(legal)
                cur, mask, won, full = TicTacToe.play(cur[g], mask[g], a)
                losses += int(won.sum())
                keep = ~(won | full)
            cur, mask = cur[keep], mask[keep]
        lost.append(losses)
    return lost[0], lost[1]
