"""Optimizer state as flat tensors + JSON, keyed by (accumulator, physical parameter name),
and `adam_step`, Paddle's own Adam update without its per-step Python bookkeeping.

Paddle names accumulators ``<param>_moment1_<n>`` with a process-wide counter ``n``, so
its own ``state_dict`` keys change between processes that build optimizers in another
order. Keys here are ``<accumulator>/<param name>``, stable across processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import paddle
from paddle import _C_ops
from paddle.base.layer_helper import LayerHelper

from paddlecraft.encoders.tensorio import CheckpointError


def optimizer_state(opt: paddle.optimizer.Optimizer) -> tuple[dict[str, paddle.Tensor], dict]:
    """``({"moment1/<param>": tensor, ...}, json_meta)`` for an optimizer."""
    tensors = {
        f"{acc}/{pname}": var
        for acc, per_param in opt._accumulators.items()
        for pname, var in per_param.items()
    }
    meta: dict[str, Any] = {"class": type(opt).__name__}
    lr = opt._learning_rate
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
        opt._create_accumulators(paddle.static.default_main_program().global_block(), todo)
    for key, value in tensors.items():
        acc, pname = key.split("/", 1)
        try:
            var = opt._accumulators[acc][pname]
        except KeyError as e:
            raise CheckpointError(
                f"optimizer state has {key!r} but the optimizer has no such accumulator; "
                "the agent's parameters or optimizer changed since the checkpoint"
            ) from e
        var.set_value(np.asarray(value))
    if "lr_scheduler" in meta and isinstance(opt._learning_rate, paddle.optimizer.lr.LRScheduler):
        opt._learning_rate.set_state_dict(dict(meta["lr_scheduler"]))


def adam_step(opt: paddle.optimizer.Optimizer) -> bool:
    """One step of a plain ``paddle.optimizer.Adam`` through the same ``adam_`` kernel, the
    same learning-rate tensor and the same accumulators as ``opt.step()``, bit-identically.

    ``opt.step()`` spends most of a small model's step in Python (program guards, grad clip
    and regularization passes, per-parameter accumulator look-ups): ~120 us for 4 parameters
    against ~40 us here (bench/referential_bench.py). Returns False, having done nothing,
    for whatever it does not cover (call ``opt.step()`` then): another optimizer class or
    a subclass, grad clip, weight decay or a per-parameter regularizer or learning rate,
    multi-precision, AMSGrad, multi-tensor, parameter groups, tensor-valued betas or
    epsilon, a non-float32 parameter or a sparse gradient. Loss scaling (fp16) is the
    caller's to refuse: this step never checks for overflowed gradients.
    """
    if (
        type(opt) is not paddle.optimizer.Adam
        or opt._grad_clip is not None
        or opt.regularization is not None
        or opt._multi_precision
        or opt._amsgrad
        or opt._use_multi_tensor
        or not isinstance(opt._beta1, float)
        or not isinstance(opt._beta2, float)
        or not isinstance(opt._epsilon, float)
        or not isinstance(opt._learning_rate, (float, paddle.optimizer.lr.LRScheduler))
        or not opt._parameter_list
        or isinstance(opt._parameter_list[0], dict)
    ):
        return False
    todo = []  # (param, grad) as opt.step() picks them: trainable, with a gradient
    for p in opt._parameter_list:
        if p.stop_gradient:
            continue
        g = p._grad_ivar()
        if g is None or not p._is_initialized():
            continue
        attr = getattr(p, "optimize_attr", None) or {}
        if (
            p.dtype != paddle.float32
            or getattr(p, "regularizer", None) is not None
            or attr.get("learning_rate", 1.0) != 1.0
            or g.is_selected_rows()
        ):
            return False
        todo.append((p, g))
    if not todo:
        return True
    if getattr(opt, "helper", None) is None:  # step() makes one per step; one is enough
        opt.helper = LayerHelper(type(opt).__name__)
    if isinstance(opt._learning_rate, paddle.optimizer.lr.LRScheduler):
        opt._create_global_learning_rate()  # writes this step's value, as step() does
    elif opt._global_learning_rate() is None:
        opt._create_global_learning_rate()  # a float: made once, set_lr() updates it
    lr = opt._global_learning_rate()
    if any(p.name not in opt._already_create_accumulator for p, _ in todo):
        block = paddle.static.default_main_program().global_block()
        opt._create_accumulators(block, [p for p, _ in todo])
    acc = opt._accumulators
    m1, m2 = acc[opt._moment1_acc_str], acc[opt._moment2_acc_str]
    b1, b2 = acc[opt._beta1_pow_acc_str], acc[opt._beta2_pow_acc_str]
    beta1, beta2, eps, lazy = opt._beta1, opt._beta2, opt._epsilon, opt._lazy_mode
    with paddle.no_grad():
        for p, g in todo:
            n = p.name
            _C_ops.adam_(
                p, g, lr, m1[n], m2[n], None, b1[n], b2[n], None, None,
                beta1, beta2, eps, lazy, 1000, False, False, False,
            )  # fmt: skip
    return True
