"""Checks of a composed config before anything is built: targets, devices, ranges, settings.

``validate`` runs first in every run (``run.py``, `run_from_config`); each
refusal is a `ConfigError` naming the setting, what was
expected and the fix, raised before any work starts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from paddlecraft.agents.amp import check_amp
from paddlecraft.agents.device import resolve_device
from paddlecraft.agents.instantiate import check_targets
from paddlecraft.agents.settings import ConfigError, make_settings
from paddlecraft.errors import command

from .checkpoint import list_checkpoints


def validate(cfg: DictConfig) -> None:
    """Check everything that can be checked before building: targets, devices, resume dir."""
    check_targets(cfg, allow=list(cfg.get("allow_targets") or []))
    agents = cfg.get("agents") or {}
    if not agents:
        raise ConfigError(
            f"the config has no agents: choose an arena, e.g. {command()} arena=classify"
        )
    for name, acfg in agents.items():
        device = resolve_device(acfg.get("device", "cpu"), setting=f"agents.{name}.device")
        check_amp(acfg.get("amp", "off"), acfg.get("amp_level", "O1"), device, f"agents.{name}.amp")
        check_settings(acfg, f"agents.{name}", explicit=("name",))
    check_settings(cfg.arena, "arena", explicit=("agents", "seed"))
    check_ranges(cfg)
    check_extras(cfg)
    resume = cfg.get("resume")
    if resume:
        d = Path(resume)
        if not d.is_dir():
            raise ConfigError(f"resume={resume!r}: no such run directory")
        if not list_checkpoints(d) and not replays_from_start(cfg):
            raise ConfigError(
                f"resume={resume!r}: the run directory has no checkpoints/ (it stopped before "
                "its first checkpoint); start it again without resume="
            )


def replays_from_start(cfg: DictConfig) -> bool:
    """Whether the configured arena resumes without a checkpoint by replaying the inputs
    its run folder keeps (`Arena.replays_from_start`: a stream's sample log)."""
    target = (cfg.get("arena") or {}).get("_target_")
    try:
        return bool(getattr(get_object(str(target)), "replays_from_start", False))
    except Exception:  # noqa: BLE001 (check_settings reports an arena that cannot be imported)
        return False


#: trainer switches that need an optional package: (setting, module, the extra that has it)
_EXTRAS = (("visualdl", "visualdl", "visualdl"), ("mlflow", "mlflow", "mlflow"))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules holds None for it
        return False


def check_extras(cfg: DictConfig) -> None:
    """Refuse a trainer switch whose optional package is not installed (``trainer.visualdl
    =true`` without VisualDL), naming the extra that installs it, before any work."""
    trainer = cfg.get("trainer") or {}
    for key, module, extra in _EXTRAS:
        if trainer.get(key) is True and not _importable(module):
            raise ConfigError(
                f"trainer.{key}=true needs {module}, which is not installed: pip install "
                f"'paddlecraft[{extra}]' (or pip install {module}), or set trainer.{key}=false"
            )


#: trainer settings that count something: 0 means "off" or "at each epoch", never negative
_TRAINER_COUNTS = ("eval_every", "log_every", "checkpoint_every", "keep_checkpoints",
                   "early_stopping_patience", "progress_every_s")  # fmt: skip


#: top-level arena settings (by name, in any arena) that count something there must be one
#: of (settings in groups, like self-play's ``arena.search.*``, are their group's to check)
_ARENA_POSITIVE = frozenset({
    "epochs", "steps", "steps_per_epoch", "games_per_step", "eval_samples", "ref_samples",
    "grid_rows", "beam_size",
})  # fmt: skip
#: arena settings (by name) where 0 means "none"/"off", never negative
_ARENA_COUNTS = frozenset({
    "final_samples", "sheet_rows", "finetune_epochs", "finetune_size",
})  # fmt: skip


def _default_of(node: Any, key: str) -> Any:
    """The default of ``key`` in the ``Config`` of the component ``node`` builds (or None)."""
    try:
        config = getattr(get_object(str(node.get("_target_"))), "Config", None)
        field = {f.name: f for f in dataclasses.fields(config)}[key]
    except Exception:  # noqa: BLE001 (only used to suggest a value)
        return None
    return field.default if isinstance(field.default, (int, float)) else None


def check_ranges(cfg: DictConfig) -> None:
    """Refuse values no run can use before anything starts: negative learning rates,
    ``arena.epochs``/``*batch_size`` below 1, negative counts (``data.workers``,
    ``trainer.checkpoint_every``...), a number that is not finite. Each message names the
    setting and the fix (`check_value`, the rule a live ``set`` applies too)."""
    for name, acfg in (cfg.get("agents") or {}).items():
        for key in ("lr", "grad_clip"):
            check_value(f"agents.{name}.{key}", acfg.get(key))
    arena = cfg.get("arena") or {}
    for key in arena:
        check_value(f"arena.{key}", arena.get(key), default=_default_of(arena, str(key)))
    trainer = cfg.get("trainer") or {}
    for key in (*_TRAINER_COUNTS, "max_steps"):
        check_value(f"trainer.{key}", trainer.get(key))
    data = cfg.get("data") or {}
    if isinstance(data, DictConfig):
        check_value("data.workers", data.get("workers"))


def check_value(key: str, value: Any, default: Any = None) -> None:
    """Refuse (`ConfigError`, one line naming ``key``) a value of the dotted setting
    ``key`` that no run can use, wherever it comes from: the command line, ``resume=``, a
    sweep point (`check_ranges`) or a live ``set``. A float that is not finite is refused
    for every setting; ``default`` is the value the fix suggests (arena counts)."""

    def need(ok: bool, rule: str, fix: str) -> None:
        if not ok:
            raise ConfigError(f"{key}={value!r}: must be {rule}; {fix}")

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    need(math.isfinite(value), "a finite number", f"give {key}=<a number>")
    head, _, rest = key.partition(".")
    field = rest.rpartition(".")[2]
    if head == "agents" and rest.count(".") == 1 and field == "lr":
        need(value >= 0, ">= 0 and finite",
             "a negative learning rate climbs the loss; try 1e-3 (Adam) or 0.1 (SGD)")  # fmt: skip
    elif head == "agents" and rest.count(".") == 1 and field == "grad_clip":
        need(value > 0, "> 0 (or null: no clipping)", f"e.g. {key}=1.0")
    elif head == "arena" and "." not in rest and isinstance(value, int):
        if rest in _ARENA_POSITIVE or rest.endswith("batch_size"):
            need(value >= 1, ">= 1", f"e.g. {key}={default or 1}")
        elif rest in _ARENA_COUNTS:
            need(value >= 0, ">= 0", f"e.g. {key}=0")
    elif head == "trainer" and rest in _TRAINER_COUNTS:
        need(value >= 0, ">= 0 (0: off / each epoch)", f"e.g. {key}=0")
    elif key == "trainer.max_steps" and isinstance(value, int):
        need(value >= 1, ">= 1 (or null: no limit)", "e.g. trainer.max_steps=100")
    elif key == "data.workers" and isinstance(value, int):
        need(value >= 0, ">= 0 (0: decode in the main process)", "e.g. data.workers=2")


def check_settings(node: Any, who: str, explicit: Sequence[str] = ()) -> None:
    """Check a component's settings against its ``Config`` dataclass before building it.

    This is what makes a user's arena or agent (one with no schema in Hydra's ConfigStore)
    fail as early and as clearly as a built-in one: unknown keys, wrong types and missing
    required settings are reported naming ``who.key``. Components without a ``Config``
    are left to their constructor. ``explicit`` are the constructor's own parameters,
    which are not settings.
    """
    target = node.get("_target_") if node is not None else None
    if not target:
        return
    cls = get_object(str(target))
    config = getattr(cls, "Config", None)
    if config is None:
        return
    params = inspect.signature(cls.__init__).parameters
    own = {n for n, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    given = {
        k: v
        for k, v in OmegaConf.to_container(node, resolve=True).items()
        if k != "_target_" and k not in explicit and not (k in own and k not in _fields(config))
    }
    make_settings(config, given, who)


def _fields(config: type) -> set[str]:
    return {f.name for f in dataclasses.fields(config)}
