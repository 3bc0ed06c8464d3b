"""Weights on disk: safetensors keyed by physical name, written atomically. Never pickle."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import paddle
from safetensors import safe_open
from safetensors.paddle import save as _st_save

from paddlecraft.errors import CheckpointError


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder, fsync, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_tensors(
    path: str | os.PathLike,
    tensors: Mapping[str, paddle.Tensor | np.ndarray],
    metadata: Mapping[str, str] | None = None,
) -> str:
    """Save ``{name: tensor}`` to a safetensors file atomically; return its SHA-256."""
    out: dict[str, paddle.Tensor] = {}
    for name, t in tensors.items():
        if isinstance(t, np.ndarray):
            t = paddle.to_tensor(t, place=paddle.CPUPlace())
        out[name] = t.detach().cpu().contiguous()
    data = _st_save(out, metadata=dict(metadata or {}))
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def load_tensors(
    path: str | os.PathLike, expected_sha256: str | None = None
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Read a safetensors file into numpy arrays plus its metadata.

    Raises `CheckpointError` (never a C++ trace) when the file is missing,
    truncated or does not match ``expected_sha256``.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"weights file {str(path)!r} does not exist")
    if expected_sha256 is not None and sha256_file(path) != expected_sha256:
        raise CheckpointError(
            f"weights file {str(path)!r} is corrupted: its SHA-256 does not match the one "
            "recorded when it was written (torn write or edited file)"
        )
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = dict(f.metadata() or {})
            arrays = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # safetensors raises several types for a bad header
        raise CheckpointError(
            f"weights file {str(path)!r} is not a readable safetensors file ({e})"
        ) from e
    return arrays, meta


def assign_by_name(
    params: Iterable[paddle.Tensor],
    arrays: Mapping[str, np.ndarray],
    *,
    what: str,
    strict: bool = True,
) -> list[str]:
    """Copy ``arrays[p.name]`` into each parameter ``p``; return names that were not used.

    With ``strict``, a missing name, an unused name or a shape mismatch raises
    `CheckpointError` listing the first few offenders.
    """
    params = list(params)
    names = {p.name for p in params}
    missing = sorted(names - arrays.keys())
    unexpected = sorted(arrays.keys() - names)
    bad_shape = [
        f"{p.name}: file {list(arrays[p.name].shape)} vs model {list(p.shape)}"
        for p in params
        if p.name in arrays and tuple(arrays[p.name].shape) != tuple(p.shape)
    ]
    if strict and (missing or unexpected or bad_shape):
        parts = []
        if missing:
            parts.append(f"missing from file: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"not in model: {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}")
        if bad_shape:
            parts.append(f"shape mismatch: {bad_shape[:5]}")
        raise CheckpointError(
            f"cannot load weights into {what}: " + "; ".join(parts) + ". The file was saved "
            "from a model with other settings or another scope; build the same architecture "
            "under the same scope, or pass strict=False to load what matches."
        )
    for p in params:
        if p.name in arrays and tuple(arrays[p.name].shape) == tuple(p.shape):
            p.set_value(arrays[p.name].astype(_np_dtype(p), copy=False))
    return unexpected


def _np_dtype(p: paddle.Tensor) -> np.dtype:
    return np.dtype(str(p.dtype).replace("paddle.", ""))
