"""KataGo's ownership target as a board game has it (``agents.policy.ownership``): each
cell's holder at the game's end, from self-play records, from each mover's side; training
toward it, mirror images and position means, a policy without it unchanged, searches that
never read it, and a bit-identical resume."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import check_head_off, ttt_boards, ttt_policy
from selfplay_kit import replay_arena as _arena

from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games.connect_four import ConnectFour
from paddlecraft.arenas.games.tictactoe import TicTacToe
from paddlecraft.arenas.selfplay.alphazero import alphazero_step
from paddlecraft.arenas.selfplay.config import UpdateConfig
from paddlecraft.arenas.selfplay.ppo import mirror_samples
from paddlecraft.arenas.selfplay.replay import average_duplicates
from paddlecraft.arenas.selfplay.targets import ownership_targets


def _records(rules: type, games: dict[int, tuple[list[int], set[int]]]) -> list[dict]:
    """Records as `play_games` writes them, one per ply: game ``g`` plays its moves to the
    end and records the plies in its set (all of them in self-play)."""
    boards = {g: rules(1) for g in games}
    out = []
    for ply in range(max(len(m) for m, _ in games.values())):
        rows = []
        for g, (moves, kept) in games.items():
            if ply < len(moves):
                obs, mask = boards[g].observe()
                if ply in kept:
                    rows.append((g, obs[0], mask[0], moves[ply]))
                boards[g].step(np.array([moves[ply]]))
        if rows:
            out.append({
                "ply": np.full(len(rows), ply), "game": np.array([r[0] for r in rows]),
                "obs": np.stack([r[1] for r in rows]), "mask": np.stack([r[2] for r in rows]),
                "action": np.array([r[3] for r in rows]),
            })  # fmt: skip
    assert all(b.done[0] for b in boards.values())  # every game played to its end
    return out


def _classes(targets: np.ndarray) -> np.ndarray:
    """``int [N, rows, cols]``: 0 empty, 1 the mover's, 2 the opponent's (each row one-hot)."""
    assert np.array_equal(targets.sum(-1), np.ones(targets.shape[:-1]))
    return targets.argmax(-1)


def test_each_cell_is_its_holder_at_the_end_from_each_movers_side():
    # X takes the top row (cells 0, 1, 2; O 3 and 4): the game ends with X's fifth ply
    line = [0, 3, 1, 4, 2]
    recs = _records(TicTacToe, {0: (line, set(range(5))), 1: (line, {0, 2, 4})})
    got = _classes(ownership_targets(recs, TicTacToe))
    x_side = np.array([[1, 1, 1], [2, 2, 0], [0, 0, 0]])  # as X sees the final board
    o_side = np.where(x_side == 0, 0, 3 - x_side)
    game = np.concatenate([r["game"] for r in recs])
    ply = np.concatenate([r["ply"] for r in recs])
    assert got.shape == (8, 3, 3) and game.tolist().count(1) == 3
    for row, p in enumerate(ply.tolist()):
        assert np.array_equal(got[row], x_side if p % 2 == 0 else o_side), (game[row], p)


def test_connect_four_final_stone_falls_to_its_row():
    # four in column 0 for the first player (the last on row 2 from the top), three of the
    # second's in column 1. Game 1 records only the second player's plies: its final board
    # lacks the first player's unrecorded last stone (as the docstring says)
    line = [0, 1, 0, 1, 0, 1, 0]
    recs = _records(ConnectFour, {0: (line, set(range(7))), 1: (line, {1, 3, 5})})
    got = _classes(ownership_targets(recs, ConnectFour))  # [10, 6, 7]
    first = np.zeros((6, 7), np.int64)
    first[2:, 0] = 1
    first[3:, 1] = 2
    second = np.where(first == 0, 0, 3 - first)
    unrecorded = second.copy()
    unrecorded[2, 0] = 0
    ply = np.concatenate([r["ply"] for r in recs])
    game = np.concatenate([r["game"] for r in recs])
    for row, (g, p) in enumerate(zip(game.tolist(), ply.tolist())):
        want = unrecorded if g == 1 else first if p % 2 == 0 else second
        assert np.array_equal(got[row], want), (g, p)
    assert game.tolist().count(1) == 3


def test_mirror_images_flip_the_cells_and_position_means_average_them():
    obs = np.zeros((3, 3, 3, 2), np.float32)
    obs[0, 0, 0, 0] = obs[1, 0, 0, 0] = 1  # rows 0 and 1: the same position
    own = np.zeros((3, 3, 3, 3), np.float32)
    own[..., 0] = 1  # every cell empty at the end...
    own[0, 0, 2] = [0, 1, 0]  # ...but row 0's top-right cell the mover's
    own[1, 0, 2] = [0, 0, 1]  # and row 1's the opponent's
    data = {"obs": obs, "mask": np.ones((3, 9), bool), "pi": np.full((3, 9), 1 / 9, np.float32),
            "z": np.zeros(3, np.float32), "ownership": own}  # fmt: skip
    mirrored = mirror_samples(data, (3, 3, 2))["ownership"]
    assert np.array_equal(mirrored[0, 0, 0], [0, 1, 0]) and np.array_equal(
        mirrored[0, 0, 2], [1, 0, 0]
    )
    means = average_duplicates(data)["ownership"]
    assert np.array_equal(means[0, 0, 2], [0, 0.5, 0.5]) and np.array_equal(means[0], means[1])
    assert np.array_equal(means[2], own[2])


def test_the_head_trains_toward_the_holders_and_the_other_heads_do_not(make_scope):
    policy = ttt_policy(make_scope("own"), ownership=True, lr=0.01)
    obs = ttt_boards(6)  # six boards with i stones each
    holders = np.random.default_rng(0).integers(0, 3, (6, 3, 3))
    batch = {"obs": obs, "mask": np.ones((6, 9), bool), "pi": np.full((6, 9), 1 / 9, np.float32),
             "z": np.zeros(6, np.float32), "ownership": np.eye(3, dtype=np.float32)[holders]}  # fmt: skip
    u = UpdateConfig()
    first = alphazero_step(policy, batch, u)
    assert first["ownership_loss"] == pytest.approx(np.log(3), rel=0.05)  # near-uniform at first
    for _ in range(300):
        last = alphazero_step(policy, batch, u)
    assert last["ownership_loss"] < first["ownership_loss"] / 20
    logits = policy.heads(obs)["ownership_logits"].numpy()
    assert logits.shape == (6, 3, 3, 3) and np.array_equal(logits.argmax(-1), holders)
    # the policy head learnt the uniform visits, not the cells
    assert np.allclose(policy.priors_and_values(obs, batch["mask"])[0], 1 / 9, atol=0.02)


def test_off_leaves_the_policy_and_its_searches_as_they_were(make_scope, tmp_path):
    check_head_off(make_scope, tmp_path, "ownership", "ownership_logits")


def test_search_updates_train_the_head_and_resume_bit_identically():
    seed_everything(0)
    policy = ttt_policy("policy", ownership=True)
    arena = _arena(policy, update={"ownership_coef": 1.0})
    m = arena.train_step(0)
    assert m["ownership_loss"] > 0
    own = arena.replay.arrays["ownership"][: len(arena.replay)]  # [rows, 3, 3, 3]
    obs = arena.replay.arrays["obs"][: len(arena.replay)]  # [rows, 3, 3, 2]
    assert np.array_equal(own.sum(-1), np.ones(own.shape[:-1]))  # one holder per cell
    # a stone on the board is still its holder's at the end; the final board has more
    cls = own.argmax(-1)
    assert (cls[obs[..., 0] > 0] == 1).all() and (cls[obs[..., 1] > 0] == 2).all()
    assert (cls > 0).sum() > (obs > 0).sum()
    passed = check_arena(_arena(policy, update={"ownership_coef": 1.0}), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed
