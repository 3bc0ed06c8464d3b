"""ImageMLPEncoder: the seed README's MLP (input -> hidden_layer_1 -> hidden_layer_2 -> prediction)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import paddle.nn.functional as F
from paddle import nn

from .base import Encoder, InputSpec, LayerSpec, Tensor


def dense(in_features: int, out_features: int) -> LayerSpec:
    """A fully connected logical layer ``in_features -> out_features``."""
    return LayerSpec(
        lambda: nn.Linear(in_features, out_features), ("linear", in_features, out_features)
    )


class ImageMLPEncoder(Encoder):
    """A ReLU MLP over flat inputs (images, board planes), with a class head when asked.

    Logical layers: ``hidden_layer_1`` .. ``hidden_layer_{hidden_layers}`` (relu) and, with
    ``num_classes``, ``prediction`` (logits). Input ``input``: [B, input_size] float32 (any
    [B, ...] with ``input_size`` elements is flattened). Outputs: ``prediction``
    [B, num_classes] (primary, when ``num_classes`` is set) and ``pooled`` [B, hidden_size]
    (the last hidden layer; ``feature_dim = hidden_size``). No per-position output: every
    input element feeds one dense layer.
    """

    def __init__(
        self,
        scope: str,
        input_size: int = 784,
        hidden_size: int = 784,
        num_classes: int | None = 10,
        hidden_layers: int = 2,
    ) -> None:
        super().__init__(scope)
        if hidden_layers < 1:
            raise ValueError(f"ImageMLPEncoder({scope!r}): hidden_layers must be >= 1")
        self.input_size, self.hidden_size, self.num_classes = input_size, hidden_size, num_classes
        self.hidden_layers, self.feature_dim = hidden_layers, hidden_size
        width = input_size
        for i in range(1, hidden_layers + 1):
            self.declare(f"hidden_layer_{i}", dense(width, hidden_size))
            width = hidden_size
        if num_classes is not None:
            self.declare("prediction", dense(hidden_size, num_classes))
        self.declare_input("input", InputSpec((input_size,), flatten=True))
        self.declare_outputs(
            *(("prediction", "pooled") if num_classes is not None else ("pooled",))
        )

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return f"Flatten images to {self.input_size} float32 values, or use input_size=<n>."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        layers = [self.layers[f"hidden_layer_{i}"] for i in range(1, self.hidden_layers + 1)]
        h = _mlp(x, layers, F.relu)  # [B, input_size] -> [B, hidden]
        out = {"pooled": h}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](h)  # [B, num_classes]
        return out

    def numpy_forward(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """A NumPy copy of ``forward_all(x)["pooled"]`` with the weights as they are now,
        for inference that calls the network many times on small batches while the weights
        stay fixed (a search's leaf evaluations): [B, input_size] float32 -> [B, hidden]
        float32, the same values to float32 rounding without Paddle's per-operation cost
        (the search's figure: ``python bench/search_bench.py``, ``frozen_speedup``).
        ``None`` when a hidden layer is not a plain ``nn.Linear`` (adapted or replaced):
        callers then use the Paddle forward. Later changes to the weights do not reach the
        copy."""
        layers = [self.layers[f"hidden_layer_{i}"] for i in range(1, self.hidden_layers + 1)]
        if any(type(lay) is not nn.Linear or lay.bias is None for lay in layers):
            return None
        weights = [(np.array(lay.weight.numpy()), np.array(lay.bias.numpy())) for lay in layers]
        zero = np.float32(0.0)
        dense_layers = [lambda h, w=w, b=b: h @ w + b for w, b in weights]

        def relu(h: np.ndarray) -> np.ndarray:
            return np.maximum(h, zero)

        def pooled(x: np.ndarray) -> np.ndarray:
            x = np.asarray(x, np.float32).reshape(len(x), -1)  # [B, input_size]
            return _mlp(x, dense_layers, relu)

        return pooled


def _mlp(x: Any, layers: Sequence[Callable[[Any], Any]], relu: Callable) -> Any:
    """The MLP's forward over ``layers`` (Paddle layers or NumPy functions, with the
    matching ``relu``): [B, input_size] -> [B, hidden]."""
    h = x
    for layer in layers:
        h = relu(layer(h))  # [B, hidden]
    return h
