"""One owner per run folder: a lock held for the whole run, and who holds it.

The lock is an OS file lock (``filelock``: ``flock`` on Linux/macOS, ``msvcrt`` on
Windows) on ``<run dir>/.paddlecraft.lock``. The operating system releases it when its
process ends, however it ends, so a run killed with SIGKILL leaves no live lock: the next
run takes it over (and says whose it was). Beside it, ``.paddlecraft-owner.json`` names
the holder (pid, host, start time) so a refused run can say which process owns the
folder. A pid file alone (``O_EXCL``) would need a liveness test that pid reuse and other
hosts defeat; the kernel's lock has no such hole on a local disk. (File locks over NFS
depend on the server; keep run folders on a local disk or one with working locks.)

A fresh run (no ``resume=``) also refuses a folder that already holds a run: mixing
two runs' checkpoints, logs and results in one folder is what the lock exists to prevent.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from paddlecraft.agents.settings import ConfigError

log = logging.getLogger("paddlecraft")

LOCK_NAME = ".paddlecraft.lock"
OWNER_NAME = ".paddlecraft-owner.json"
#: files whose presence means "a run was started here"
RUN_MARKERS = ("config.yaml", "checkpoints", "results.json", "metrics.jsonl")


class RunDirError(ConfigError):
    """The run folder is another run's (live or finished) or cannot be written."""


def _owner_text(owner: dict[str, Any]) -> str:
    started = owner.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "?"
    return f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')}, started {when}"


def read_owner(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The owner record of ``run_dir`` (None when absent or unreadable)."""
    try:
        return json.loads((Path(run_dir) / OWNER_NAME).read_text())
    except (OSError, ValueError):
        return None


def holds_a_run(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` already holds a PaddleCraft run (config, checkpoints, results)."""
    d = Path(run_dir)
    return any((d / m).exists() for m in RUN_MARKERS)


def _describe_run(run_dir: Path) -> str:
    try:
        results = json.loads((run_dir / "results.json").read_text())
        return f"a {results.get('status', 'stopped')} run (step {results.get('step', '?')})"
    except (OSError, ValueError):
        return "a run that stopped without results.json (killed?)"


def check_writable(run_dir: str | os.PathLike, setting: str = "hydra.run.dir") -> None:
    """Raise `RunDirError` unless ``run_dir`` exists writable or can be created."""
    d = Path(run_dir).absolute()
    probe = d
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise RunDirError(
            f"{setting}={str(run_dir)!r}: {probe} is a file, not a folder; "
            f"choose another {setting}="
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RunDirError(
            f"{setting}={str(run_dir)!r}: cannot write in {probe} (permission denied); "
            f"choose a writable {setting}="
        )


def check_run_dir(
    run_dir: str | os.PathLike, *, resume: bool, setting: str = "hydra.run.dir"
) -> None:
    """Refuse, before anything is written, a folder this run may not use.

    Raises `RunDirError` when the folder is locked by a live run, or (``resume``
    False) when it already holds a run. It takes no lock: `RunLock` does that.
    """
    d = Path(run_dir)
    check_writable(d, setting)
    if not d.is_dir():
        return
    lock_file = d / LOCK_NAME
    if lock_file.exists():
        probe = FileLock(lock_file, timeout=0)
        try:
            probe.acquire()
        except Timeout:
            raise _locked_error(d) from None
        probe.release()
    if not resume and holds_a_run(d):
        raise _taken_error(d, setting)


def _taken_error(d: Path, setting: str = "hydra.run.dir") -> RunDirError:
    return RunDirError(
        f"{setting}={str(d)!r} already holds {_describe_run(d)}; a fresh run would mix "
        f"its files with that one's. Continue it with resume={d} (e.g. arena.epochs=<more> "
        f"to train longer) or choose another {setting}="
    )


def _locked_error(d: Path) -> RunDirError:
    owner = read_owner(d)
    who = _owner_text(owner) if owner else "another process"
    return RunDirError(
        f"run folder {str(d)!r} is in use by a live run ({who}); wait for it to end, stop "
        "it, or choose another hydra.run.dir="
    )


class RunLock:
    """Hold ``run_dir`` for one run: ``with RunLock(d, resume=False): ...``.

    Entering refuses (`RunDirError`) a folder locked by a live process or, for a
    fresh run, one that already holds a run; it takes over a lock left by a dead
    process, logging whose it was. Leaving removes the owner record and the lock file and
    releases the lock; `discard` also removes the folder of a run that was refused before
    it wrote anything.
    """

    def __init__(self, run_dir: str | os.PathLike, *, resume: bool) -> None:
        self.run_dir = Path(run_dir)
        self.resume = resume
        self._lock = FileLock(self.run_dir / LOCK_NAME, timeout=0)
        self._created_dir = False

    def __enter__(self) -> RunLock:
        check_writable(self.run_dir)
        self._created_dir = not self.run_dir.exists()
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunDirError(
                f"cannot create the run folder {str(self.run_dir)!r} ({e.strerror or e}); "
                "choose a writable hydra.run.dir="
            ) from e
        try:
            self._lock.acquire()
        except Timeout:
            raise _locked_error(self.run_dir) from None
        try:
            previous = read_owner(self.run_dir)
            if not self.resume and holds_a_run(self.run_dir):
                raise _taken_error(self.run_dir)
            if previous is not None:
                log.warning(
                    "run folder %s: taking over the lock left by %s, which is no longer "
                    "running (killed?)",
                    self.run_dir,
                    _owner_text(previous),
                )
            owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
            (self.run_dir / OWNER_NAME).write_text(json.dumps(owner) + "\n")
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        """Remove the owner record and the lock file, then release the lock. The file goes
        while it is still locked: a process that opened it meanwhile finds its lock on a
        removed file and does not count it as held (``filelock`` checks), so no two runs
        ever hold the folder at once."""
        if not self._lock.is_locked:
            return
        try:
            owner = read_owner(self.run_dir)
            if owner is not None and owner.get("pid") == os.getpid():
                (self.run_dir / OWNER_NAME).unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # Windows: an open file cannot be removed
                (self.run_dir / LOCK_NAME).unlink(missing_ok=True)
        finally:
            self._lock.release()

    def discard(self) -> None:
        """Release and remove the lock files (and the folder if this run created it and it is
        empty): for a run refused before it wrote anything."""
        self._release()
        if self._created_dir:
            try:
                self.run_dir.rmdir()
            except OSError:
                pass
