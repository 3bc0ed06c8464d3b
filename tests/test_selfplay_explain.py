"""One position explained: the network's priors and values move by move, the policy's own
searches and the solver's scores, agreeing with each of them computed directly; bad lines
refused by name; the script's table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from paddlecraft.agents import Policy
from paddlecraft.arenas.games import ConnectFour
from paddlecraft.arenas.selfplay import SearchPlayer
from paddlecraft.arenas.selfplay.explain import explain_position, format_report, position_after

ROOT = Path(__file__).resolve().parents[1]

C4_MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": 84,
    "hidden_size": 32,
    "num_classes": 32,
}


@pytest.fixture(scope="module")
def policy():
    # a fixed name: a policy's initial weights follow its seed and its name
    return Policy("explain_policy", encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7, seed=0)


def _board(line: str) -> ConnectFour:
    g = ConnectFour(1)
    for c in line:
        g.step(np.array([int(c)]))
    return g


def test_each_move_is_the_network_search_and_solver_view(policy):
    pytest.importorskip("bitbully")  # the solver extra (in the test extra)
    from paddlecraft.arenas.games.solver import solve_planes

    line = "33333321"  # the centre column filled, then 2 and 1: only column 5 wins
    report = explain_position(policy, line + ":1", simulations=(16, 64))
    planes, masks = _board(line).observe()
    assert report["ply"] == 8 and report["played"] == 1 and report["legal"][3] is False
    exact = solve_planes(planes)[0]
    assert report["solver"][3] is None
    assert [report["solver"][a] for a in (0, 1, 2, 4, 5, 6)] == [
        exact[a] for a in (0, 1, 2, 4, 5, 6)
    ]
    assert max(report["solver"][a] for a in (0, 1, 2, 4, 5, 6)) == report["solver"][5] > 0
    prior, value = policy.priors_and_values(planes, masks)
    np.testing.assert_allclose([report["prior"][a] for a in range(7) if a != 3], prior[0, masks[0]])
    assert report["value"] == pytest.approx(value[0])
    for a in (0, 5):  # the value after a move: the network's, for the opponent, negated
        _, v = policy.priors_and_values(*_board(line + str(a)).observe())
        assert report["value_after"][a] == pytest.approx(-v[0])
    for n in (16, 64):  # what the policy's own search (a SearchPlayer) finds
        s = report["search"][n]
        res = SearchPlayer(policy, "connect_four", n).search.search(
            *ConnectFour.from_planes(planes), rng=np.random.default_rng(0)
        )
        assert s["visits"][3] is None and sum(s["visits"][a] for a in range(7) if a != 3) == n
        assert [s["visits"][a] for a in range(7) if a != 3] == res.visits[0, masks[0]].tolist()
        assert all((q is None) == (v in (None, 0)) for q, v in zip(s["q"], s["visits"]))
        assert report["legal"][s["move"]]
    table = format_report(report).splitlines()
    assert table[0].startswith("33333321:1: ply 8, the first player to move")
    assert len(table) == 1 + 1 + 6 + 1  # head, column names, one row per legal move, key
    assert table[3].startswith("1 (played) | +0 |")


def test_a_move_that_ends_the_game_is_worth_its_result(policy):
    report = explain_position(policy, "010101", simulations=(32,))
    assert report["played"] is None  # no move after ":" given
    assert explain_position(policy, "010101:\u00b2", simulations=(1,))["played"] is None
    assert report["value_after"][0] == 1.0  # the fourth stone in column 0 wins
    assert report["search"][32]["move"] == 0  # the search's tactics play it


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("3333337", r"move 7 \('7'\): expected a digit 0-6"),
        ("3333333", r"move 7 \('3'\): not a legal move there"),
        ("01010101", r"move 8 \('1'\): the game ended at move 7"),
        ("0101010", r"the game is over there"),
        ("33a", r"move 3 \('a'\)"),
        ("3\u00b2", r"move 2 \('\u00b2'\): expected a digit 0-6"),
    ],
)
def test_bad_lines_are_refused_by_name(line, message):
    with pytest.raises(ValueError, match=message):
        position_after("connect_four", line)


def test_without_the_solver_extra_the_report_has_no_scores(policy, monkeypatch):
    monkeypatch.setitem(sys.modules, "bitbully", None)  # as if the extra were not installed
    report = explain_position(policy, "010101", simulations=(8,))
    assert report["solver"] is None and report["value_after"][0] == 1.0
    assert "0 | - | " in format_report(report)


def test_tictactoe_positions_without_a_solver(make_scope):
    ttt = Policy(
        make_scope("ttt_explain"),
        encoder={**C4_MLP, "input_size": 18},
        obs_shape=[3, 3, 2],
        num_actions=9,
        seed=0,
    )
    report = explain_position(ttt, "04", game="tictactoe", simulations=(8,))
    assert report["solver"] is None and report["ply"] == 2
    assert report["legal"] == [False, True, True, True, False, True, True, True, True]
    assert sum(v for v in report["search"][8]["visits"] if v) == 8


def test_script_prints_a_table_per_run(policy, tmp_path, capsys):
    policy.save(tmp_path / "pol")
    spec = importlib.util.spec_from_file_location(
        "selfplay_position", ROOT / "scripts" / "selfplay_position.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main([str(tmp_path / "pol"), "010101", "--simulations", "8", "--game", "connect_four"])
    out = capsys.readouterr().out
    assert out.startswith(f"{tmp_path / 'pol'}\n010101: ply 6, the first player to move")
    assert "0 | " in out and "search8 visits / Q" in out
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "pol"), "3333333"])
    assert "move 7 ('3'): not a legal move there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "nowhere"), "33"])
    assert f"no run or saved policy folder at {tmp_path / 'nowhere'}" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"simulations=\[0\]: each must be >= 1"):
        explain_position(policy, "33", simulations=(0,))
