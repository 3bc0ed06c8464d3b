"""Atomic, checksummed, resumable checkpoints of a whole run.

Layout of ``<run dir>/checkpoints/step_00000120/``:

    agents/<name>/weights.safetensors     parameters by physical name
    agents/<name>/optimizer.safetensors   optimizer accumulators by (kind, parameter)
    agents/<name>/agent.json              class, config, step, LR-scheduler state
    arena.safetensors                     the arrays in the arena's state (if any)
    state.json                            loop position, RNG streams, arena and callback
                                          state, and the SHA-256 of every file above

``Arena.arena_state()`` may hold numpy arrays and Paddle tensors anywhere in its dicts and
lists (a league's frozen snapshots, a replay buffer): they go to ``arena.safetensors``, each
replaced in ``state.json`` by ``{"__tensor__": key}``, and come back as numpy arrays.

A checkpoint is written into a temporary folder, each file fsynced, then the folder is
renamed into place: a crash leaves either the old set or the new one, never half. On
load every checksum is verified; a torn or edited checkpoint is reported and the
previous one is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import paddle
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from paddlecraft.encoders.tensorio import (
    CheckpointError,
    atomic_write_bytes,
    atomic_write_json,
    sha256_file,
)

from .rng import capture_rng, restore_rng

if TYPE_CHECKING:
    from .loop import Loop

log = logging.getLogger(__name__)

FORMAT = "paddlecraft-checkpoint-1"
ARENA_TENSORS = "arena.safetensors"
_TENSOR = "__tensor__"  # marks where an array of the arena state was taken out


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
        arena_json, arrays = split_arrays(loop.arena.arena_state())
        if arrays:
            data = st_save(arrays)
            atomic_write_bytes(tmp / ARENA_TENSORS, data)
            sums[ARENA_TENSORS] = hashlib.sha256(data).hexdigest()
        state = {
            "format": FORMAT,
            "position": loop.position(),
            "elapsed_s": loop.elapsed_s(),  # the run's time so far, earlier sessions included
            "rng": capture_rng(),
            "arena": arena_json,
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
    loop.arena.load_arena_state(arena_state_of(path, state))
    by_key = state.get("callbacks", {})
    for cb in loop.callbacks:
        if cb.state_key() in by_key:
            cb.load_state_dict(by_key[cb.state_key()])
    loop.set_position(state["position"])
    loop.started = time.time() - float(state.get("elapsed_s", 0.0))  # older: this session's
    loop.last_eval = dict(state.get("last_eval", {}))
    restore_rng(state["rng"])


def arena_state_of(path: Path, state: dict[str, Any]) -> Any:
    """The arena state of the checkpoint at ``path`` (``state``: its verified
    ``state.json``, `verify_checkpoint`), its arrays joined back in as numpy."""
    arrays = {}
    if ARENA_TENSORS in state["sha256"]:  # verified by verify_checkpoint
        arrays = st_load((path / ARENA_TENSORS).read_bytes())
    return join_arrays(state["arena"], arrays)


def split_arrays(state: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """``state`` with every numpy array / Paddle tensor replaced by ``{"__tensor__": key}``,
    and the arrays by key: the array's path in ``state`` (``pool/snapshots/0/weights/fc.w``),
    so the same state gives the same keys whatever its dicts' order."""
    arrays: dict[str, np.ndarray] = {}

    def walk(x: Any, path: str) -> Any:
        if isinstance(x, dict):
            if _TENSOR in x:
                raise CheckpointError(f"arena_state() may not use the key {_TENSOR!r}")
            return {k: walk(v, f"{path}/{k}" if path else str(k)) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v, f"{path}/{i}") for i, v in enumerate(x)]
        if isinstance(x, (np.ndarray, paddle.Tensor)):
            key, n = path or "state", 1
            while key in arrays:  # only if a dict key itself holds "/" and meets a path
                key, n = f"{path}#{n}", n + 1
            arrays[key] = np.ascontiguousarray(x if isinstance(x, np.ndarray) else x.numpy())
            return {_TENSOR: key}
        return x

    return walk(state, ""), arrays


def join_arrays(state: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Inverse of `split_arrays` (arrays come back as numpy)."""

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            if set(x) == {_TENSOR}:
                if x[_TENSOR] not in arrays:
                    raise CheckpointError(f"{ARENA_TENSORS} has no array {x[_TENSOR]!r}")
                return arrays[x[_TENSOR]]
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(state)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
