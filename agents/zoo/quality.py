"""How each zoo entry is trained: its run.py overrides and the metric its quality names.

The measurement itself needs the arenas' data and games, so it lives a layer up, in
`paddlecraft.arenas.zoo.measure` (agents never import arenas).
"""

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
    "shapes-captioner": {
        "agent": "captioner",
        "metric": "test_exact_match",
        "overrides": ["arena=caption", "trainer.progress=false"],
        "about": "the caption arena's default captioner (CNN 3x64x64 + GRU decoder, greedy) "
        "on the captioned shapes; share of the seed-0 test split's 500 images whose caption "
        "is exactly right",
    },
    "spoken-digit-recognizer": {
        "agent": "recognizer",
        "metric": "test_exact_match",
        "overrides": ["arena=caption", "chain=digits", "trainer.progress=false"],
        "about": "the digits chain's recognizer (log-mel conv + BiGRU, word CTC) on spoken "
        "digit words; share of 360 eSpeak NG clips by voices held out of training "
        "transcribed exactly",
    },
}

SEED = 0  # every entry is trained and measured on the seed-0 splits
