"""Who else uses a logical layer's parameters: other names in the same encoder, the
encoder it borrowed the layer from, the encoders it lent the layer to."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from paddle import nn

__all__ = ["sharers"]


def sharers(
    scope: str,
    layers: Mapping[str, nn.Layer],
    logical: str,
    borrowed: Mapping[str, tuple[Any, str]],
    lent: Sequence[tuple[weakref.ref, str, str]],
) -> list[str]:
    """``scope.logical`` names (across encoders) using the parameters of ``logical``.

    ``layers``: the encoder's built layers by logical name; ``borrowed``: ``{logical:
    (lender encoder, its logical name)}``; ``lent``: ``(weak ref to the borrower, its
    logical name, ours)`` for each loan.
    """
    layer = layers[logical]
    names = [f"{scope}.{n}" for n in layers if n != logical and layers[n] is layer]
    if logical in borrowed:
        enc, lg = borrowed[logical]
        names.append(f"{enc.scope}.{lg}")
    for ref, their, mine in lent:
        enc = ref()
        if enc is not None and mine == logical:
            names.append(f"{enc.scope}.{their}")
    return names
