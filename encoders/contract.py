"""The names of the encoder feature contract: the outputs every agent reads and the input
sizes an agent fills in. What they mean is written down in the docstring of
`paddlecraft.encoders.base.Encoder` (and docs/write-encoder.md).
"""

from __future__ import annotations

__all__ = ["FEATURES", "INPUT_KEYS", "LENGTHS", "POSITIONS", "PREDICTION"]

#: the logical output every encoder gives: pooled features [B, feature_dim]
FEATURES = "pooled"
#: the per-position features [B, T, feature_dim] of encoders with positions
POSITIONS = "hidden"
#: valid positions per item, int64 [B], where padding varies (speech)
LENGTHS = "lengths"
#: the class logits [B, num_classes], only when ``num_classes`` is set
PREDICTION = "prediction"
#: constructor keywords an agent fills in from its data, game or chain (never a config's
#: business): image planes, image side (an int, or (H, W)), flat input size, vocabulary size
INPUT_KEYS = ("in_channels", "image_size", "input_size", "vocab_size")
