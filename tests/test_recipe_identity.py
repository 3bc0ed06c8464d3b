"""The default recipes train bit-identically to the recorded hashes (`scripts/recipe_hash.py`).

Each recipe (``arena=selfplay game=<game>``, seed 0, one thread) on a cut budget: the sha256
of its trained weights and of its final figures must equal the ones recorded on this CPU
model in ``tests/data/recipe_hashes.json``. A run is bit-reproducible on one CPU model only:
on a model with no record the test fails saying so (record it from a commit known to be
right: ``python scripts/recipe_hash.py --budget <b> --record tests/data/recipe_hashes.json``).
The fast tier's check, on a CPU model with no record, trains twice and asserts the two runs
are bit-identical (and warns with the record command), so a machine of another kind can still
tell a nondeterministic change from a clean one.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from selfplay_kit import script

RECORDED = Path(__file__).parent / "data" / "recipe_hashes.json"


def _check(budget: str, recipe: str, unrecorded_twice: bool = False) -> None:
    rh = script("recipe_hash")
    model = rh.cpu_model()
    table = json.loads(RECORDED.read_text())
    want = table.get(model, {}).get(budget, {}).get(recipe)
    if want is None:
        missing = (
            f"no {budget} hash of {recipe} recorded for the CPU {model!r} (recorded: "
            f"{sorted(table)}): a run is bit-identical on one CPU model only; record one from "
            f"a commit known to be right with python scripts/recipe_hash.py --budget {budget} "
            f"--recipe {recipe} --record {RECORDED.relative_to(RECORDED.parents[2])}"
        )
        if not unrecorded_twice:
            pytest.fail(missing)
        warnings.warn(missing, stacklevel=2)
        first, second = (rh.hashes(budget, [recipe])[recipe] for _ in range(2))
        assert first == second, f"{recipe} ({budget}): two runs of one commit differ on {model}"
        return
    got = rh.hashes(budget, [recipe])[recipe]
    assert got == want, f"{recipe} ({budget}) no longer trains as recorded on {model}"


def test_the_tictactoe_default_trains_as_recorded():
    """The fast tier's check: tic-tac-toe's default on the tiny budget (PPO, the league)."""
    _check("tiny", "tictactoe", unrecorded_twice=True)


@pytest.mark.slow
@pytest.mark.parametrize("budget", ["tiny", "short"])
@pytest.mark.parametrize("recipe", ["connect_four", "connect_four_ppo", "tictactoe"])
def test_each_default_recipe_trains_as_recorded(recipe, budget):
    """Connect Four's AlphaZero default, its PPO recipe and tic-tac-toe's, on both budgets."""
    _check(budget, recipe)
