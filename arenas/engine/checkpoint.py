"""Atomic, checksummed, resumable checkpoints of a whole run.

Layout of ``<run dir>/checkpoints/step_00000120/``::

    agents/<name>/weights.safetensors     parameters by physical name
    agents/<name>/optimizer.safetensors   optimizer accumulators by (kind, parameter)
    agents/<name>/agent.json              class, config, step, LR-scheduler state
    state.json                            loop position, RNG streams, arena and callback
                                          state, and the SHA-256 of every file above

A checkpoint is written into a temporary folder, each file fsynced, then the folder is
renamed into place: a crash leaves either the old set or the new one, never half. On
load every checksum is verified; a torn or edited checkpoint is reported and the
previous one is used.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paddlecraft.encoders.tensorio import CheckpointError, atomic_write_json, sha256_file

from .rng import capture_rng, restore_rng

if TYPE_CHECKING:
    from .loop import Loop

log = logging.getLogger(__name__)

FORMAT = "paddlecraft-checkpoint-1"


def checkpoint_root(run_dir: str | os.PathLike) -> Path:
    """``<run dir>/checkpoints``."""
    return Path(run_dir) / "checkpoints"


def save_checkpoint(loop: Loop, keep: int = 3) -> Path:
    """Write a checkpoint of ``loop`` (agents, optimizers, RNG, arena, callbacks); return its path."""
    root = checkpoint_root(loop.run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{loop.step:08d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        sums: dict[str, str] = {}
        for name, agent in loop.arena.agents.items():
            for fname, digest in agent.save(tmp / "agents" / name).items():
                sums[f"agents/{name}/{fname}"] = digest
            sums[f"agents/{name}/agent.json"] = sha256_file(tmp / "agents" / name / "agent.json")
        state = {
            "format": FORMAT,
            "position": loop.position(),
            "rng": capture_rng(),
            "arena": loop.arena.arena_state(),
            "callbacks": {cb.state_key(): cb.state_dict() for cb in loop.callbacks},
            "last_eval": loop.last_eval,
            "sha256": sums,
        }
        atomic_write_json(tmp / "state.json", state)
        if final.exists():  # same step saved twice (e.g. periodic + end): replace
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in list_checkpoints(loop.run_dir)[keep:] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Finished checkpoint folders, newest first (temporary folders are ignored)."""
    root = checkpoint_root(run_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("step_")]
    return sorted(found, key=lambda p: p.name, reverse=True)


def verify_checkpoint(path: Path) -> dict[str, Any]:
    """Return the checkpoint's state if every file matches its checksum; else raise."""
    state_file = path / "state.json"
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{state_file} is missing or not valid JSON ({e})") from e
    if state.get("format") != FORMAT:
        raise CheckpointError(f"{state_file} is not a {FORMAT} checkpoint")
    for rel, digest in state["sha256"].items():
        f = path / rel
        if not f.is_file():
            raise CheckpointError(f"{f} is missing")
        if sha256_file(f) != digest:
            raise CheckpointError(f"{f} does not match its recorded SHA-256 (torn or edited)")
    return state


def latest_good_checkpoint(run_dir: str | os.PathLike) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that verifies, warning about each broken one skipped."""
    for path in list_checkpoints(run_dir):
        try:
            return path, verify_checkpoint(path)
        except CheckpointError as e:
            log.warning("checkpoint %s is corrupted: %s; trying the previous one", path.name, e)
    return None


def restore_checkpoint(loop: Loop, path: Path, state: dict[str, Any]) -> None:
    """Load a verified checkpoint into ``loop``: agents, optimizers, RNG, arena, callbacks."""
    for name, agent in loop.arena.agents.items():
        d = path / "agents" / name
        if not d.is_dir():
            raise CheckpointError(
                f"checkpoint {path} has no agent {name!r} (it has "
                f"{sorted(p.name for p in (path / 'agents').iterdir())}); resume with the "
                "same arena and agents as the original run"
            )
        agent.load_state(d)
    loop.arena.load_arena_state(state["arena"])
    by_key = state.get("callbacks", {})
    for cb in loop.callbacks:
        if cb.state_key() in by_key:
            cb.load_state_dict(by_key[cb.state_key()])
    loop.set_position(state["position"])
    loop.last_eval = dict(state.get("last_eval", {}))
    restore_rng(state["rng"])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
