"""Your own arena's settings dataclass is its Hydra schema, also from ``--config-dir``.

A built-in arena's config file starts from its registered schema; a user's arena file
(``my_conf/arena/distill.yaml``) usually does not, and cannot name a schema nobody
registered. So before Hydra composes, the command reads the arena file the command line
chooses from the user's config folder, and when its ``arena._target_`` is a class the file
allows (``allow_targets``) and that class has a ``Config`` dataclass, stores that class's
schema as ``schema/arena/<name>``. ``conf/config.yaml`` merges ``schema/arena/<chosen
arena>`` (optional) under the arena file, so every dataclass field is a setting, typed and
with its default, even when the file does not repeat it: ``arena.alpha=0.2,0.8`` sweeps
with no ``+``, and a misspelled setting fails while composing.

Nothing here reports a mistake: a file that cannot be read or a class that cannot be
imported is left to the command's own errors.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["chosen_arenas", "config_dir", "register_own_arena_schemas"]


def config_dir(args: Sequence[str]) -> str | None:
    """The folder given by ``--config-dir DIR`` / ``--config-dir=DIR`` / ``-cd DIR``."""
    for i, arg in enumerate(args):
        if arg in ("--config-dir", "-cd") and i + 1 < len(args):
            return args[i + 1]
        for flag in ("--config-dir=", "-cd="):
            if arg.startswith(flag):
                return arg[len(flag) :]
    return None


def chosen_arenas(args: Sequence[str]) -> list[str]:
    """The arena names an ``arena=<name>`` (or ``arena=<a>,<b>`` under ``-m``) chooses."""
    names: list[str] = []
    for arg in args:
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key == "arena":
            names.extend(v.strip() for v in value.split(",") if v.strip())
    return names


def _arena_target(path: Path) -> tuple[str | None, list[str]]:
    """``(arena._target_, allow_targets)`` of an arena file, read as plain YAML."""
    from omegaconf import OmegaConf

    try:
        doc = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception:  # noqa: BLE001 (an unreadable file is the command's error to report)
        return None, []
    if not isinstance(doc, dict):
        return None, []
    arena = doc.get("arena") if isinstance(doc.get("arena"), dict) else doc
    allow = doc.get("allow_targets") or []
    target = arena.get("_target_") if isinstance(arena, dict) else None
    if not isinstance(target, str) or not isinstance(allow, list):
        return None, []
    return target, [str(a) for a in allow]


def _import_target(target: str) -> Any | None:
    """The object ``target`` (``package.module.Name``) names, or None if it cannot be found."""
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 (a package that fails to import: the run's error reports it)
        return None


def register_own_arena_schemas(args: Sequence[str]) -> list[str]:
    """Register the schema of each user arena the command line chooses; return their names.

    Only classes the arena file itself allows (``allow_targets``) are imported, so a
    config folder cannot make the command import anything it would not build anyway.
    """
    folder = config_dir(args)
    if folder is None:
        return []
    from paddlecraft.arenas.engine.schema import register_schemas

    done: list[str] = []
    for name in chosen_arenas(args):
        path = Path(folder) / "arena" / f"{name}.yaml"
        if not path.is_file():
            continue
        target, allow = _arena_target(path)
        if target is None or target not in allow:
            continue
        cls = _import_target(target)
        if not isinstance(cls, type) or not hasattr(cls, "Config"):
            continue
        register_schemas({"schema/arena": {name: cls}})
        done.append(name)
    return done
