"""The folders Hydra writes for a command, and taking them back when the command is refused.

Hydra makes the run folder (``hydra.run.dir``), its ``.hydra/`` record and the job log
(``cli.log``) before the run's code starts, and a sweep's folder with ``multirun.yaml``
before its first job. `RunDirGuard` (a Hydra callback, registered in
``conf/config.yaml``) refuses a run folder this run may not use before Hydra writes into
it, points a resume's log at the resumed run's own folder, and notes which folders the
command is about to create. When the command is then refused (exit code 2),
`take_back` removes what the note names, and only while it holds nothing but
Hydra's own files: never a folder that existed before the command, never a run's files.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback as HydraCallback
from omegaconf import DictConfig, open_dict, read_write

#: how `RunDirGuard` tells `take_back` (one process, one command at a time)
#: which folders the command is creating: a JSON list of ``[folder, first new folder or
#: null, whether the folder was empty]``
NEW_FOLDERS_ENV = "PADDLECRAFT_NEW_FOLDERS"
#: what Hydra writes into a run or sweep folder before any of the run's own code runs
_HYDRA_DIR = ".hydra"
_SWEEP_RECORD = "multirun.yaml"


class RunDirGuard(HydraCallback):
    """Refuse the run folder before Hydra writes ``.hydra/`` and its log into it.

    For ``resume=<run dir>`` the log goes to that run's own folder (its ``cli.log`` grows;
    its ``.hydra/`` record of how it was started is kept), so a resume makes no new
    folder. The same checks run again, under the run's lock, when the run starts.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra.core.hydra_config import HydraConfig

        from paddlecraft.arenas.engine.app import USAGE
        from paddlecraft.arenas.engine.runlock import RunDirError, check_run_dir, check_writable

        HydraConfig.instance().set_config(config)  # hydra.run.dir reads ${hydra:...}
        log_dir = str(config.hydra.run.dir)
        resume = config.get("resume")
        try:
            if resume and Path(str(resume)).is_dir():
                check_run_dir(str(resume), resume=True, setting="resume")
                log_dir = _log_into(config, str(resume))
            elif resume:
                check_writable(log_dir)
            else:
                check_run_dir(log_dir, resume=False)
        except RunDirError as e:  # Hydra turns a callback's exceptions into warnings
            sys.stderr.write(f"error: {' '.join(str(e).split())}\n")
            raise SystemExit(USAGE) from None
        note_new_folder(log_dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        note_new_folder(str(config.hydra.sweep.dir))


def _log_into(config: DictConfig, run_dir: str) -> str:
    """Point Hydra's job folder at ``run_dir`` (the resumed run's), without ``.hydra/``."""
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.run.dir = run_dir
        config.hydra.output_subdir = None
    return run_dir


def _first_new(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet; None when ``path`` exists."""
    if path.exists():
        return None
    while not path.parent.exists():
        path = path.parent
    return path


def note_new_folder(folder: str | os.PathLike) -> None:
    """Record, for `take_back`, the folder Hydra is about to write and which of its
    parents this command creates."""
    d = Path(folder).absolute()
    new = _first_new(d)
    empty = new is None and d.is_dir() and not any(d.iterdir())
    notes = json.loads(os.environ.get(NEW_FOLDERS_ENV) or "[]")
    notes.append([str(d), None if new is None else str(new), empty])
    os.environ[NEW_FOLDERS_ENV] = json.dumps(notes)


@contextmanager
def folders_noted() -> Iterator[None]:
    """The scope of one command: notes start empty and are dropped at its end."""
    old = os.environ.pop(NEW_FOLDERS_ENV, None)
    try:
        yield
    finally:
        os.environ.pop(NEW_FOLDERS_ENV, None)
        if old is not None:
            os.environ[NEW_FOLDERS_ENV] = old


def _only_hydra_files(d: Path) -> bool:
    """Whether ``d`` holds nothing but what Hydra writes (``.hydra/``, ``*.log``,
    ``multirun.yaml``, and sweep job folders holding only those)."""
    for p in d.iterdir():
        if p.is_symlink():
            return False
        if p.is_dir() and p.name != _HYDRA_DIR and not _only_hydra_files(p):
            return False
        if p.is_file() and not (p.name.endswith(".log") or p.name == _SWEEP_RECORD):
            return False
    return True


def take_back() -> None:
    """Remove what Hydra wrote for a refused command (see the module docstring)."""
    for folder, new, was_empty in json.loads(os.environ.get(NEW_FOLDERS_ENV) or "[]"):
        d = Path(folder)
        if not d.is_dir() or not (new is not None or was_empty) or not _only_hydra_files(d):
            continue
        _close_log_files_in(d)
        for p in list(d.iterdir()):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        if new is None:
            continue  # the folder was there before the command (empty): it stays
        stop = Path(new).parent
        while d != stop and stop in d.parents:
            try:
                d.rmdir()
            except OSError:
                break
            d = d.parent


def _close_log_files_in(folder: Path) -> None:
    """Detach and close the logging file handlers (Hydra's job log) writing into ``folder``:
    after it is removed, a later log line of the same process (an in-process caller, a
    notebook) must not fail on the vanished file."""
    import logging

    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for h in list(getattr(logger, "handlers", [])):
            name = getattr(h, "baseFilename", None)
            if name and folder.resolve() in Path(name).resolve().parents:
                logger.removeHandler(h)
                h.close()
