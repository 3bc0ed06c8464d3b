"""The training targets of search updates, from a step's self-play records: the value
target (`outcome_samples`: each game's discounted result, a draw's score, the search's or a
proof's value where asked) and the auxiliary heads' (moves left, the opponent's reply,
ownership), each row in `outcome_samples`' order.
"""

from __future__ import annotations

import numpy as np

from ..games.core import BoardGame

__all__ = [
    "EXPLORED_VALUES",
    "full_search_rows",
    "moves_left_targets",
    "opponent_policy_targets",
    "outcome_samples",
    "ownership_targets",
]

#: the value targets of the positions before a game's last explored move (`outcome_samples`)
EXPLORED_VALUES = ("outcome", "search")


def outcome_samples(
    records: list[dict[str, np.ndarray]],
    winner: np.ndarray,
    discount: float = 1.0,
    root_value_weight: float = 0.0,
    proven_values: bool = False,
    explored_values: str = "outcome",
    draw_score: float = 0.0,
    max_moves: int | None = None,
) -> dict[str, np.ndarray]:
    """Training samples ``obs, mask, pi, z``: ``z`` is the game's outcome for the mover
    (+1 win, 0 draw, -1 loss), times ``discount ** k`` where the game was decided ``k``
    plies after the position (0: the mover's own move won it). A draw is worth
    ``draw_score`` to the first player (even plies) and its negative to the second (Leela's
    draw score; 0 AlphaZero's), decided with the board full: on ply ``max_moves - 1``
    (without ``max_moves``, the game's last recorded ply). With
    ``root_value_weight`` w > 0 the target is ``(1 - w) z + w q``, ``q`` the search's value
    of the position (its records' ``root_value``): less noisy than one game's result.
    With ``proven_values``, where the search proved the position's value (records'
    ``root_proven``, a policy with ``search_proofs``), the target is that exact value: the
    soonest win or longest defence, where the game's own result only says how this game
    went. With ``explored_values="search"``, the positions of a game up to its last
    explored move (records' ``explored``: sampled away from the most visited move) take
    the search's value instead of the result, which followed a move the search rated
    lower; proofs still come first.

    The deciding ply of a game is its last recorded move where the winner moved it, else
    the move after (the opponent's, which the records need not hold).
    """
    ply = np.concatenate([r["ply"] for r in records])
    game = np.concatenate([r["game"] for r in records])
    w = winner[game]
    # a draw for the mover: the first player's draw score, or its opponent's (0: AlphaZero's)
    drawn = np.where(ply % 2 == 0, draw_score, -draw_score) if draw_score else 0.0
    z = np.where(w < 0, drawn, np.where(w == ply % 2, 1.0, -1.0))
    if discount != 1.0:
        last = _deciding_plies(ply, game, winner, max_moves)
        z = z * discount ** (last[game] - ply).astype(np.float64)
    if root_value_weight:
        q = np.concatenate([r["root_value"] for r in records]).astype(np.float64)
        z = (1.0 - root_value_weight) * z + root_value_weight * q
    if explored_values == "search" and all("explored" in r for r in records):
        explored = np.concatenate([r["explored"] for r in records]).astype(bool)
        last = np.full(len(winner), -1, np.int64)  # each game's last explored ply
        np.maximum.at(last, game[explored], ply[explored])
        q = np.concatenate([r["root_value"] for r in records]).astype(np.float64)
        z = np.where(ply <= last[game], q, z)
    elif explored_values not in EXPLORED_VALUES:
        raise ValueError(
            f"explored_values must be one of {EXPLORED_VALUES}, got {explored_values!r}"
        )
    if proven_values and any("root_proven" in r for r in records):
        proven = np.concatenate(
            [r.get("root_proven", np.zeros(len(r["game"]), bool)) for r in records]
        ).astype(bool)
        q = np.concatenate([r["root_value"] for r in records]).astype(np.float64)
        z = np.where(proven, q, z)
    z = z.astype(np.float32)
    return {
        "obs": np.concatenate([r["obs"] for r in records]),
        "mask": np.concatenate([r["mask"] for r in records]),
        "pi": np.concatenate([r["pi"] for r in records]).astype(np.float32),
        "z": z,
    }


def full_search_rows(records: list[dict[str, np.ndarray]]) -> np.ndarray | None:
    """The sample rows (in `outcome_samples`' order) that a full search made, ``bool
    [samples]``; None when every move was one (no playout cap randomisation)."""
    if not records or "full_search" not in records[0]:
        return None
    return np.concatenate([r["full_search"] for r in records]).astype(bool)


def moves_left_targets(
    records: list[dict[str, np.ndarray]], winner: np.ndarray, max_moves: int
) -> np.ndarray:
    """The moves-left head's targets ``float32 [samples]`` (in `outcome_samples`'
    order): the plies from each recorded position to its game's end, counting the mover's
    own move (1: the mover's move ended the game). A won game ends with the winner's move
    (as `outcome_samples` finds it); a drawn one with the board full, after
    ``max_moves`` plies.
    """
    ply = np.concatenate([r["ply"] for r in records])
    game = np.concatenate([r["game"] for r in records])
    last = _deciding_plies(ply, game, winner, max_moves)
    return (last[game] - ply + 1).astype(np.float32)


def _deciding_plies(
    ply: np.ndarray, game: np.ndarray, winner: np.ndarray, max_moves: int | None
) -> np.ndarray:
    """Each game's deciding ply ``int64 [games]`` from the records' ``ply`` and ``game``
    ``[samples]``: a won game's last recorded move where the winner moved it, else the move
    after (the opponent's, which the records need not hold); a drawn game's last square,
    ply ``max_moves - 1`` (without ``max_moves``, its last recorded ply)."""
    last = np.full(len(winner), -1, np.int64)
    np.maximum.at(last, game, ply)
    last += (last % 2 != winner) & (winner >= 0)  # the winner's move came after
    if max_moves is not None:  # a draw: decided by the last square's move
        last = np.where(winner < 0, max_moves - 1, last)
    return last


def opponent_policy_targets(records: list[dict[str, np.ndarray]]) -> np.ndarray:
    """The opponent-policy head's targets ``float32 [samples, A]`` (in `outcome_samples`'
    order; KataGo's auxiliary target): each position's row is the policy target ``pi`` of
    the same game's next ply, the opponent's search at its reply. Where the records hold
    no next ply (the game ended there, or the reply was an unrecorded opponent's) the row
    is zeros, which adds nothing to the loss (nor, averaged with a duplicate's target,
    takes anything from it but its weight)."""
    ply = np.concatenate([r["ply"] for r in records]).astype(np.int64)
    game = np.concatenate([r["game"] for r in records]).astype(np.int64)
    pi = np.concatenate([r["pi"] for r in records]).astype(np.float32)  # [N, A]
    if not len(ply):
        return pi
    key = game * (int(ply.max()) + 2) + ply  # [N], one per (game, ply)
    order = np.argsort(key, kind="stable")
    at = np.minimum(np.searchsorted(key[order], key + 1), len(key) - 1)  # [N]
    found = key[order][at] == key + 1
    out = np.zeros_like(pi)
    out[found] = pi[order[at[found]]]
    return out


def ownership_targets(records: list[dict[str, np.ndarray]], rules: type[BoardGame]) -> np.ndarray:
    """The ownership head's targets ``float32 [samples, rows, cols, 3]`` (in
    `outcome_samples`' order; KataGo's ownership target as a board game without territory
    has it): one-hot per cell, who holds the cell when the game ends, seen from each
    sample's mover (`OWNERSHIP_CLASSES` order: empty, the mover's, the opponent's). A
    game's final board is its last recorded position with the recorded move played
    (``rules.play``); a reply after it that the records do not hold (an opponent's
    unrecorded last move) is not on it."""
    ply = np.concatenate([r["ply"] for r in records]).astype(np.int64)  # [N]
    game = np.concatenate([r["game"] for r in records]).astype(np.int64)  # [N]
    obs = np.concatenate([r["obs"] for r in records])  # [N, rows, cols, 2]
    if not len(ply):
        return np.zeros((*obs.shape[:3], 3), np.float32)
    last = np.full(int(game.max()) + 1, -1, np.int64)
    np.maximum.at(last, game, ply)
    ends = np.flatnonzero(ply == last[game])  # [G]: each game's last recorded row
    action = np.concatenate([r["action"] for r in records]).astype(np.int64)
    cur, mask, _, _ = rules.play(*rules.from_planes(obs[ends]), action[ends])
    final = np.zeros((len(last), *obs.shape[1:]), np.int8)  # [games, rows, cols, 2]
    final[game[ends]] = rules.planes(cur, mask)  # the next mover's stones, the last mover's
    f = final[game]  # [N, rows, cols, 2]
    last_mover = ((last[game] - ply) % 2 == 0)[:, None, None]  # [N, 1, 1]
    own = np.where(last_mover, f[..., 1], f[..., 0]) > 0
    theirs = np.where(last_mover, f[..., 0], f[..., 1]) > 0
    cls = np.where(own, 1, np.where(theirs, 2, 0))  # [N, rows, cols]
    return np.eye(3, dtype=np.float32)[cls]
