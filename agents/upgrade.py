"""Loading what an older PaddleCraft saved: weight renames and saved shapes.

An agent class whose saved layout changed overrides
`upgrade_saved` (it edits the saved config and returns
renames); `load` applies them here to the weights and
the optimizer's accumulators before assigning by physical name.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def upgrade_names(
    arrays: Mapping[str, Any], scope: str, renames: Mapping[str, str | None]
) -> dict[str, Any]:
    """``arrays`` with ``<scope>.<old>...`` keys renamed to ``<scope>.<new>...`` (or dropped)."""
    out: dict[str, Any] = {}
    for key, value in arrays.items():
        for old, new in renames.items():
            prefix = f"{scope}.{old}."
            if key.startswith(prefix):
                key = None if new is None else f"{scope}.{new}.{key[len(prefix) :]}"
                break
        if key is not None:
            out[key] = value
    return out


def upgrade_opt_names(
    tensors: Mapping[str, Any], scope: str, renames: Mapping[str, str | None]
) -> dict[str, Any]:
    """The same for optimizer accumulators keyed ``<kind>/<parameter>``."""
    out: dict[str, Any] = {}
    for key, value in tensors.items():
        acc, sep, pname = key.partition("/")
        if not sep:
            out[key] = value
            continue
        upgraded = upgrade_names({pname: value}, scope, renames)
        out.update({f"{acc}/{k}": v for k, v in upgraded.items()})
    return out


def saved_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Weight shapes by physical name from a safetensors header (no tensor is read)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    except Exception:  # noqa: BLE001 (a missing or damaged file is reported by load_tensors)
        return {}
