"""How each zoo entry is trained and how its quality is measured (build script and test share it)."""

from __future__ import annotations

from typing import Any

#: name -> the agent's key in the run, the run.py overrides that train it, the metric
ENTRIES: dict[str, dict[str, Any]] = {
    "digits-mlp": {
        "agent": "classifier",
        "metric": "test_accuracy",
        "overrides": [
            "arena=classify",
            "agents.classifier.encoder.hidden_size=128",
            "trainer.progress=false",
        ],
        "about": "the seed's MLP (64-128-128-10) on scikit-learn's 8x8 digits; "
        "accuracy on the seed-0 test split (360 images)",
    },
}


def measure(name: str) -> float:
    """Measure zoo entry ``name`` the way its ``quality.json`` says (deterministic data)."""
    from agents import Agent

    if name == "digits-mlp":
        from craftdata import load_digits

        agent = Agent.pretrained(name)
        try:
            test = load_digits(seed=0).test
            return float((agent.predict(test.x) == test.y).mean())
        finally:
            agent.release_scopes()
    raise KeyError(f"no measurement for zoo entry {name!r}; known: {sorted(ENTRIES)}")
