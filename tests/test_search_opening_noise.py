"""The root noise's concentration in the sampled opening
(``arena.search.opening_dirichlet_alpha``): a training search within a game's first
``temperature_moves`` plies draws its noise as one with that ``dirichlet_alpha`` would,
a later one as the run's own ``dirichlet_alpha``; a run with it resumes bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import keeping, replay_arena, ttt_policy

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import TicTacToe
from paddlecraft.arenas.selfplay.alphazero import _in_opening, search_controller


def _position(plies: int) -> tuple[np.ndarray, np.ndarray]:
    """16 tic-tac-toe boards after the same ``plies`` moves (cells 0, 1, ...)."""
    game = TicTacToe(16)
    for cell in range(plies):
        game.step(np.full(16, cell))
    return game.observe()


def _searched(policy, search: dict, plies: int) -> tuple[np.ndarray, np.ndarray]:
    """The noised root priors and the policy target of one training search at ``plies``."""
    arena = replay_arena(policy, search={"simulations": 12, "temperature_moves": 2, **search})
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(7))
    kept = []
    for s in (act.search, *(act.opening or ())):
        if s is not None:
            s.search = keeping(s.search, kept)
    _, info = act(*_position(plies))
    return kept[-1].priors, info["pi"]


def test_the_opening_draws_its_own_concentration_and_later_plies_the_runs(make_scope):
    seed_everything(0)
    policy = ttt_policy(make_scope("oda"))
    mixed = {"dirichlet_alpha": 1.0, "opening_dirichlet_alpha": 0.3}
    for plies, same, other in ((0, 0.3, 1.0), (1, 0.3, 1.0), (2, 1.0, 0.3), (4, 1.0, 0.3)):
        priors, pi = _searched(policy, mixed, plies)
        want_priors, want_pi = _searched(policy, {"dirichlet_alpha": same}, plies)
        other_priors, _ = _searched(policy, {"dirichlet_alpha": other}, plies)
        assert np.array_equal(priors, want_priors), plies  # the same draw from the same rng
        assert np.array_equal(pi, want_pi), plies
        assert not np.allclose(priors, other_priors), plies
    # a concentrated noise puts most of its weight on fewer moves: the top noised prior of
    # an opening root is higher on the mean than with the run's alpha 1.0
    opening, _ = _searched(policy, mixed, 0)
    flat, _ = _searched(policy, {"dirichlet_alpha": 1.0}, 0)
    assert opening.max(axis=1).mean() > flat.max(axis=1).mean()


def test_unset_or_equal_it_builds_no_searches_of_its_own(make_scope):
    policy = ttt_policy(make_scope("oda"))
    for search in ({}, {"dirichlet_alpha": 0.5, "opening_dirichlet_alpha": 0.5}):
        arena = replay_arena(policy, search=search)
        act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(0))
        assert act.opening is None


def test_a_run_with_it_resumes_bit_identically_and_bad_values_are_refused():
    seed_everything(0)
    policy = ttt_policy("policy")  # check_arena: the agent's name is its key
    search = {"temperature_moves": 3, "opening_dirichlet_alpha": 0.3, "reuse": True}
    arena = replay_arena(policy, search=search)
    assert arena.cfg.search.opening_dirichlet_alpha == 0.3
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)
    for bad in (0.0, -0.3):
        with pytest.raises(ConfigError, match=rf"arena.search.opening_dirichlet_alpha={bad}"):
            replay_arena(policy, search={"opening_dirichlet_alpha": bad})
    # games are played in lockstep; a call that mixed the opening with later plies is refused
    assert _in_opening(np.array([0, 0]), 2) and not _in_opening(np.array([2, 2]), 2)
    with pytest.raises(ValueError, match="mixes opening and later plies"):
        _in_opening(np.array([1, 2]), 2)
