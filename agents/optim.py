"""Optimizer state as flat tensors + JSON, keyed by (accumulator, physical parameter name);
`adam_step` (Paddle's own Adam update without its per-step Python bookkeeping) lives
with Paddle's other private calls in `paddlecraft.paddle_private`.

Paddle names accumulators ``<param>_moment1_<n>`` with a process-wide counter ``n``, so
its own ``state_dict`` keys change between processes that build optimizers in another
order. Keys here are ``<accumulator>/<param name>``, stable across processes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import paddle

from paddlecraft.encoders.tensorio import CheckpointError
from paddlecraft.errors import ConfigError
from paddlecraft.paddle_private import accumulators, adam_step, create_accumulators, learning_rate

__all__ = ["adam_step", "load_optimizer_state", "optimizer_state", "scheduler_rate_arg"]

#: the argument a Paddle LR scheduler takes the agent's ``lr`` as: its starting rate, or
#: (``OneCycleLR``) the peak of its cycle
RATE_ARGS = ("learning_rate", "max_learning_rate")


def scheduler_rate_arg(make: Callable[..., Any], agent: str) -> str:
    """Which of `RATE_ARGS` the scheduler factory ``make`` (a ``_partial_`` config) takes
    the agent's ``lr`` as; a scheduler with neither is refused naming the setting."""
    target = getattr(make, "func", make)
    params = inspect.signature(target).parameters
    for name in RATE_ARGS:
        if name in params:
            return name
    raise ConfigError(
        f"agents.{agent}.lr_scheduler: {getattr(target, '__name__', target)} takes none of "
        f"{', '.join(RATE_ARGS)}, so it cannot start from agents.{agent}.lr; use a "
        "paddle.optimizer.lr scheduler (with _partial_: true)"
    )


def optimizer_state(opt: paddle.optimizer.Optimizer) -> tuple[dict[str, paddle.Tensor], dict]:
    """``({"moment1/<param>": tensor, ...}, json_meta)`` for an optimizer."""
    tensors = {
        f"{acc}/{pname}": var
        for acc, per_param in accumulators(opt).items()
        for pname, var in per_param.items()
    }
    meta: dict[str, Any] = {"class": type(opt).__name__}
    lr = learning_rate(opt)
    if isinstance(lr, paddle.optimizer.lr.LRScheduler):
        meta["lr_scheduler"] = {
            k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in lr.state_dict().items()
        }
    return tensors, meta


def load_optimizer_state(
    opt: paddle.optimizer.Optimizer,
    tensors: Mapping[str, np.ndarray],
    meta: Mapping[str, Any],
    params: Sequence[paddle.Tensor],
) -> None:
    """Restore what `optimizer_state` saved into a freshly built optimizer."""
    saved_cls = meta.get("class")
    if saved_cls and saved_cls != type(opt).__name__:
        raise CheckpointError(
            f"optimizer state was saved from {saved_cls} but the agent now uses "
            f"{type(opt).__name__}; keep the optimizer config of the run you resume"
        )
    wanted = {key.split("/", 1)[1] for key in tensors}
    todo = [p for p in params if p.name in wanted]
    if todo:
        create_accumulators(opt, todo)
    for key, value in tensors.items():
        acc, pname = key.split("/", 1)
        try:
            var = accumulators(opt)[acc][pname]
        except KeyError as e:
            raise CheckpointError(
                f"optimizer state has {key!r} but the optimizer has no such accumulator; "
                "the agent's parameters or optimizer changed since the checkpoint"
            ) from e
        var.set_value(np.asarray(value))
    lr = learning_rate(opt)
    if "lr_scheduler" in meta and isinstance(lr, paddle.optimizer.lr.LRScheduler):
        lr.set_state_dict(dict(meta["lr_scheduler"]))
