"""From a composed config to a finished run: validate, instantiate, run, report.

``run.py`` calls :func:`run_from_config`; scripts can call it too (or build agents and
an arena in Python and call :func:`run_arena`).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from paddlecraft.agents import Agent
from paddlecraft.agents.amp import check_amp
from paddlecraft.agents.device import resolve_device
from paddlecraft.agents.distributed import describe, init_if_launched, is_main_process
from paddlecraft.agents.instantiate import (
    check_targets,
    safe_instantiate,
    upgrade_targets,
)
from paddlecraft.agents.settings import ConfigError, make_settings
from paddlecraft.encoders.tensorio import CheckpointError, atomic_write_bytes
from paddlecraft.errors import PaddleCraftError

from .base import Arena
from .callbacks import TrainerConfig, standard_callbacks
from .checkpoint import latest_good_checkpoint, list_checkpoints, restore_checkpoint
from .loop import Callback, Loop
from .rng import seed_everything

log = logging.getLogger("paddlecraft")


#: errors in what the user asked for: the command line prints their one-line message.
#: One base (paddlecraft.errors): a new user error derives from it, nothing to list here.
USER_ERRORS: tuple[type[BaseException], ...] = (PaddleCraftError,)


def validate(cfg: DictConfig) -> None:
    """Check everything that can be checked before building: targets, devices, resume dir."""
    check_targets(cfg, allow=list(cfg.get("allow_targets") or []))
    agents = cfg.get("agents") or {}
    if not agents:
        raise ConfigError(
            "the config has no agents: choose an arena, e.g. python run.py arena=classify"
        )
    for name, acfg in agents.items():
        device = resolve_device(acfg.get("device", "cpu"), setting=f"agents.{name}.device")
        check_amp(acfg.get("amp", "off"), acfg.get("amp_level", "O1"), device, f"agents.{name}.amp")
        check_settings(acfg, f"agents.{name}", explicit=("name",))
    check_settings(cfg.arena, "arena", explicit=("agents", "seed"))
    resume = cfg.get("resume")
    if resume:
        d = Path(resume)
        if not d.is_dir():
            raise ConfigError(f"resume={resume!r}: no such run directory")
        if not list_checkpoints(d):
            raise ConfigError(
                f"resume={resume!r}: the run directory has no checkpoints/ (it stopped before "
                "its first checkpoint); start it again without resume="
            )


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


def build_agents(cfg: DictConfig) -> dict[str, Agent]:
    """Instantiate every agent under ``cfg.agents`` (name = key)."""
    allow = list(cfg.get("allow_targets") or [])
    out = {}
    for name, acfg in cfg.agents.items():
        log.info("Instantiating agent %s <%s>", name, acfg._target_)
        out[name] = safe_instantiate(acfg, name=name, allow=allow, _recursive_=False)
    return out


def build_arena(cfg: DictConfig, agents: dict[str, Agent]) -> Arena:
    """Instantiate ``cfg.arena`` with the agents, the data config and the run seed."""
    allow = list(cfg.get("allow_targets") or [])
    log.info("Instantiating arena <%s>", cfg.arena._target_)
    kwargs: dict[str, Any] = {"agents": agents, "seed": cfg.seed}
    if cfg.get("data") is not None and "data" not in cfg.arena:
        kwargs["data"] = OmegaConf.to_container(cfg.data.loader, resolve=True)
    return safe_instantiate(cfg.arena, allow=allow, _recursive_=False, **kwargs)


def trainer_callbacks(cfg: DictConfig, overrides: Sequence[str] = ()) -> list[Callback]:
    """The standard callbacks configured by ``cfg.trainer``."""
    trainer = make_settings(TrainerConfig, cfg.trainer, "trainer")
    return standard_callbacks(trainer, overrides=list(overrides), writer=is_main_process())


def run_arena(
    arena: Arena,
    run_dir: str | os.PathLike,
    callbacks: Sequence[Callback] | None = None,
    *,
    resume: bool = False,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Run an arena (built in Python or from config) with checkpoints and logs in ``run_dir``."""
    loop = Loop(
        arena, callbacks if callbacks is not None else standard_callbacks(), run_dir, max_steps
    )
    if resume:
        found = latest_good_checkpoint(run_dir)
        if found is None:
            raise CheckpointError(
                f"no usable checkpoint in {run_dir}/checkpoints (all missing or corrupted)"
            )
        path, state = found
        restore_checkpoint(loop, path, state)
        log.info("resumed from %s (step %d)", path, loop.step)
    return loop.run()


def run_from_config(
    cfg: DictConfig, run_dir: str | os.PathLike, overrides: Sequence[str] = ()
) -> float:
    """Validate, build and run the configured arena; return its headline metric."""
    resume = cfg.get("resume")
    if resume:
        run_dir = Path(resume)
        cfg = _config_for_resume(cfg, run_dir)
    validate(cfg)
    if init_if_launched():
        log.info("data-parallel: %s", describe())
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume and is_main_process():
        saved = OmegaConf.to_yaml(cfg, resolve=True)
        atomic_write_bytes(run_dir / "config.yaml", saved.encode())
    seed_everything(int(cfg.seed))
    agents = build_agents(cfg)
    with build_arena(cfg, agents) as arena:
        results = run_arena(
            arena,
            run_dir,
            trainer_callbacks(cfg, overrides),
            resume=bool(resume),
            max_steps=cfg.trainer.max_steps,
        )
    return float(results["headline_value"])


def main_entry(cfg: DictConfig, run_dir: str | os.PathLike, overrides: Sequence[str] = ()) -> float:
    """:func:`run_from_config` for the command line: a user error prints one line, exits 2.

    Bad settings, refused targets, unavailable devices, missing or corrupt resume folders
    are the user's to fix, so they get their message, not a traceback (nothing has been
    written by then: validation runs before any work).
    """
    try:
        return run_from_config(cfg, run_dir, overrides)
    except (*USER_ERRORS, InterpolationResolutionError, InstantiationException) as e:
        # a config value read from the data (${craft.num_classes:...}) failed for the user's
        # data, or a data loader found a bad file (Hydra wraps what a _target_ raises)
        cause = _user_error(e)
        if cause is None:
            raise
        sys.stderr.write(f"error: {cause}\n")
        raise SystemExit(2) from None


def _user_error(e: BaseException | None) -> BaseException | None:
    """``e`` or the user error it was raised while handling (OmegaConf wraps resolver errors)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, USER_ERRORS):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def _config_for_resume(cfg: DictConfig, run_dir: Path) -> DictConfig:
    if not run_dir.is_dir():
        raise ConfigError(
            f"resume={str(run_dir)!r}: no such run directory; give the folder a run wrote, "
            "e.g. resume=runs/classify/<time>"
        )
    saved_path = run_dir / "config.yaml"
    if not saved_path.is_file():
        raise ConfigError(
            f"resume={str(run_dir)!r}: no config.yaml there; is it a PaddleCraft run directory?"
        )
    saved = OmegaConf.create(upgrade_targets(OmegaConf.load(saved_path)))  # pre-0.2 names
    for key in ("arena", "agents", "data"):
        if key in cfg and OmegaConf.to_container(cfg[key], resolve=True) != OmegaConf.to_container(
            saved[key]
        ):
            log.warning(
                "resume: ignoring the command line's %s settings; the run continues with the "
                "config it started with (%s)",
                key,
                saved_path,
            )
    saved.resume = str(run_dir)
    return saved
