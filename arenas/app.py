"""From a composed config to a finished run: validate, instantiate, run, report.

``run.py`` calls :func:`run_from_config`; scripts can call it too (or build agents and
an arena in Python and call :func:`run_arena`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from agents import Agent
from agents.device import resolve_device
from agents.distributed import describe, init_if_launched, is_main_process
from agents.instantiate import check_targets, safe_instantiate
from encoders.tensorio import CheckpointError, atomic_write_bytes

from .base import Arena
from .callbacks import standard_callbacks
from .checkpoint import latest_good_checkpoint, list_checkpoints, restore_checkpoint
from .engine import Callback, Loop
from .rng import seed_everything

log = logging.getLogger("paddlecraft")


class ConfigError(ValueError):
    """A run config is invalid; raised before any work starts."""


def validate(cfg: DictConfig) -> None:
    """Check everything that can be checked before building: targets, devices, resume dir."""
    check_targets(cfg, allow=list(cfg.get("allow_targets") or []))
    agents = cfg.get("agents") or {}
    if not agents:
        raise ConfigError(
            "the config has no agents: choose an arena, e.g. python run.py arena=classify"
        )
    for name, acfg in agents.items():
        resolve_device(acfg.get("device", "cpu"), setting=f"agents.{name}.device")
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
    t = cfg.trainer
    return standard_callbacks(
        eval_every=t.eval_every,
        log_every=t.log_every,
        checkpoint_every=t.checkpoint_every,
        keep_checkpoints=t.keep_checkpoints,
        early_stopping_patience=t.early_stopping_patience,
        progress=t.progress,
        visualdl=t.visualdl,
        nan_guard=t.nan_guard,
        overrides=list(overrides),
        writer=is_main_process(),
    )


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
    try:
        with build_arena(cfg, agents) as arena:
            results = run_arena(
                arena,
                run_dir,
                trainer_callbacks(cfg, overrides),
                resume=bool(resume),
                max_steps=cfg.trainer.max_steps,
            )
    finally:  # the next job of an in-process sweep reuses the agent names
        for agent in agents.values():
            agent.release_scopes()
    return float(results["headline_value"])


def _config_for_resume(cfg: DictConfig, run_dir: Path) -> DictConfig:
    saved_path = run_dir / "config.yaml"
    if not saved_path.is_file():
        raise ConfigError(
            f"resume={str(run_dir)!r}: no config.yaml there; is it a PaddleCraft run directory?"
        )
    saved = OmegaConf.load(saved_path)
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
