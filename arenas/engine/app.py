"""From a composed config to a finished run: validate, instantiate, run, report.

``run.py`` calls `run_from_config`; scripts can call it too (or build agents and
an arena in Python and call `run_arena`).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from paddlecraft.agents import Agent
from paddlecraft.agents.distributed import describe, init_if_launched, is_main_process
from paddlecraft.agents.instantiate import (
    built,
    safe_instantiate,
)
from paddlecraft.agents.settings import ConfigError, make_settings
from paddlecraft.compat import renamed_attribute, upgrade_targets
from paddlecraft.encoders.tensorio import CheckpointError, atomic_write_bytes
from paddlecraft.errors import PaddleCraftError, command

from .base import Arena, StepAborted
from .callbacks import TrainerConfig, standard_callbacks
from .checkpoint import latest_good_checkpoint, restore_checkpoint
from .from_data import fill_from_data, marked
from .loop import Callback, Loop
from .resume import apply_changes, record_changes, resume_changes, upgrade_saved_config
from .rng import seed_everything
from .runlock import RunLock
from .summary.runs import first_overrides
from .validate import validate

log = logging.getLogger("paddlecraft")


#: errors in what the user asked for: the command line prints their one-line message.
#: One base (paddlecraft.errors): a new user error derives from it, nothing to list here.
USER_ERRORS: tuple[type[BaseException], ...] = (PaddleCraftError,)
#: exit code of a refused command (a user mistake)
USAGE = 2
#: exit code of a run stopped by a non-finite training metric (see docs/reliability.md)
DIVERGED = 3
#: exit code of a run stopped by a step that could not be taken (StepAborted, e.g. a worker)
ABORTED = 1


def build_data(cfg: DictConfig) -> Any | None:
    """The dataset ``cfg.data.loader`` builds, or None: no data, or an arena that makes its
    own (one whose ``arena.data`` are its own settings, unless ``arena.files`` names the
    loader: the caption arena on files). Composing read nothing; this reads the files."""
    if cfg.get("data") is None or "loader" not in cfg.data:
        return None
    if "data" in cfg.arena and not cfg.arena.get("files"):
        return None
    allow = list(cfg.get("allow_targets") or [])
    log.info("Instantiating data <%s>", cfg.data.loader.get("_target_"))
    return built(OmegaConf.to_container(cfg.data.loader, resolve=True), allow)


def build_agents(cfg: DictConfig, data: Any | None = None) -> dict[str, Agent]:
    """Instantiate every agent under ``cfg.agents`` (name = key).

    Settings the data gives (``${craft.from_data:num_classes}``, `.from_data`) are
    filled in ``cfg`` from ``data`` first (built here from ``data.loader`` when not given).
    """
    if marked(cfg.agents, "agents"):
        data = build_data(cfg) if data is None else data
        fill_from_data(cfg.agents, data, f"data.loader ({type(data).__name__})")
    allow = list(cfg.get("allow_targets") or [])
    out: dict[str, Agent] = {}
    for name, acfg in cfg.agents.items():
        log.info("Instantiating agent %s <%s>", name, acfg._target_)
        out[name] = safe_instantiate(
            acfg, name=name, allow=allow, allow_targets=allow, _recursive_=False
        )
    return out


def build_arena(cfg: DictConfig, agents: dict[str, Agent], data: Any | None = None) -> Arena:
    """Instantiate ``cfg.arena`` with the agents, the data (``data``, else built here from
    ``data.loader``) and the run seed.

    The data goes in as ``data=``, or as ``source=`` to an arena whose ``arena.data`` are its
    own settings and whose ``arena.files`` names the loader (the caption arena on files).
    """
    allow = list(cfg.get("allow_targets") or [])
    log.info("Instantiating arena <%s>", cfg.arena._target_)
    kwargs: dict[str, Any] = {"agents": agents, "seed": cfg.seed}
    if cfg.get("data") is not None and ("data" not in cfg.arena or cfg.arena.get("files")):
        key = "source" if "data" in cfg.arena else "data"
        kwargs[key] = build_data(cfg) if data is None else data
    # partial, then called: keyword objects given to instantiate itself would be merged into
    # the config (a dataclass dataset would become a DictConfig)
    make = safe_instantiate(cfg.arena, allow=allow, _recursive_=False, _partial_=True)
    return make(**kwargs)


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
    lock: bool = True,
) -> dict[str, Any]:
    """Run an arena (built in Python or from config) with checkpoints and logs in ``run_dir``.

    ``run_dir`` is locked for the run (`RunLock`: a second run into it
    while this one lives is refused); ``lock=False`` when the caller holds the lock.
    Unlike the command line, a fresh run from Python may write into a folder that holds
    an earlier run (tests and notebooks re-run into one folder).
    """
    if lock and is_main_process():
        with RunLock(run_dir, resume=True):
            return run_arena(
                arena, run_dir, callbacks, resume=resume, max_steps=max_steps, lock=False
            )
    loop = Loop(
        arena, callbacks if callbacks is not None else standard_callbacks(), run_dir, max_steps
    )
    if resume:
        found = latest_good_checkpoint(run_dir)
        if found is not None:
            path, state = found
            restore_checkpoint(loop, path, state)
            log.info("resumed from %s (step %d)", path, loop.step)
        elif arena.replays_from_start:  # its inputs are in the folder: replay them
            log.info(
                "resume: %s has no usable checkpoint; %s replays the run from step 0 on the "
                "inputs its folder keeps",
                run_dir,
                type(arena).__name__,
            )
        else:
            raise CheckpointError(
                f"no usable checkpoint in {run_dir}/checkpoints (all missing or corrupted)"
            )
    return loop.run()


def run_from_config(
    cfg: DictConfig, run_dir: str | os.PathLike, overrides: Sequence[str] = ()
) -> float:
    """Validate, build and run the configured arena; return its headline metric.

    With ``cfg.resume`` set, ``overrides`` (the command line's ``key=value`` settings) say
    what the resume changes (`paddlecraft.arenas.engine.resume`). NaN when the run
    ended without an evaluation (it diverged).
    """
    value = run_config(cfg, run_dir, overrides)["headline_value"]
    return math.nan if value is None else float(value)


def run_config(
    cfg: DictConfig, run_dir: str | os.PathLike, overrides: Sequence[str] = ()
) -> dict[str, Any]:
    """`run_from_config`, returning the whole summary (what ``results.json`` holds)."""
    resume = cfg.get("resume")
    changes: dict[str, dict[str, Any]] = {}
    start_step = 0
    if resume:
        run_dir = Path(resume)
        cfg, changes, start_step = _config_for_resume(cfg, run_dir, overrides)
    validate(cfg)
    if init_if_launched():
        log.info("data-parallel: %s", describe())
    run_dir = Path(run_dir)
    lock = RunLock(run_dir, resume=bool(resume)) if is_main_process() else nullcontext()
    with lock:
        seed_everything(int(cfg.seed))
        try:
            data = build_data(cfg)  # read first: the agents' class counts come from it
            agents = build_agents(cfg, data)
            arena = build_arena(cfg, agents, data)
        except BaseException:
            if isinstance(lock, RunLock) and not resume:
                lock.discard()  # refused before any work: leave nothing like a run
            raise
        with arena:
            if is_main_process() and (not resume or changes):
                saved = OmegaConf.to_yaml(cfg, resolve=True)
                atomic_write_bytes(run_dir / "config.yaml", saved.encode())
                record_changes(run_dir, changes, start_step)
            results = run_arena(
                arena,
                run_dir,
                # a resumed run is the run it resumes: its record keeps the first command line
                trainer_callbacks(
                    cfg, [*first_overrides(run_dir), *overrides] if resume else overrides
                ),
                resume=bool(resume),
                max_steps=cfg.trainer.max_steps,
                lock=False,  # held above
            )
    return results


def main_entry(
    cfg: DictConfig,
    run_dir: str | os.PathLike,
    overrides: Sequence[str] = (),
    *,
    multirun: bool = False,
) -> float:
    """`run_from_config` for the command line: a user error prints one line, exits 2.

    Bad settings, refused targets, unavailable devices, missing or corrupt resume folders,
    a run folder owned by another run are the user's to fix, so they get their message,
    not a traceback (nothing has been written by then: validation runs before any work).
    A run that diverged (a non-finite training metric) prints one ``error:`` line and
    exits `DIVERGED` (3); in a sweep (``multirun``) it returns NaN instead so the
    other jobs go on.
    """
    try:
        results = run_config(cfg, run_dir, overrides)
    except (*USER_ERRORS, InterpolationResolutionError, InstantiationException) as e:
        # a data loader found a bad file or a missing folder (Hydra wraps what a _target_
        # raises)
        # a file a _target_ was given (data, weights) that is missing or unreadable
        cause = user_error(e, also=(OSError,) if isinstance(e, InstantiationException) else ())
        if cause is None:
            raise
        sys.stderr.write(f"error: {' '.join(str(cause).split())}\n")
        raise SystemExit(USAGE) from None
    except StepAborted as e:  # the last completed step is checkpointed (see StepAborted)
        sys.stderr.write(
            f"error: {' '.join(str(e).split())}. The run stopped with a checkpoint of its last "
            f"completed step; fix the cause, then: {command()} resume={run_dir}\n"
        )
        raise SystemExit(ABORTED) from None
    if results["status"] == "diverged" and not multirun:
        sys.stderr.write(f"error: the run diverged: {results['stop_reason']}\n")
        raise SystemExit(DIVERGED)
    value = results["headline_value"]
    return math.nan if value is None else float(value)


def user_error(
    e: BaseException | None, also: tuple[type[BaseException], ...] = ()
) -> BaseException | None:
    """``e`` or the user error it was raised while handling (OmegaConf wraps resolver errors,
    Hydra what a ``_target_`` raises); ``also``: more types that count as the user's."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, (*USER_ERRORS, *also)):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def __getattr__(name: str) -> Any:
    """Renamed attributes (``_user_error``) through `paddlecraft.compat`."""
    return renamed_attribute(__name__, name, globals())


def _warn_ignored(cfg: DictConfig, saved: DictConfig) -> None:
    """Warn, naming them, when ``cfg`` sets arena/agents/data differently from the run."""
    ignored = []
    for key in ("arena", "agents", "data"):
        if key in cfg and key in saved:
            mine = OmegaConf.to_container(cfg[key], resolve=True)
            if mine != OmegaConf.to_container(saved[key]):
                ignored.append(key)
    if ignored:
        log.warning(
            "resume: the config's %s settings differ from the run's and are ignored; pass the "
            "changes as overrides=[...] (what a resume may change: docs/reliability.md)",
            "/".join(ignored),
        )


def _config_for_resume(
    cfg: DictConfig, run_dir: Path, overrides: Sequence[str]
) -> tuple[DictConfig, dict[str, dict[str, Any]], int]:
    """The run's saved config with the command line's allowed changes, the changes, the step."""
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
    saved_tree = upgrade_targets(OmegaConf.load(saved_path))  # pre-0.2 names
    upgrade_saved_config(saved_tree)  # settings renamed since (self-play's groups)
    saved = OmegaConf.create(saved_tree)
    changes = resume_changes(cfg, saved, overrides)
    if not overrides:  # called from Python: cfg's own settings are not the command line's
        _warn_ignored(cfg, saved)
    found = latest_good_checkpoint(run_dir) if changes else None
    step = int(found[1]["position"]["step"]) if found else 0
    if changes:
        saved = apply_changes(saved, changes)
    saved.resume = str(run_dir)
    return saved, changes, step
