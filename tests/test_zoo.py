"""The zoo of trained agents: loaded by name, each shipped figure re-measured."""

from __future__ import annotations

import numpy as np
import pytest

from paddlecraft.agents import Agent
from paddlecraft.agents.zoo import zoo_entries, zoo_path
from paddlecraft.agents.zoo.quality import ENTRIES
from paddlecraft.arenas.zoo import measure

SHIPPED = sorted(zoo_entries())


def test_every_entry_is_shipped_and_small():
    assert SHIPPED == sorted(ENTRIES)
    total = sum(f.stat().st_size for n in SHIPPED for f in zoo_path(n).iterdir())
    assert total < 8 * 2**20  # the zoo ships inside the package: a few MB at most


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_quality_is_reproduced(name):
    recorded = zoo_entries()[name]
    assert recorded["metric"] == ENTRIES[name]["metric"]
    # same weights, same data: only float summation order (threads, CPU) can move it
    assert measure(name) == pytest.approx(recorded["value"], abs=0.01)


def test_pretrained_by_name_under_another_scope():
    a = Agent.pretrained("digits-mlp", name="zoo_copy")
    assert all(p.name.startswith("zoo_copy.") for p in a.parameters())
    x = np.zeros((3, 1, 8, 8), np.float32)
    assert a.predict(x).shape == (3,)


def test_unknown_entry_names_the_available_ones():
    with pytest.raises(KeyError) as e:
        Agent.pretrained("imagenet-resnet152")
    assert "digits-mlp" in str(e.value) and "Agent.load" in str(e.value)
