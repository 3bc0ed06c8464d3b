"""Which parameters an agent owns: its own scope's, never a layer borrowed from another
agent's encoder (so each parameter is updated once, by its owner's optimizer).

Functions of data (the agent's name, its parameters and sublayers); `Agent` calls them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from paddle import nn

from paddlecraft.encoders.base import Encoder

__all__ = ["borrowed_params", "owned", "parameter_table"]


def borrowed_params(sublayers: Iterable[nn.Layer]) -> dict[int, str]:
    """``{id(param): lender scope}`` for layers these encoders borrowed from outside them."""
    sublayers = list(sublayers)
    mine = {id(layer) for layer in sublayers}
    out: dict[int, str] = {}
    for layer in sublayers:
        if not (isinstance(layer, Encoder) and layer.built):
            continue
        for logical, (lender, _) in layer.borrowed.items():
            if id(lender) not in mine:  # sharing between two of my own encoders is mine
                for p in layer.layers[logical].parameters():
                    out[id(p)] = lender.scope
    return out


def owned(name: str, params: Iterable, borrowed: Mapping[int, str]) -> list:
    """``params`` whose physical name starts with ``<name>.``, not ``borrowed``, deduplicated."""
    prefix = f"{name}."
    seen: set[int] = set()
    out = []
    for p in params:
        if p.name.startswith(prefix) and id(p) not in seen and id(p) not in borrowed:
            seen.add(id(p))
            out.append(p)
    return out


def parameter_table(
    title: str, params: Iterable, own: set[int], lenders: Mapping[int, str], owner: str
) -> str:
    """A table of ``params``: physical name, shape, trainable, and which optimizer updates
    it (``owner`` for those in ``own``, else the lender's)."""
    rows = []
    for p in params:
        who = (
            owner
            if id(p) in own
            else f"{lenders.get(id(p), p.name.split('.')[0])} (borrowed; its owner's optimizer)"
        )
        rows.append((p.name, "x".join(map(str, p.shape)), str(not p.stop_gradient), who))
    head = ("physical", "shape", "trainable", "optimizer")
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
    ]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [title, fmt.format(*head)]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(lines)
