"""The default recipes train bit-identically to the recorded hashes (`scripts/recipe_hash.py`).

Each recipe (``arena=selfplay game=<game>``, seed 0, one thread) on a cut budget: the sha256
of its trained weights and of its final figures must equal the ones recorded on this CPU
model in ``tests/data/recipe_hashes.json``. A run is bit-reproducible on one CPU model only:
on a model with no record the test fails saying so (record it from a commit known to be
right: ``python scripts/recipe_hash.py --budget <b> --record tests/data/recipe_hashes.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from selfplay_kit import script

RECORDED = Path(__file__).parent / "data" / "recipe_hashes.json"


def _check(budget: str, recipe: str) -> None:
    rh = script("recipe_hash")
    model = rh.cpu_model()
    table = json.loads(RECORDED.read_text())
    want = table.get(model, {}).get(budget, {}).get(recipe)
    if want is None:
        pytest.fail(
            f"no {budget} hash of {recipe} recorded for the CPU {model!r} (recorded: "
            f"{sorted(table)}): a run is bit-identical on one CPU model only; record one from "
            f"a commit known to be right with python scripts/recipe_hash.py --budget {budget} "
            f"--recipe {recipe} --record {RECORDED.relative_to(RECORDED.parents[2])}"
        )
    got = rh.hashes(budget, [recipe])[recipe]
    assert got == want, f"{recipe} ({budget}) no longer trains as recorded on {model}"


def test_the_tictactoe_default_trains_as_recorded():
    """The fast tier's check: tic-tac-toe's default on the tiny budget (PPO, the league)."""
    _check("tiny", "tictactoe")


@pytest.mark.slow
@pytest.mark.parametrize("budget", ["tiny", "short"])
@pytest.mark.parametrize("recipe", ["connect_four", "connect_four_ppo", "tictactoe"])
def test_each_default_recipe_trains_as_recorded(recipe, budget):
    """Connect Four's AlphaZero default, its PPO recipe and tic-tac-toe's, on both budgets."""
    _check(budget, recipe)
