"""First-play urgency (``agents.policy.search_fpu``, `PUCTSearch` ``fpu_reduction``): what an
unvisited move is worth to the selection rule: 0 (AlphaZero's draw), or Leela Chess Zero's
reduced parent value; the batched search equals the plain one-position loop with it; the
policy setting checked, saved and searched with, in training too; a run with it resumes bit
for bit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from selfplay_kit import (
    opinionated,
    refused_by_targets_script,
    replay_arena,
    targets_script,
    ttt_policy,
)

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour, TicTacToe, random_legal
from paddlecraft.arenas.games.search import (
    Children,
    PUCTSearch,
    played_moves,
    puct,
    search_one,
)
from paddlecraft.arenas.selfplay import SearchPlayer
from paddlecraft.arenas.selfplay.alphazero import search_controller
from tests.test_search import _linear_evaluator, random_positions
from tests.test_search_moves import TTT_MLP


def _node(visits, total, prior) -> Children:
    visits, total, prior = (np.asarray([x], float) for x in (visits, total, prior))
    legal = np.ones(visits.shape, bool)
    return Children(visits, total, prior, legal, visits > 0, False)


def test_unvisited_move_value_decides_between_reading_on_and_trying_a_new_move():
    """A node its mover is winning: move 0 visited 4 times at Q 0.4 (prior 0.8), move 1
    never (prior 0.2). sqrt(1 + 4) = 2.236: move 0 scores 0.4 + 1.5 * 0.8 * 2.236 / 5 =
    0.937; move 1 scores its first-play value + 1.5 * 0.2 * 2.236 = + 0.671."""
    node = _node([4, 0], [1.6, 0.0], [0.8, 0.2])
    assert puct(node, 1.5, None).tolist() == [0]  # worth 0 (a draw): 0.671 < 0.937
    # worth the node's mean 0.4: 1.071 > 0.937, the untried move is read
    assert puct(node, 1.5, None, fpu_reduction=0.0).tolist() == [1]
    # worth 0.4 - 0.5 * sqrt(0.8) = -0.047: 0.624 < 0.937
    assert puct(node, 1.5, None, fpu_reduction=0.5).tolist() == [0]
    # the reduction crosses over where 0.4 - r * sqrt(0.8) + 0.671 = 0.937
    r = (0.4 + 1.5 * 0.2 * math.sqrt(5) - (0.4 + 1.5 * 0.8 * math.sqrt(5) / 5)) / math.sqrt(0.8)
    assert puct(node, 1.5, None, fpu_reduction=r - 1e-6).tolist() == [1]
    assert puct(node, 1.5, None, fpu_reduction=r + 1e-6).tolist() == [0]
    # a node with nothing visited takes its highest prior whatever the rule
    fresh = _node([0, 0, 0], [0, 0, 0], [0.2, 0.5, 0.3])
    assert {int(puct(fresh, 1.5, None, fpu_reduction=f)[0]) for f in (None, 0.0, 1.0)} == {1}


@pytest.mark.parametrize("game", [TicTacToe, ConnectFour])
@pytest.mark.parametrize("fpu", [0.0, 0.3])
def test_batched_search_with_fpu_equals_the_plain_one_position_loop(game, fpu):
    cur, mask = random_positions(game, 3 if game is TicTacToe else 8, seed=5)
    ev = _linear_evaluator(game, seed=2)
    res = PUCTSearch(game, ev, simulations=80, discount=0.95, fpu_reduction=fpu).search(cur, mask)
    plain = PUCTSearch(game, ev, simulations=80, discount=0.95).search(cur, mask)
    assert not np.array_equal(res.visits, plain.visits)  # the setting changes the trees
    for i, (c, m) in enumerate(zip(cur, mask)):
        ref = search_one(game, ev, int(c), int(m), 80, discount=0.95, fpu_reduction=fpu)
        assert np.array_equal(res.visits[i], ref), i


def test_search_fpu_is_checked_saved_and_searched_with(make_scope, tmp_path):
    with pytest.raises(ConfigError, match=r"search_fpu=-0.5: must be null .* >= 0"):
        Policy(make_scope("b"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9,
               search_fpu=-0.5)  # fmt: skip
    with pytest.raises(ValueError, match="fpu_reduction >= 0 or None"):
        PUCTSearch(TicTacToe, lambda p, m: None, fpu_reduction=-1.0)
    policy = Policy(make_scope("f"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9,
                    seed=0, search_fpu=0.25)  # fmt: skip
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("l"))
    settings = loaded.search_settings()
    assert loaded.cfg.search_fpu == 0.25 and settings["fpu_reduction"] == 0.25
    # the searching player searches with it: its move is the FPU search's, position by position
    rng = np.random.default_rng(0)
    g = TicTacToe(16)
    g.step(random_legal(g.legal_mask(), rng))
    res = PUCTSearch(TicTacToe, simulations=24, **settings).search(g.cur, g.mask)
    player = SearchPlayer(loaded, "tictactoe", 24, move="visits")
    moves = player.act(TicTacToe.planes(g.cur, g.mask), TicTacToe.legal(g.mask))
    assert moves.tolist() == played_moves(res, "visits").tolist()
    plain = PUCTSearch(TicTacToe, simulations=24, **{**settings, "fpu_reduction": None})
    assert moves.tolist() != played_moves(plain.search(g.cur, g.mask), "visits").tolist()
    # a policy saved before the setting existed searches as it did: unvisited moves worth 0
    meta = json.loads((tmp_path / "p" / "agent.json").read_text())
    del meta["config"]["search_fpu"]
    (tmp_path / "p" / "agent.json").write_text(json.dumps(meta))
    old = Agent.load(tmp_path / "p", name=make_scope("o"))
    assert old.cfg.search_fpu is None and old.search_settings()["fpu_reduction"] is None


def test_training_searches_use_it_and_a_run_with_it_resumes_bit_identically():
    seed_everything(0)
    # check_arena: the agent's name is its key
    policy = opinionated(ttt_policy("policy", search_fpu=0.0))
    arena = replay_arena(policy, search={"simulations": 24, "reuse": True})
    g = TicTacToe(8)
    g.step(random_legal(g.legal_mask(), np.random.default_rng(1)))
    planes, masks = TicTacToe.planes(g.cur, g.mask), TicTacToe.legal(g.mask)
    targets = []
    for fpu in (0.0, None):  # the same weights, unvisited moves worth the mean, then 0
        policy.cfg.search_fpu = fpu
        ctrl = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(0))
        targets.append(ctrl(planes, masks)[1]["pi"])
    policy.cfg.search_fpu = 0.0
    assert not np.allclose(targets[0], targets[1])  # the training searches' targets differ
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)


def test_the_targets_script_judges_a_saved_policy_with_it(
    make_scope, tmp_path, monkeypatch, capsys
):
    """``scripts/selfplay_targets.py --fpu R``: the saved policy is judged as if saved with
    ``search_fpu=R``, without retraining; a negative R is refused before any work."""
    script = targets_script()
    ttt_policy(make_scope("saved")).save(tmp_path / "run" / "policy")
    seen = []
    monkeypatch.setattr(script, "judge_policy", lambda p, *a: seen.append(p.cfg.search_fpu) or {})
    script.judge(tmp_path / "run", 4, fpu=0.25)
    script.judge(tmp_path / "run", 4)
    assert seen == [0.25, None]
    err = refused_by_targets_script(monkeypatch, capsys, tmp_path, "--fpu", "-0.5")
    assert "--fpu -0.5: the reduction must be >= 0" in err
