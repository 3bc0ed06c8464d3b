"""Resume that can change course: which settings a resume may change, applied and recorded.

``python run.py resume=<run dir> agents.classifier.lr=1e-4`` continues the run from its
newest good checkpoint with the new learning rate. The command line's settings are
compared with the run's ``config.yaml``: one that is unchanged is nothing; one in
`MAY_CHANGE` is applied, logged and appended to ``<run dir>/resume_changes.jsonl``
(what changed, from what, to what, at which step), and ``config.yaml`` is updated so a
later resume keeps it; any other change (architecture, data, seed, optimizer) would make
the checkpoint meaningless and is refused with one line.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from paddlecraft.agents.settings import ConfigError

log = logging.getLogger("paddlecraft")

#: settings a resume may change (patterns over dotted keys; ``*`` matches any name)
MAY_CHANGE: tuple[str, ...] = (
    "agents.*.lr",  # learning rates
    "agents.*.lr_scheduler",  # schedules (and their fields)
    "agents.*.lr_scheduler.*",
    "agents.*.grad_clip",  # gradient clipping
    "arena.epochs",  # train longer (a finished run continues)
    "arena.eval_*",  # evaluation settings
    "arena.final_eval_*",
    "arena.eval.games*",  # self-play's evaluation (arena.eval: games, final_games, simulations)
    "arena.eval.final_games*",
    "arena.eval.simulations",
    "trainer.*",  # checkpoints, logging, evaluation cadence, max_steps, progress...
    "data.workers",  # decoding processes (data order does not depend on it)
)
#: command-line keys that are about the resume itself, not the run
NOT_SETTINGS = ("resume",)
CHANGES_FILE = "resume_changes.jsonl"


def upgrade_saved_config(saved: dict[str, Any]) -> dict[str, str]:
    """Bring a run's saved ``config.yaml`` (a plain dict, edited in place) up to today's
    setting names: its arena class's `upgrade_saved` moves the keys it
    renamed (self-play's flat ``arena.collect_workers`` becomes ``arena.workers.count``).
    Returns ``{old: new}`` dotted keys, also logged.

    The arena's ``_target_`` passes the run's allow-list before it is imported.
    """
    from hydra.utils import get_object

    from paddlecraft.agents.instantiate import check_targets

    from .base import Arena

    arena = saved.get("arena")
    target = arena.get("_target_") if isinstance(arena, dict) else None
    if not isinstance(target, str):
        return {}
    check_targets({"_target_": target}, allow=list(saved.get("allow_targets") or []))
    try:
        cls = get_object(target)
    except Exception:  # noqa: BLE001 (validate reports an arena that cannot be imported)
        return {}
    if not (isinstance(cls, type) and issubclass(cls, Arena)):
        return {}
    moved = {f"arena.{k}": f"arena.{v}" for k, v in cls.upgrade_saved(arena).items()}
    for name, agent in (saved.get("agents") or {}).items():  # their own upgrade rules
        upgrade = getattr(_agent_class(agent), "upgrade_saved_settings", None)
        if upgrade is not None:
            upgrade(agent, f"agents.{name}.")
    if moved:
        log.info(
            "resume: the run was saved by an older PaddleCraft; settings renamed (%s)",
            ", ".join(f"{k} -> {v}" for k, v in moved.items()),
        )
    return moved


def _agent_class(agent: Any) -> Any:
    """The class an agent config's ``_target_`` names (None: none, or one not importable)."""
    from hydra.utils import get_object

    target = agent.get("_target_") if isinstance(agent, dict) else None
    if not isinstance(target, str) or not target.startswith("paddlecraft."):
        return None
    try:
        return get_object(target)
    except Exception:  # noqa: BLE001 (validate reports an agent that cannot be imported)
        return None


def may_change(key: str) -> bool:
    """Whether a resume may change the dotted setting ``key``."""
    return any(fnmatch.fnmatchcase(key, p) for p in MAY_CHANGE)


def cannot_change(key: str, old: Any, new: Any) -> str:
    """Why ``key`` may not change in a resume (or a live run's ``set``): one line."""
    return (
        f"{key} cannot change ({old!r} -> {new!r}): the checkpoint was trained with {old!r}. "
        "A resume may change learning rates, schedules, grad_clip, arena.epochs, evaluation "
        "and trainer.* settings; start a new run for this one"
    )


def _value(cfg: DictConfig, key: str) -> Any:
    node = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
    if isinstance(node, DictConfig) or OmegaConf.is_list(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def _targets(node: Any) -> list[str]:
    """Every ``_target_`` (and a data loader's ``name``) inside a plain container."""
    out: list[str] = []
    if isinstance(node, dict):
        for k, v in sorted(node.items()):
            if k in ("_target_", "name") and isinstance(v, str):
                out.append(f"{k}={v}")
            else:
                out += _targets(v)
    elif isinstance(node, list):
        for v in node:
            out += _targets(v)
    return out


def _parse(override: str) -> tuple[str, str, bool]:
    """``(key, value, is_delete)`` of a command-line override."""
    key, _, value = override.partition("=")
    deleting = key.startswith("~")
    return key.lstrip("+~"), value, deleting


def resume_changes(
    cmd: DictConfig, saved: DictConfig, overrides: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The settings the command line changes, ``{key: {"from": old, "to": new}}``.

    Raises `ConfigError` (one line) for a change a resume may not make. A config
    group chosen again (``arena=classify`` as when the run started) is no change; choosing
    another (``data=mnist`` for a run trained on digits) is refused.
    """
    changes: dict[str, dict[str, Any]] = {}
    for o in overrides:
        key, _, deleting = _parse(o)
        if key in NOT_SETTINGS or key.startswith("hydra"):
            continue
        if deleting:
            raise ConfigError(f"resume: {o!r} removes a setting of the run; a resume cannot")
        if "@" in key or _is_group_choice(cmd, key):
            _check_same_choice(cmd, saved, o)
            continue
        try:
            new, old = _value(cmd, key), _value(saved, key)
        except OmegaConfBaseException as e:
            raise ConfigError(f"resume: {o}: {str(e).splitlines()[0]}") from e
        if new == old:
            continue
        if not may_change(key):
            raise ConfigError(f"resume: {cannot_change(key, old, new)}")
        changes[key] = {"from": old, "to": new}
    return changes


def _is_group_choice(cmd: DictConfig, key: str) -> bool:
    """``arena=gan``, ``data=mnist``, ``game=...``: a config group, not a setting."""
    if "." in key:
        return False
    from importlib import resources

    return (resources.files("paddlecraft.conf") / key).is_dir() or key not in cmd


def _check_same_choice(cmd: DictConfig, saved: DictConfig, override: str) -> None:
    key, _, _ = _parse(override)
    package = key.split("@", 1)[1] if "@" in key else key
    if package in cmd and "." not in package:
        new, old = _targets(_value(cmd, package)), _targets(_value(saved, package))
    elif OmegaConf.select(cmd, package, default=None) is not None:
        new, old = _targets(_value(cmd, package)), _targets(_value(saved, package))
    else:  # a group that writes at the top level (game=...): compare what it builds
        whole = ("arena", "agents", "data")
        new = [t for k in whole for t in _targets(_value(cmd, k))]
        old = [t for k in whole for t in _targets(_value(saved, k))]
    if new != old:
        raise ConfigError(
            f"resume: {override} chooses another {key.split('@', 1)[0]} than the run was "
            "trained with; a resume continues the same arena, agents and data. Start a new "
            "run for it, or drop this setting"
        )


def apply_changes(saved: DictConfig, changes: dict[str, dict[str, Any]]) -> DictConfig:
    """``saved`` with the changes set (a copy)."""
    out = OmegaConf.create(OmegaConf.to_container(saved))
    for key, change in changes.items():
        OmegaConf.update(out, key, change["to"], merge=False, force_add=True)
    return out


def record_changes(run_dir: str | Path, changes: dict[str, dict[str, Any]], step: int) -> None:
    """Append the changes to ``resume_changes.jsonl`` and log them."""
    if not changes:
        return
    record = {
        "step": step,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "changes": changes,
    }
    with (Path(run_dir) / CHANGES_FILE).open("a") as f:
        f.write(json.dumps(record) + "\n")
    for key, c in changes.items():
        log.info("resume: %s changed %r -> %r from step %d", key, c["from"], c["to"], step)
