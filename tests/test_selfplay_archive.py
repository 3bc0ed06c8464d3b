"""Go-Exploit's archive starts (``arena.search.archive_starts``, `.archive`): some training
games start at positions of the replay window; their samples count plies from the empty
board, so their value targets say who won from the mover's side."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import replay_arena, ttt_policy

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import GameSpec, TicTacToe
from paddlecraft.arenas.selfplay.archive import archive_starts
from paddlecraft.arenas.selfplay.playing import play_games
from paddlecraft.arenas.selfplay.replay import ReplayBuffer
from paddlecraft.arenas.selfplay.targets import outcome_samples


def _board(line: str) -> tuple[int, int]:
    """The bitboards ``(cur, mask)`` after the tic-tac-toe moves ``line``."""
    g = TicTacToe.after(line)
    return int(g.cur[0]), int(g.mask[0])


def test_starts_are_window_positions_at_the_share_of_games_the_rest_empty():
    lines = ["0", "04", "048", "4", "41"]
    planes = np.stack(
        [TicTacToe.planes(*(np.array([v], np.uint64) for v in _board(x)))[0] for x in lines]
    )
    replay = ReplayBuffer(100)
    replay.add({"obs": planes, "z": np.zeros(len(lines), np.float32)})
    cur, mask = archive_starts(replay, 20, 0.5, TicTacToe, np.random.default_rng(3))
    moved = mask != 0
    assert moved.sum() == 10  # every position stored has stones: exactly the share
    stored = {_board(x) for x in lines}
    assert {(int(c), int(m)) for c, m in zip(cur[moved], mask[moved], strict=True)} <= stored
    assert (cur[~moved] == 0).all()
    again = archive_starts(replay, 20, 0.5, TicTacToe, np.random.default_rng(3))
    assert all((a == b).all() for a, b in zip((cur, mask), again, strict=True))  # its stream
    assert archive_starts(replay, 20, 0.0, TicTacToe, np.random.default_rng(3)) is None
    assert archive_starts(ReplayBuffer(10), 20, 0.5, TicTacToe, np.random.default_rng(3)) is None


def test_a_game_started_mid_way_counts_plies_from_the_empty_board():
    """O to move at ply 3 with a win in one: the record's ply is 3, and O's winning move
    trains toward +1 (with the loop's own count, ply 0, it would read as X's move, -1)."""
    start = _board("0143")  # X 0, O 1, X 4, O 3: X to move at ply 4, wins at 8
    cur = np.array([start[0], 0], np.uint64)
    mask = np.array([start[1], 0], np.uint64)

    def winning_or_first(planes: np.ndarray, masks: np.ndarray):
        c, m = TicTacToe.from_planes(planes)
        wins = TicTacToe.winning_moves(c, m) & masks
        a = np.where(wins.any(1), wins.argmax(1), masks.argmax(1))
        return a, {"pi": np.eye(9, dtype=np.float32)[a]}

    seats = np.zeros((2, 2), np.int64)
    winner, records, _ = play_games(
        GameSpec("tictactoe"), 2, seats, [winning_or_first], record=0, starts=(cur, mask)
    )
    first = [r for r in records if 0 in r["game"]][0]
    row = list(first["game"]).index(0)
    assert first["ply"][row] == 4  # stones on the board, not the loop's 0
    assert (first["obs"][row] == TicTacToe.planes(cur[:1], mask[:1])[0]).all()
    assert winner[0] == 0  # X wins with 8 (0-4-8)
    samples = outcome_samples(records, winner)
    plies = np.concatenate([r["ply"] for r in records])
    games = np.concatenate([r["game"] for r in records])
    z = samples["z"][games == 0]
    assert (plies[games == 0] == 4).all() and (z == 1.0).all()  # X's winning move: +1
    assert plies[games == 1].tolist() == list(range(len(plies[games == 1])))  # from empty


def test_archive_starts_play_shorter_games_and_resume_bit_identically():
    seed_everything(0)
    arena = replay_arena(ttt_policy("policy"), search={"simulations": 6, "archive_starts": 0.5})
    first = arena.train_step(0)
    assert "games_from_archive" not in first  # the window was empty
    second = arena.train_step(1)
    assert 0 < second["games_from_archive"] <= 4  # half of the 8 games, minus empty boards
    seed_everything(0)
    plain = replay_arena(ttt_policy("plain"))
    plain.train_step(0)
    assert second["moves_per_game"] < plain.train_step(1)["moves_per_game"]
    seed_everything(0)
    arena = replay_arena(ttt_policy("policy"), search={"simulations": 6, "archive_starts": 0.5})
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)


def test_archive_starts_need_a_window_and_searches_that_allow_mixed_plies():
    with pytest.raises(ConfigError, match="archive_starts=0.5 .* arena.update.replay is 0"):
        replay_arena(ttt_policy("a"), update={"replay": 0}, search={"archive_starts": 0.5})
    with pytest.raises(ConfigError, match="second_player_simulations needs one search call"):
        replay_arena(
            ttt_policy("b"),
            search={"archive_starts": 0.5, "second_player_simulations": 12},
        )
    with pytest.raises(ConfigError, match=r"archive_starts.*in \[0, 1\]"):
        replay_arena(ttt_policy("c"), search={"archive_starts": 1.5})


def test_a_workers_slice_starts_where_its_task_says():
    """`play_task` (a Ray worker's slice) plays its games from the task's ``starts``."""
    from paddlecraft.arenas.games.baselines import RandomPlayer
    from paddlecraft.arenas.selfplay.playing import play_task

    cur, mask = (np.array([v, 0], np.uint64) for v in _board("40"))
    task = {"seats": np.zeros((2, 2), np.int64), "seed": [0], "record": 0,
            "plan": [("anchor", "random")], "starts": (cur, mask)}  # fmt: skip
    _, records, _ = play_task(task, GameSpec("tictactoe"), None, {"random": RandomPlayer()})
    first = records[0]  # the first move of both games
    assert first["game"].tolist() == [0, 1] and first["ply"].tolist() == [2, 0]
    assert (first["obs"][0] == TicTacToe.planes(cur[:1], mask[:1])[0]).all()
    assert not first["obs"][1].any()  # game 1 from the empty board
