"""The Connect Four solver as a judge: exact values of known positions through our board
encoding, the solver anchor (perfect and depth-limited), the perfect-move rate and its
seeded position set, the arena's final-evaluation metrics, the missing-extra message,
Pascal Pons' test files and the mistake-rate benchmark on them."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from paddlecraft.agents import Policy
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import SelfPlayArena
from paddlecraft.arenas.games import ConnectFour, TicTacToe, make_baseline
from paddlecraft.arenas.games.baselines import RandomPlayer
from paddlecraft.arenas.games.solver import (
    SolvedPositions,
    SolverPlayer,
    judged_moves,
    move_rates,
    move_rates_by_class,
    perfect_move_rate,
    solve_planes,
    solver_positions,
    versus_solver,
)

C4_MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": 84,
    "hidden_size": 32,
    "num_classes": 32,
}


def _after(moves: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Observation planes and legal masks of the position after ``moves`` (columns)."""
    g = ConnectFour(1)
    for a in moves:
        g.step(np.array([a]))
    return g.observe()


def test_known_values_come_through_our_board_encoding():
    # the empty board: the centre wins (the first player wins), 2 and 4 draw (Allis 1988)
    planes, _ = _after([])
    assert solve_planes(planes)[0].tolist() == [-2, -1, 0, 1, 0, -1, -2]
    # X has three in a row on the bottom (2, 3, 4) with both ends open: O loses whatever
    # it plays (every move has the same losing value)
    v = solve_planes(_after([3, 3, 4, 0, 2])[0])[0]
    assert (v < 0).all() and len(set(v.tolist())) == 1
    # X to move with three in column 0: only column 0 wins at once (the best score:
    # (43 - 7) / 2 = 18 for a win on X's 4th stone); a full column is NaN
    v = solve_planes(_after([0, 1, 0, 1, 0, 1])[0])[0]
    assert v[0] == 18 and np.nanargmax(v) == 0 and (np.delete(v, 0) < 18).all()
    full = solve_planes(_after([3, 3, 3, 3, 3, 3])[0])[0]
    assert np.isnan(full[3]) and np.isfinite(np.delete(full, 3)).all()


def test_move_rates_count_best_and_result_keeping_moves():
    values = np.array(
        [
            [1, 0, -1, np.nan],  # won: only 0 is best and keeps the win
            [0, 0, -2, -1],  # drawn: 0, 1 are best; 2, 3 lose
            [-1, -3, -5, -5],  # lost: 0 is best; every move keeps the (lost) result
            [2, 1, -1, -1],  # won: 0 best, 1 also wins (good, not perfect)
        ]
    )
    assert move_rates(values, np.array([0, 1, 2, 1])) == {
        "perfect_move_rate": 0.5,  # rows 0 and 1
        "good_move_rate": 1.0,
    }
    assert move_rates(values, np.array([1, 2, 0, 3])) == {
        "perfect_move_rate": 0.25,  # row 2
        "good_move_rate": 0.25,  # row 2 only
    }
    # an illegal choice is neither perfect nor good
    assert move_rates(values[:1], np.array([3])) == {
        "perfect_move_rate": 0.0,
        "good_move_rate": 0.0,
    }


@pytest.fixture(scope="module")
def positions() -> SolvedPositions:
    return solver_positions(40, seed=0)  # the set the arena test uses too


def test_rates_by_class_show_where_moves_fall_short():
    nan = np.nan
    values = np.array([
        [3, 1, -1, 0, 0, 0, 0],  # won: 1 wins slower  -> good, not perfect ("slow")
        [3, 1, -1, 0, 0, 0, 0],  # won: 0 is the best
        [0, -1, -2, nan, 0, 0, 0],  # drawn: 0 keeps the draw
        [-1, -3, -5, -5, -5, -5, -5],  # lost: 1 loses sooner ("early")
        [-1, -3, -5, -5, -5, -5, -5],  # lost: 0 holds out longest
    ])  # fmt: skip
    actions = np.array([1, 0, 0, 1, 0])
    by = move_rates_by_class(values, actions, plies=np.array([0, 9, 3, 17, 5]))
    assert by["won"] == {"n": 2.0, "perfect_move_rate": 0.5, "good_move_rate": 1.0, "slow": 0.5}
    assert by["drawn"] == {"n": 1.0, "perfect_move_rate": 1.0, "good_move_rate": 1.0}
    assert by["lost"] == {"n": 2.0, "perfect_move_rate": 0.5, "good_move_rate": 1.0, "early": 0.5}
    early = by["plies 0-7"]
    assert early["n"] == 3 and early["perfect_move_rate"] == pytest.approx(2 / 3)
    assert by["plies 8-15"]["perfect_move_rate"] == 1.0 and by["plies 16-23"]["n"] == 1
    assert move_rates(values, actions) == {"perfect_move_rate": 0.6, "good_move_rate": 1.0}


@pytest.mark.slow
def test_positions_are_seeded_realistic_and_decisive(positions):
    again = solver_positions.__wrapped__(40, seed=0)  # not the cached object
    assert np.array_equal(again.planes, positions.planes)
    assert np.array_equal(again.values, positions.values, equal_nan=True)
    other = solver_positions.__wrapped__(8, seed=1)
    assert not np.array_equal(other.planes, positions.planes[:8])
    assert len(positions) == 40
    assert positions.plies.min() >= 0 and positions.plies.max() <= 30
    assert len(np.unique(positions.plies)) >= 10  # spread over the opening and middle game
    stones = positions.planes.sum(axis=(1, 2, 3))
    assert np.array_equal(stones, positions.plies)
    # only positions where the moves differ in value; values NaN exactly on full columns
    assert (np.nanmax(positions.values, 1) > np.nanmin(positions.values, 1)).all()
    assert np.array_equal(np.isnan(positions.values), ~positions.masks)


def test_solver_anchor_is_perfect_and_depth_weakens_it(positions):
    perfect = make_baseline("solver", ConnectFour)
    assert isinstance(perfect, SolverPlayer) and perfect.name == "solver"
    assert perfect_move_rate(perfect, positions) == {
        "perfect_move_rate": 1.0,
        "good_move_rate": 1.0,
    }
    moves = judged_moves(perfect, positions)  # what perfect_move_rate scored
    assert np.array_equal(
        positions.values[np.arange(len(moves)), moves], np.nanmax(positions.values, axis=1)
    )
    weak = perfect_move_rate(make_baseline("solver1", ConnectFour), positions)
    rand = perfect_move_rate(RandomPlayer(), positions)
    assert rand["perfect_move_rate"] < weak["perfect_move_rate"] < 1.0
    # keeps every result, blind to distance: good always, perfect only by luck of the draw
    keep = make_baseline("solver_result", ConnectFour)
    moves = judged_moves(keep, positions)
    v, best = positions.values, np.nanmax(positions.values, axis=1)
    chosen = v[np.arange(len(moves)), moves]
    assert (np.sign(chosen) == np.sign(best)).all()
    assert rand["perfect_move_rate"] < move_rates(v, moves)["perfect_move_rate"] < 1.0
    with pytest.raises(ValueError, match="Connect Four solver"):
        make_baseline("solver", TicTacToe)


def test_solver_wins_as_first_player_against_random():
    rng = np.random.default_rng(0)
    g = ConnectFour(4)
    solver, rand = SolverPlayer(), RandomPlayer()
    while not g.done.all():
        idx = np.flatnonzero(~g.done)
        p, m = g.observe(idx)
        who = g.to_move[idx]
        a = np.where(who == 0, solver.act(p, m, rng=rng), rand.act(p, m, rng=rng))
        g.step(a, idx)
    assert (g.winner == 0).all()


def test_missing_extra_is_one_error_line_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitbully", None)
    with pytest.raises(ConfigError) as e:
        SolverPlayer()
    msg = str(e.value)
    assert "pip install paddlecraft[solver]" in msg and "\n" not in msg


def test_arena_reports_perfect_move_rates_in_the_final_evaluation(make_scope):
    policy = Policy(make_scope("pol"), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7, seed=0)
    arena = SelfPlayArena(
        {"policy": policy},
        data="connect_four",
        epochs=1,
        steps_per_epoch=1,
        games_per_step=8,
        eval={
            "games": {"random": 2},
            "search_games": {"random": 2},
            "simulations": 4,
            "solver_positions": 40,
        },
    )
    arena.updates = 1  # the final evaluation
    out = arena.evaluate()
    greedy = np.asarray(policy.act(solver_positions(40, 0).planes, solver_positions(40, 0).masks))
    assert (
        out["perfect_move_rate"]
        == move_rates(solver_positions(40, 0).values, greedy)["perfect_move_rate"]
    )
    for k in ("perfect_move_rate", "good_move_rate", "search_perfect_move_rate"):
        assert 0.0 <= out[k] <= 1.0
    assert out["good_move_rate"] >= out["perfect_move_rate"]
    with pytest.raises(ConfigError, match="arena.eval.solver_positions needs game=connect_four"):
        SelfPlayArena(
            {
                "policy": Policy(
                    make_scope("ttt"),
                    obs_shape=[3, 3, 2],
                    num_actions=9,
                    seed=0,
                    encoder={**C4_MLP, "input_size": 18},
                )
            },  # fmt: skip
            data="tictactoe",
            eval={"solver_positions": 10},
        )


def test_versus_solver_reports_survival_and_perfect_play_wins():
    perfect = versus_solver(SolverPlayer(), games=1)
    assert perfect["win_rate"] == 1.0 and perfect["plies"] % 2 == 1  # the first player's move
    assert np.isnan(perfect["win_given_away_at"]) and perfect["given_away_by_ply_10"] == 0.0
    assert perfect["win_given_away_lines"] == {}
    tactical = versus_solver(make_baseline("tactical", ConnectFour), games=2)
    assert tactical["win_rate"] == 0.0 and 7 <= tactical["plies"] < perfect["plies"]
    assert 0 <= tactical["win_given_away_at"] < tactical["plies"]
    lines = tactical["win_given_away_lines"]
    assert sum(lines.values()) == 2
    for line in lines:  # the columns before, the player's move that gave the win away
        before, move = line.split(":")
        assert len(before) % 2 == 0 and int(move) in range(7) and set(before) <= set("0123456")
    plies = [len(line.split(":")[0]) for line, n in lines.items() for _ in range(n)]
    assert np.median(plies) == tactical["win_given_away_at"]  # the stones before the move
    for line in lines:  # replayed: a won position, and the move played does not win it
        before, move = line.split(":")
        board = ConnectFour(1)
        for column in before:
            board.step(np.array([int(column)]))
        values = solve_planes(board.observe()[0])[0]
        assert np.nanmax(values) > 0 and not values[int(move)] > 0

    class EdgeOpening(SolverPlayer):
        """The solver, except for the first move: column 0, which loses."""

        def act(self, observations, action_masks, rng=None):
            a = super().act(observations, action_masks, rng)
            empty = np.asarray(observations).reshape(len(a), -1).sum(1) == 0
            return np.where(empty, 0, a)

    edge = versus_solver(EdgeOpening(), games=3)
    assert edge["win_rate"] == 0.0 and edge["win_given_away_at"] == 0.0
    assert edge["given_away_by_ply_10"] == 1.0  # every game given away by its first move
    assert edge["win_given_away_lines"] == {":0": 3}  # on the empty board, by column 0


def test_result_plies_say_how_far_a_result_is():
    """From bitbully's scores: a win at once is 1 ply away, a loss at the opponent's next
    move 2, each later win or loss 2 more; on hand-played positions and on the set."""
    from paddlecraft.arenas.games.solver import result_plies, solve

    rows = []
    for moves in ([5, 4, 3, 1, 2, 0, 0, 0, 1, 5, 4, 6, 3, 4, 6, 5, 4, 3, 3],  # wins at once
                  [2, 6, 4, 6, 1, 5, 6, 0, 2, 4, 0, 3, 4, 5, 6, 2, 3]):  # lost in 4  # fmt: skip
        g = ConnectFour(1)
        for a in moves:
            g.step(np.array([a]))
        rows.append((solve(g.cur, g.mask)[0], len(moves)))
    values, stones = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    # the win at once (column 6); the loss put off by blocking (column 1): 4 plies
    assert list(result_plies(values, stones)) == [1, 4]
    # the other moves: a win in 3 (column 2), a loss at the opponent's next move
    other = np.array([[values[0, 2]] * 7, [values[1, 0]] * 7])
    assert list(result_plies(other, stones)) == [3, 2]
    assert np.isnan(result_plies(np.zeros((1, 7)), np.array([4])))[0]  # drawn
    pos = solver_positions(40, seed=0)
    far = result_plies(pos.values, pos.plies)
    decided = ~np.isnan(far)
    assert decided.any() and (far[decided] >= 1).all()
    assert (far[decided] <= 43 - pos.plies[decided]).all()  # never past a full board
    by = move_rates_by_class(pos.values, np.nanargmax(pos.values, axis=1), pos.plies)
    bands = [k for k in by if k.startswith("result in")]
    assert bands and sum(by[k]["n"] for k in bands) == decided.sum()
    assert all(by[k]["perfect_move_rate"] == 1.0 for k in bands)  # the solver's own moves


def _pons_line(moves: list[int]) -> str:
    """A line of Pons' format for the position after ``moves`` (0-based columns): the
    columns 1-based, then the best move's exact value."""
    return "".join(str(a + 1) for a in moves) + f" {int(np.nanmax(solve_planes(_after(moves)[0])))}"


PONS_GAMES = ([3, 3, 4, 0, 2], [0, 1, 0, 1, 0, 1], [3, 3, 3, 3, 3, 3], [2, 6, 4, 6, 1, 5, 6, 0])


def test_pons_test_files_replay_to_our_positions_and_wrong_ones_name_their_line(tmp_path):
    from paddlecraft.arenas.games.solver import pons_positions

    f = tmp_path / "Test_L1_R2"
    f.write_text("\n".join(_pons_line(m) for m in PONS_GAMES) + "\n")
    pos = pons_positions(f)
    assert pos.plies.tolist() == [len(m) for m in PONS_GAMES]
    for i, moves in enumerate(PONS_GAMES):
        planes, masks = _after(moves)
        assert (pos.planes[i] == planes[0]).all() and (pos.masks[i] == masks[0]).all()
        np.testing.assert_array_equal(pos.values[i], solve_planes(planes)[0])
    assert pos.values[1, 0] == 18  # three in column 0, X to move: wins at once
    assert len(pons_positions(f, limit=2)) == 2
    bad = {
        "0121 3": "not a position of Pons' format",  # 0-based columns
        "1111111 5": r"not a legal move there \(column full",  # a 7th stone in column 1
        "1212121": "not a position of Pons' format",  # no score
        "4444 7": "line 1: the file gives score 7, the solver",
    }
    for line, message in bad.items():
        f.write_text(line + "\n")
        with pytest.raises(ConfigError, match=message):
            pons_positions(f)
    # the game is over after X's four in column 0: no position to judge
    f.write_text(_pons_line([0, 1, 0, 1, 0, 1]) + "\n1212121 1\n")
    with pytest.raises(ConfigError, match="line 2"):
        pons_positions(f)
    with pytest.raises(ConfigError, match="not found"):
        pons_positions(tmp_path / "Test_L9_R9")


def test_pons_benchmark_scores_mistakes_as_alphazero_jl(tmp_path):
    """The script judges players on each test file: the solver makes no mistake and plays
    every perfect move; a player that gives wins away makes exactly those mistakes."""
    from selfplay_kit import script

    bench = script("pons_benchmark")
    (tmp_path / "Test_L3_R1").write_text("\n".join(_pons_line(m) for m in PONS_GAMES))
    (tmp_path / "other").write_text("ignored: not a Test_L*_R* name")
    rows = bench.main([str(tmp_path), "--players", "solver", "random", "--out",
                       str(tmp_path / "rows.json")])  # fmt: skip
    assert [(r["set"], r["player"]) for r in rows] == [
        ("end-easy", "solver"),
        ("end-easy", "random"),
    ]
    solver, rand = rows
    assert solver["mistake_rate"] == 0.0 and solver["perfect_move_rate"] == 1.0
    # O facing X's open three loses whatever it plays, and in the last game every move
    # wins: two of the four positions leave no room for a mistake
    assert solver["no_mistake_possible"] == rand["no_mistake_possible"] == 0.5
    # what the random player's own moves score, counted here from the exact values
    from paddlecraft.arenas.games.solver import pons_positions

    p = pons_positions(tmp_path / "Test_L3_R1")
    moves = judged_moves(make_baseline("random", ConnectFour), p)
    expect = move_rates(p.values, moves)
    assert rand["mistake_rate"] == round(1 - expect["good_move_rate"], 4)
    assert rand["perfect_move_rate"] == round(expect["perfect_move_rate"], 4)
    assert json.loads((tmp_path / "rows.json").read_text())["rows"] == rows
    assert "| end-easy (4) | 0.0 (100.0) |" in bench.table(rows)


def test_pons_benchmark_records_a_runs_figures_for_the_summary(tmp_path, make_scope):
    """A run folder among the players (raw and searching) gets its figures in the run's
    ``judged.json``, one name per test set and player kind, the same numbers as the rows;
    baselines record nothing, and a ``--limit`` subset is never recorded."""
    from selfplay_kit import script

    from paddlecraft.arenas.engine.summary import build_summary, find_runs

    bench = script("pons_benchmark")
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "Test_L3_R1").write_text("\n".join(_pons_line(m) for m in PONS_GAMES))
    run = tmp_path / "run"
    policy = Policy(make_scope("pons"), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7, seed=0)
    policy.save(run / "policy")
    (run / "results.json").write_text(json.dumps({"status": "finished", "metrics": {}}))
    bench.main([str(tmp_path / "sets"), "--players", str(run), "solver", "--limit", "2"])
    assert not (run / "judged.json").exists()
    rows = bench.main([str(tmp_path / "sets"), "--players", str(run), f"{run}:search8", "solver"])
    judged = json.loads((run / "judged.json").read_text())["metrics"]
    raw, searched = rows[0], rows[1]
    assert judged == {
        "pons_end-easy_raw_mistake_rate": raw["mistake_rate"],
        "pons_end-easy_raw_perfect_move_rate": raw["perfect_move_rate"],
        "pons_end-easy_search8_mistake_rate": searched["mistake_rate"],
        "pons_end-easy_search8_perfect_move_rate": searched["perfect_move_rate"],
    }
    summary = build_summary(find_runs([run]), metric="pons_end-easy_search8_mistake_rate")
    assert summary.groups[0].stats.mean == searched["mistake_rate"]
