"""What an encoder declares before ``build()``: logical layers, shared slots, logical inputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import paddle
from paddle import nn

from paddlecraft.errors import EncoderInputError

from .naming import build_named


@dataclass(eq=False)
class LayerSpec:
    """A logical layer before ``build()``: a factory and the mapping it computes.

    Specs compare by identity: assigning one spec to two logical names makes them one
    physical layer. ``signature`` (e.g. ``("linear", 784, 784)``) is what a layer maps
    from and to; a spec may only fill a logical slot with the same signature.
    """

    factory: Callable[[], nn.Layer]
    signature: tuple

    def __repr__(self) -> str:
        return f"LayerSpec{self.signature}"


@dataclass(frozen=True, eq=False)
class SharedSpec:
    """A logical slot filled by another encoder's built layer (see `Encoder.share`).

    ``encoder`` is that other `Encoder` (typed as the
    layer it is, so that this module does not import the one that uses it);
    ``signature`` is what it declared for ``logical`` (checked against the borrower's)."""

    encoder: nn.Layer
    logical: str
    signature: tuple


@dataclass(frozen=True)
class InputSpec:
    """A logical input: shape without the batch axis (None = any size) and allowed dtypes."""

    shape: tuple[int | None, ...]
    dtypes: tuple[str, ...] = ("float32",)
    flatten: bool = False  # accept any trailing shape with the same element count

    def allowed_dtypes(self) -> tuple[str, ...]:
        """``dtypes``, with float32 meaning Paddle's default float dtype (float64 for FD checks)."""
        default = paddle.get_default_dtype()
        return tuple(default if d == "float32" else d for d in self.dtypes)

    def describe(self) -> str:
        dims = ", ".join("any" if d is None else str(d) for d in self.shape)
        return f"[batch, {dims}] {'/'.join(self.allowed_dtypes())}"


def check_inputs(
    who: str,
    specs: Mapping[str, InputSpec],
    inputs: tuple,
    fix: Callable[[str, InputSpec], str],
) -> list[Any]:
    """Check (and convert numpy / flatten) an encoder's inputs against its `InputSpec` s.

    Raises `EncoderInputError` naming the encoder, the logical input, what was
    expected, what came, and ``fix(name, spec)``'s hint. Static Values pass through.
    """
    items = list(specs.items())
    if len(inputs) != len(items):
        raise EncoderInputError(
            f"{who}: expected {len(items)} input(s) ({', '.join(n for n, _ in items)}), "
            f"got {len(inputs)}"
        )
    dynamic = paddle.in_dynamic_mode()
    out = []
    for (name, spec), x in zip(items, inputs):
        if isinstance(x, np.ndarray):
            x = paddle.to_tensor(x)
        if not dynamic or not isinstance(x, paddle.Tensor):
            out.append(x)  # static Values: shapes were fixed by paddle.static.data
            continue
        # runs on every forward pass: plain Python on the shape, no numpy, no dtype strings
        shape = x.shape
        ok = len(shape) >= 1 and x.dtype in [getattr(paddle, d) for d in spec.allowed_dtypes()]
        if ok and spec.flatten:
            ok = math.prod(shape[1:]) == math.prod(spec.shape)
            if ok and len(shape) != 1 + len(spec.shape):
                x = x.reshape([shape[0], *spec.shape])
        elif ok:
            ok = len(shape) == 1 + len(spec.shape) and all(
                d is None or d == s for d, s in zip(spec.shape, shape[1:])
            )
        if not ok:
            dtype = str(x.dtype).replace("paddle.", "")
            raise EncoderInputError(
                f"{who} input {name!r}: expected {spec.describe()}, got {list(shape)} {dtype}. "
                f"{fix(name, spec)}"
            )
        out.append(x)
    return out


def check_signature(who: str, name: str, want: tuple, got: tuple, source: str) -> None:
    """Refuse filling logical layer ``name`` (declared to map ``want``) with a layer from
    ``source`` that maps ``got``."""
    if tuple(got) != tuple(want):
        raise ValueError(
            f"{who}: logical layer {name!r} maps {want} but {source} maps {got}; "
            "shared layers must have the same input and output sizes (for the MLP, "
            "hidden_layer_1 and hidden_layer_2 can be shared only when input_size equals "
            "hidden_size, e.g. 784)."
        )


def build_layers(
    scope: str,
    who: str,
    model: Mapping[str, LayerSpec | SharedSpec],
    declared: Mapping[str, tuple],
) -> dict[str, nn.Layer]:
    """The layers of an encoder's ``model``, by logical name: one layer per spec object (a
    spec under two names is one layer, named after the first), a shared slot the other
    encoder's layer (built first if needed); every signature checked against ``declared``."""
    layers: dict[str, nn.Layer] = {}
    made: dict[int, nn.Layer] = {}
    for name, spec in model.items():
        if isinstance(spec, SharedSpec):
            other = spec.encoder
            if not other.built:
                other.build()
            check_signature(
                who,
                name,
                declared[name],
                spec.signature,
                f"{other.scope}.{spec.logical}",
            )
            layers[name] = other.layers[spec.logical]
        elif isinstance(spec, LayerSpec):
            check_signature(who, name, declared[name], spec.signature, "the assigned spec")
            if id(spec) not in made:
                made[id(spec)] = build_named(f"{scope}.{name}", spec.factory)
            layers[name] = made[id(spec)]
        else:
            raise TypeError(
                f"{who}: model[{name!r}] must be a LayerSpec (e.g. another entry "
                f"of enc.model), got {type(spec).__name__}"
            )
    return layers
