"""An agent's saved folder: ``agent.json``, ``weights.safetensors`` and
``optimizer.safetensors``, written and read as data (tensors by physical name, the JSON
record, the saved and the new scope, the renames of an older save).

`save`, `load_state` and
`load` call these; what an agent holds stays with it.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import paddle

from paddlecraft.compat import (
    saved_shapes,
    upgrade_names,
    upgrade_opt_names,
    upgrade_target,
    upgrade_targets,
)
from paddlecraft.encoders.tensorio import (
    CheckpointError,
    atomic_write_json,
    load_tensors,
    save_tensors,
)

from .instantiate import check_targets

__all__ = ["read_optimizer", "read_saved_class", "read_weights", "write_saved"]


def write_saved(
    directory: str | os.PathLike,
    weights: Mapping[str, paddle.Tensor],
    opt_tensors: Mapping[str, paddle.Tensor],
    meta: dict[str, Any],
    name: str,
) -> dict[str, str]:
    """Write an agent's folder (atomic files, never pickled); ``meta`` gets the files'
    checksums. Returns ``{file name: sha256}``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    sums = {
        "weights.safetensors": save_tensors(d / "weights.safetensors", weights, {"agent": name})
    }
    sums["optimizer.safetensors"] = save_tensors(
        d / "optimizer.safetensors", opt_tensors, {"agent": name}
    )
    meta["sha256"] = sums
    atomic_write_json(d / "agent.json", meta)
    return sums


def _rename(key: str, old: str, new: str) -> str:
    return new + key[len(old) :] if key.startswith(old + ".") else key


def _rename_opt(key: str, old: str, new: str) -> str:
    acc, _, pname = key.partition("/")
    return f"{acc}/{_rename(pname, old, new)}"


def read_weights(
    directory: str | os.PathLike,
    old_name: str | None,
    name: str,
    renames: Mapping[str, str | None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(weights by physical name under scope ``name``, the ``agent.json`` record) of a saved
    folder; ``old_name`` is the saved scope (default: the record's), ``renames`` the
    upgrade of an older save."""
    d = Path(directory)
    meta = json.loads((d / "agent.json").read_text())
    sums = meta.get("sha256", {})
    arrays, _ = load_tensors(d / "weights.safetensors", sums.get("weights.safetensors"))
    old = old_name or meta["name"]
    if renames:
        arrays = upgrade_names(arrays, old, renames)
    if old != name:  # loaded under another name: rename the scope prefix
        arrays = {_rename(k, old, name): v for k, v in arrays.items()}
    return arrays, meta


def read_optimizer(
    directory: str | os.PathLike,
    meta: Mapping[str, Any],
    old_name: str | None,
    name: str,
    renames: Mapping[str, str | None] | None = None,
) -> dict[str, Any] | None:
    """The saved optimizer tensors under scope ``name`` (None when none were saved)."""
    d = Path(directory)
    if not (d / "optimizer.safetensors").exists():
        return None
    sums = meta.get("sha256", {})
    tensors, _ = load_tensors(d / "optimizer.safetensors", sums.get("optimizer.safetensors"))
    old = old_name or meta["name"]
    if renames:
        tensors = upgrade_opt_names(tensors, old, renames)
    if old != name:
        tensors = {_rename_opt(k, old, name): v for k, v in tensors.items()}
    return tensors


def read_saved_class(
    directory: str | os.PathLike, allow: Iterable[str], base: type
) -> tuple[type, dict[str, Any], dict[str, str | None]]:
    """(the saved agent's class, its ``agent.json`` record brought up to date, the weight
    renames of an older save) of a folder, the class and every ``_target_`` checked against
    the allow-list and the class a subclass of ``base``."""
    d = Path(directory)
    if not (d / "agent.json").is_file():
        raise CheckpointError(
            f"{str(d)!r} holds no saved agent (agent.json missing); pass the folder that "
            "Agent.save wrote, e.g. <run dir>/checkpoints/<step>/agents/<name>"
        )
    meta = json.loads((d / "agent.json").read_text())
    meta["config"] = upgrade_targets(meta["config"])  # pre-0.2 names load too
    target = upgrade_target(meta["class"])
    check_targets({"_target_": target, "config": meta["config"]}, allow)
    module, _, qual = target.rpartition(".")
    klass = getattr(importlib.import_module(module), qual)
    if not (isinstance(klass, type) and issubclass(klass, base)):
        raise CheckpointError(f"{target!r} in {str(d)!r} is not an Agent class")
    shapes = saved_shapes(d / "weights.safetensors")
    renames = klass.upgrade_saved(meta["config"], shapes, meta["name"])
    if renames:
        logging.getLogger("paddlecraft").info(
            "%s: saved by an older PaddleCraft; upgraded on load (%s)",
            d,
            ", ".join(f"{k} -> {v or 'dropped'}" for k, v in renames.items()),
        )
    return klass, meta, renames
