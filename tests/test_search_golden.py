"""The one search tree reproduces, exactly, what the two searches it replaced returned: the
rollout-MCTS anchors' moves (and how many random numbers they drew) and every array of the
PUCT search's results, as recorded in ``tests/data/search_golden.npz`` at commit 6416be1
(see ``tests/search_golden.py`` for how; the PUCT arrays re-recorded there on 2026-12-02
with an evaluator exact on every CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import search_golden as golden


@pytest.fixture(scope="module")
def recorded() -> dict[str, np.ndarray]:
    with np.load(golden.FIXTURE) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("name", golden.GAMES)
def test_positions_are_the_recorded_ones(recorded, name):
    assert np.array_equal(golden.random_positions(name), recorded[f"{name}/positions"])


@pytest.mark.parametrize("case", golden.MCTS_CASES, ids=lambda c: f"mcts{c[1]}-{c[0]}")
@pytest.mark.parametrize("name", golden.GAMES)
def test_rollout_mcts_plays_the_recorded_moves(recorded, name, case):
    tag, sims, count, batch, seed = case
    moves, after = golden.mcts_moves(name, recorded[f"{name}/positions"], sims, count, batch, seed)
    assert np.array_equal(moves, recorded[f"{name}/mcts{sims}/{tag}"])
    # the same random numbers drawn: the generator is left in the same state
    assert np.array_equal(after, recorded[f"{name}/mcts{sims}/{tag}/rng_after"])


@pytest.mark.parametrize("name", golden.GAMES)
def test_puct_search_returns_the_recorded_arrays(recorded, name):
    got = golden.puct_results(name, recorded[f"{name}/positions"])
    assert len(got) == 2 * len(golden.SEARCH_FIELDS)
    for key, value in got.items():
        want = recorded[f"{name}/puct/{key}"]
        assert value.dtype == want.dtype and np.array_equal(value, want), key
