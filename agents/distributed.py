"""Data-parallel training of an agent across processes with ``paddle.distributed`` (CPU gloo or GPU NCCL).

Launch with ``python -m paddle.distributed.launch --nproc_per_node 2 run.py arena=classify``.
Every process builds identical agents (same seeds), takes its shard of each global batch
(rows ``rank::world``, cut by the loader: ``BatchLoader(shard=(rank(), world_size()))``), and `allreduce_gradients` sums the gradients weighted by each
shard's share of the batch, so every process takes the same optimizer step as one process
on the combined batch. Only rank 0 writes checkpoints, logs and results.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import paddle


def world_size() -> int:
    """Number of data-parallel processes (1 when not launched by paddle.distributed)."""
    return int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))


def rank() -> int:
    """This process's rank (0 when not distributed)."""
    return int(os.environ.get("PADDLE_TRAINER_ID", "0"))


def is_main_process() -> bool:
    """True on rank 0: the process that writes files."""
    return rank() == 0


def init_if_launched() -> bool:
    """Initialise the process group when launched with several processes; return whether."""
    if world_size() <= 1:
        return False
    import paddle.distributed as dist

    if not dist.is_initialized():
        dist.init_parallel_env()
    return True


def allreduce_gradients(params: Sequence[paddle.Tensor], share: float) -> None:
    """Replace each gradient by the share-weighted sum over processes (one coalesced all-reduce).

    With ``share = local rows / global rows`` and a mean loss per process, the result is the
    gradient of the mean loss over the whole global batch.
    """
    import paddle.distributed as dist

    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        return
    flat = paddle.concat([p.grad.reshape([-1]) for p in with_grad]) * share
    dist.all_reduce(flat)
    offset = 0
    for p in with_grad:
        n = int(np.prod(p.shape))
        p.grad.set_value(flat[offset : offset + n].reshape(p.grad.shape))
        offset += n


def describe() -> dict[str, Any]:
    """Rank and world size, for logs and results."""
    return {"rank": rank(), "world_size": world_size()}
