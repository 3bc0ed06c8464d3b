"""ImageMLPEncoder: the seed README's MLP (input -> hidden_layer_1 -> hidden_layer_2 -> prediction)."""

from __future__ import annotations

import paddle.nn.functional as F
from paddle import nn

from .base import Encoder, InputSpec, LayerSpec, Tensor


def dense(in_features: int, out_features: int) -> LayerSpec:
    """A fully connected logical layer ``in_features -> out_features``."""
    return LayerSpec(
        lambda: nn.Linear(in_features, out_features), ("linear", in_features, out_features)
    )


class ImageMLPEncoder(Encoder):
    """A two-hidden-layer ReLU MLP classifier over flat images.

    Logical layers: ``hidden_layer_1`` (relu), ``hidden_layer_2`` (relu), ``prediction``
    (logits, ``num_classes``). Input ``input``: [B, input_size] float32 (any [B, ...]
    with ``input_size`` elements is flattened). Output ``prediction``: [B, num_classes]
    logits (apply softmax / ``F.cross_entropy``).
    """

    def __init__(
        self,
        scope: str,
        input_size: int = 784,
        hidden_size: int = 784,
        num_classes: int = 10,
    ) -> None:
        super().__init__(scope)
        self.input_size, self.hidden_size, self.num_classes = input_size, hidden_size, num_classes
        self.declare("hidden_layer_1", dense(input_size, hidden_size))
        self.declare("hidden_layer_2", dense(hidden_size, hidden_size))
        self.declare("prediction", dense(hidden_size, num_classes))
        self.declare_input("input", InputSpec((input_size,), flatten=True))
        self.declare_outputs("prediction")

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return f"Flatten images to {self.input_size} float32 values, or use input_size=<n>."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        h = F.relu(self.layers["hidden_layer_1"](x))  # [B, hidden]
        h = F.relu(self.layers["hidden_layer_2"](h))  # [B, hidden]
        return {"prediction": self.layers["prediction"](h)}  # [B, num_classes]
