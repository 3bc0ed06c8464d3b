"""The policy softmax temperature (``agents.policy.search_policy_temperature``,
`prior_tempered`): a searching player's priors taken to the power ``1 / t`` and renormalised;
the setting checked, saved and searched with by players, never by training searches; the
targets script judges a saved policy with it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from selfplay_kit import (
    TTT_MLP,
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
from paddlecraft.arenas.games import TicTacToe
from paddlecraft.arenas.games.evaluators import prior_tempered
from paddlecraft.arenas.games.search import PUCTSearch, played_moves
from paddlecraft.arenas.selfplay import SearchPlayer
from paddlecraft.arenas.selfplay.alphazero import search_controller
from tests.test_search import random_positions
from tests.test_search_opening_noise import _position


def _fixed(priors, values, plies=None):
    out = (np.asarray(priors, float), np.asarray(values, float))
    out = out if plies is None else (*out, np.asarray(plies, float))
    return lambda planes, masks: out


def test_priors_are_a_softmax_of_the_logits_over_the_temperature():
    """Priors 0.8 / 0.2 / 0 (an illegal move): at t = 2 their square roots, 2/3 and 1/3;
    at t = 0.5 their squares, 0.64 / 0.68 and 0.04 / 0.68; values and plies left as given."""
    net = _fixed([[0.8, 0.2, 0.0], [0.5, 0.25, 0.25]], [0.3, -0.6], [7.0, 2.0])
    planes, masks = np.zeros((2, 1, 3, 2)), np.ones((2, 3), bool)
    p, v, m = prior_tempered(net, 2.0)(planes, masks)
    np.testing.assert_allclose(p[0], [2 / 3, 1 / 3, 0.0])
    np.testing.assert_allclose(p[1], np.sqrt([0.5, 0.25, 0.25]) / np.sqrt([0.5, 0.25, 0.25]).sum())
    assert v.tolist() == [0.3, -0.6] and m.tolist() == [7.0, 2.0]
    np.testing.assert_allclose(
        prior_tempered(net, 0.5)(planes, masks)[0][0], [0.64 / 0.68, 0.04 / 0.68, 0]
    )
    # the same as dividing the logits by t before the softmax
    logits = np.log([0.5, 0.25, 0.25]) + 1.7
    soft = np.exp(logits / 1.6) / np.exp(logits / 1.6).sum()
    np.testing.assert_allclose(prior_tempered(net, 1.6)(planes, masks)[0][1], soft)
    assert prior_tempered(net, 1.0) is net  # 1: the network itself, no extra work
    with pytest.raises(ValueError, match="temperature=0.0, expected > 0"):
        prior_tempered(net, 0.0)


def test_search_policy_temperature_is_checked_saved_and_searched_with_by_players(
    make_scope, tmp_path
):
    with pytest.raises(ConfigError, match=r"search_policy_temperature=0.0: must be > 0"):
        Policy(make_scope("b"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9,
               search_policy_temperature=0)  # fmt: skip
    policy = opinionated(Policy(make_scope("t"), encoder=TTT_MLP, obs_shape=[3, 3, 2],
                                num_actions=9, seed=0, search_policy_temperature=3.0))  # fmt: skip
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("l"))
    assert loaded.cfg.search_policy_temperature == 3.0
    cur, mask = random_positions(TicTacToe, 2, seed=3)  # 12 positions after two moves
    planes, legal = TicTacToe.planes(cur, mask), TicTacToe.legal(mask)
    settings = loaded.search_settings()
    hot = PUCTSearch(TicTacToe, simulations=12, **{**settings,
                     "evaluate": prior_tempered(settings["evaluate"], 3.0)})  # fmt: skip
    player = SearchPlayer(loaded, "tictactoe", 12, move="visits", cache=False)
    assert player.policy_temperature == 3.0
    res = player.search.search(cur, mask)
    np.testing.assert_array_equal(res.visits, hot.search(cur, mask).visits)
    plain = PUCTSearch(TicTacToe, simulations=12, **settings).search(cur, mask)
    assert not np.array_equal(res.visits, plain.visits)  # the setting changes the trees
    moves = player.act(planes, legal)
    assert moves.tolist() == played_moves(res, "visits").tolist()
    # a policy saved before the setting existed searches with the network's priors
    meta = json.loads((tmp_path / "p" / "agent.json").read_text())
    del meta["config"]["search_policy_temperature"]
    (tmp_path / "p" / "agent.json").write_text(json.dumps(meta))
    old = Agent.load(tmp_path / "p", name=make_scope("o"))
    assert SearchPlayer(old, "tictactoe", 12).policy_temperature == 1.0


def test_the_policy_setting_is_a_players_and_leaves_training_searches_alone():
    """``agents.policy.search_policy_temperature`` is a player's setting: a training
    search's targets are the same with it."""
    seed_everything(0)
    policy = opinionated(ttt_policy("policy", search_policy_temperature=3.0))
    search = replay_arena(policy, search={"simulations": 24}).cfg.search
    cur, mask = random_positions(TicTacToe, 1, seed=1)
    planes, masks = TicTacToe.planes(cur, mask), TicTacToe.legal(mask)
    pis, visits = [], []
    for t in (3.0, 1.0):  # the same weights, the setting changed in between
        policy.cfg.search_policy_temperature = t
        ctrl = search_controller(policy, TicTacToe, search, np.random.default_rng(0))
        pis.append(ctrl(planes, masks)[1]["pi"])
        player = SearchPlayer(policy, "tictactoe", 24, cache=False)
        visits.append(player.search.search(cur, mask).visits)
    np.testing.assert_array_equal(pis[0], pis[1])
    assert not np.array_equal(visits[0], visits[1])  # while the players' searches differ


def test_training_searches_temper_with_the_arenas_setting_and_resume_bit_identically(
    monkeypatch,
):
    """``arena.search.policy_temperature``: every training search reads the priors
    tempered (the same targets as a search whose network gives tempered priors); a value
    <= 0 is refused naming the setting; a run with it resumes bit for bit."""
    seed_everything(0)
    policy = opinionated(ttt_policy("policy"))  # check_arena: the agent's name is its key
    arena = replay_arena(policy, search={"simulations": 24, "policy_temperature": 2.5})
    cur, mask = random_positions(TicTacToe, 1, seed=1)
    planes, masks = TicTacToe.planes(cur, mask), TicTacToe.legal(mask)

    def targets(cfg):
        ctrl = search_controller(policy, TicTacToe, cfg, np.random.default_rng(0))
        return ctrl(planes, masks)[1]["pi"]

    hot = targets(arena.cfg.search)
    plain_cfg = replay_arena(policy, search={"simulations": 24}).cfg.search
    assert not np.array_equal(hot, targets(plain_cfg))
    settings = policy.search_settings

    def tempered_network(frozen=False):
        out = settings(frozen)
        return {**out, "evaluate": prior_tempered(out["evaluate"], 2.5)}

    monkeypatch.setattr(policy, "search_settings", tempered_network)
    np.testing.assert_array_equal(hot, targets(plain_cfg))
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=r"arena.search.policy_temperature.*> 0"):
        replay_arena(ttt_policy("bad"), search={"policy_temperature": 0.0})
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)


def test_the_targets_script_judges_a_saved_policy_with_it(
    make_scope, tmp_path, monkeypatch, capsys
):
    """``scripts/selfplay_targets.py --policy-temperature T``: the saved policy is judged as
    if saved with it, without retraining; T <= 0 is refused before any work."""
    script = targets_script()
    ttt_policy(make_scope("saved")).save(tmp_path / "run" / "policy")
    seen = []
    monkeypatch.setattr(
        script, "judge_policy", lambda p, *a: seen.append(p.cfg.search_policy_temperature) or {}
    )
    script.judge(tmp_path / "run", 4, policy_temperature=1.5)
    script.judge(tmp_path / "run", 4)
    assert seen == [1.5, 1.0]
    err = refused_by_targets_script(monkeypatch, capsys, tmp_path, "--policy-temperature", "0")
    assert "--policy-temperature 0.0: must be > 0" in err


def test_the_opening_searches_with_its_own_temperature_and_later_plies_the_runs():
    """``arena.search.opening_policy_temperature``: a training search within a game's first
    ``temperature_moves`` plies tempers as one with that ``policy_temperature`` would, a
    later one as the run's own; unset or equal, no searches of its own; a run with it
    resumes bit for bit; a value <= 0 is refused."""
    seed_everything(0)
    policy = opinionated(ttt_policy("policy"))  # check_arena: the agent's name is its key
    mixed = {"policy_temperature": 2.5, "opening_policy_temperature": 1.0}

    def target(search: dict, plies: int) -> np.ndarray:
        arena = replay_arena(policy, search={"simulations": 24, "temperature_moves": 2, **search})
        act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(7))
        return act(*_position(plies))[1]["pi"]  # 16 boards after the same moves

    for plies, same, other in ((0, 1.0, 2.5), (1, 1.0, 2.5), (2, 2.5, 1.0), (3, 2.5, 1.0)):
        pi = target(mixed, plies)
        np.testing.assert_array_equal(pi, target({"policy_temperature": same}, plies))
        assert not np.array_equal(pi, target({"policy_temperature": other}, plies)), plies
    for search in ({}, {"policy_temperature": 1.5, "opening_policy_temperature": 1.5}):
        cfg = replay_arena(policy, search=search).cfg.search
        assert search_controller(policy, TicTacToe, cfg, np.random.default_rng(0)).opening is None
    with pytest.raises(ConfigError, match=r"arena.search.opening_policy_temperature=0.0"):
        replay_arena(ttt_policy("bad"), search={"opening_policy_temperature": 0.0})
    arena = replay_arena(policy, search={"temperature_moves": 3, "reuse": True, **mixed})
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)
