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
    "tictactoe-policy": {
        "agent": "policy",
        "metric": "no_loss_rate_vs_minimax",
        "overrides": ["arena=selfplay", "game=tictactoe", "trainer.progress=false"],
        "about": "the self-play arena's tic-tac-toe policy (greedy, no search); share of 200 "
        "games (seats alternating) not lost against perfect minimax",
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
    if name == "tictactoe-policy":
        import numpy as np

        from arenas.games import MinimaxPlayer
        from arenas.selfplay.player import PolicyPlayer
        from arenas.selfplay.tournament import play_pair

        agent = Agent.pretrained(name)
        try:
            outcomes = play_pair(  # +1 / 0 / -1 for the policy
                PolicyPlayer(agent),
                MinimaxPlayer(),
                "tictactoe",
                200,
                np.random.default_rng(0),
            )
            return float((outcomes >= 0).mean())
        finally:
            agent.release_scopes()
    raise KeyError(f"no measurement for zoo entry {name!r}; known: {sorted(ENTRIES)}")
