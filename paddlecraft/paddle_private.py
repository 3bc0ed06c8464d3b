"""Every use of Paddle's private API in the library, in one module, checked against the
installed Paddle version at import.

Two kinds of private calls live here:

- fast paths (`adam_step`, `linear`, `cross_entropy`): the op a public
  call ends in, called directly to skip its per-call Python work. They run only when the
  installed Paddle is a version they were checked against (`CHECKED`); on any other
  version the public call runs instead, with the same numbers (tests/test_paddle_private.py
  compares both paths).
- what has no public equivalent: an optimizer's accumulators by parameter name (stable
  checkpoint keys), the CPU generator's state as plain values (JSON checkpoints), the
  unique-name generator (physical parameter names) and the eager-mode guard. These run on
  every version; on an unchecked one a warning at import says so, and the ``cpu`` extra
  of pyproject.toml bounds ``paddlepaddle`` to the checked range.

Nothing outside this module imports ``paddle._C_ops`` or ``paddle.base``, or reads an
optimizer's or layer's private attributes (tests/test_paddle_private.py checks the source).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import paddle
import paddle.nn.functional as F
from paddle import _C_ops, nn
from paddle.base.layer_helper import LayerHelper
from paddle.base.unique_name import UniqueNameGenerator
from paddle.base.unique_name import guard as name_guard

__all__ = [
    "CHECKED",
    "FAST",
    "UniqueNameGenerator",
    "accumulators",
    "adam_step",
    "batch_norm_running",
    "batch_norm_stats",
    "conv2d_geometry",
    "is_batch_norm",
    "checked",
    "create_accumulators",
    "cross_entropy",
    "eager_guard",
    "get_cpu_generator_state",
    "learning_rate",
    "linear",
    "name_guard",
    "set_cpu_generator_state",
    "set_layer_norm_epsilon",
]

#: (major, minor) versions of Paddle whose private API this module was written and tested
#: against; keep in step with the ``cpu`` extra's bound in pyproject.toml
CHECKED = ((3, 3),)


def checked(version: str) -> bool:
    """Whether a Paddle version string (``3.3.1``, ``3.4.0rc0``) is in `CHECKED`."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return bool(m) and (int(m.group(1)), int(m.group(2))) in CHECKED


#: the fast paths run (True) or the public calls (False); read at every call, so a test
#: may set it to compare both paths
FAST: bool = checked(paddle.__version__)

if not FAST:
    logging.getLogger(__name__).warning(
        "Paddle %s is outside the versions PaddleCraft was checked against (%s): its fast "
        "paths are off; checkpoints still use Paddle's private optimizer and RNG state",
        paddle.__version__,
        ", ".join(f"{a}.{b}" for a, b in CHECKED),
    )


# ---------------------------------------------------------------- fast paths
def linear(layer: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
    """``layer(x)`` for a linear head, without ``nn.Linear``'s per-call overhead.

    ``nn.Linear.forward`` asks ``paddle.get_flags`` on every call and, on a CPU-only build
    in eager mode, then calls exactly ``_C_ops.linear(x, weight, bias)``; this calls that
    op directly there. Anything else (a CUDA build, static mode, another layer class,
    forward hooks, an unchecked Paddle) goes through ``layer(x)``.
    """
    if (
        FAST
        and type(layer) is nn.Linear
        and not layer._forward_pre_hooks
        and not layer._forward_post_hooks
        and not paddle.is_compiled_with_cuda()
        and paddle.in_dynamic_mode()
    ):
        return _C_ops.linear(x, layer.weight, layer.bias)
    return layer(x)


def cross_entropy(logits: paddle.Tensor, label: paddle.Tensor) -> paddle.Tensor:
    """``F.cross_entropy(logits, label, reduction="none")``: logits [..., C], int64 labels
    [..., 1] -> [..., 1].

    In eager mode this is the op ``F.cross_entropy`` runs, called directly: its wrapper
    also builds an ignore-index mask that only a class weight would read.
    """
    if FAST and paddle.in_dynamic_mode():
        return _C_ops.cross_entropy_with_softmax(logits, label, False, True, True, -100, -1)[1]
    return F.cross_entropy(logits, label, reduction="none")


def adam_step(opt: paddle.optimizer.Optimizer) -> bool:
    """One step of a plain ``paddle.optimizer.Adam`` through the same ``adam_`` kernel, the
    same learning-rate tensor and the same accumulators as ``opt.step()``, bit-identically.

    ``opt.step()`` spends most of a small model's step in Python (program guards, grad clip
    and regularization passes, per-parameter accumulator look-ups); this skips them.
    Returns False, having done nothing, for whatever it does not cover (call ``opt.step()``
    then): an unchecked Paddle, another optimizer class or a subclass, grad clip, weight
    decay or a per-parameter regularizer or learning rate, multi-precision, AMSGrad,
    multi-tensor, parameter groups, tensor-valued betas or epsilon, a non-float32 parameter
    or a sparse gradient. Loss scaling (fp16) is the caller's to refuse: this step never
    checks for overflowed gradients.
    """
    if (
        not FAST
        or type(opt) is not paddle.optimizer.Adam
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


# ---------------------------------------------------------------- no public equivalent
def accumulators(opt: paddle.optimizer.Optimizer) -> dict[str, dict[str, paddle.Tensor]]:
    """An optimizer's accumulators: ``{"moment1": {param name: tensor}, ...}`` (live)."""
    return opt._accumulators


def create_accumulators(opt: paddle.optimizer.Optimizer, params: Sequence[paddle.Tensor]) -> None:
    """Make ``opt``'s accumulators for ``params`` now (before its first step)."""
    opt._create_accumulators(paddle.static.default_main_program().global_block(), list(params))


def learning_rate(opt: paddle.optimizer.Optimizer) -> Any:
    """What ``opt`` was given as its learning rate: a float or its ``LRScheduler``."""
    return opt._learning_rate


def get_cpu_generator_state() -> list:
    """The CPU generator's state as ``[device, seed, offset, engine text]``."""
    gen = paddle.base.core.default_cpu_generator()
    dev, seed, offset, engine = gen.get_state().__getstate__()
    return [dev, seed, offset, bytes(engine).decode()]


def set_cpu_generator_state(state: Sequence) -> None:
    """Restore what `get_cpu_generator_state` returned."""
    dev, seed, offset, engine = state
    gs = paddle.base.core.GeneratorState.__new__(paddle.base.core.GeneratorState)
    gs.__setstate__((dev, seed, offset, list(engine.encode())))
    paddle.base.core.default_cpu_generator().set_state(gs)


def is_batch_norm(layer: nn.Layer) -> bool:
    """Whether ``layer`` is a batch norm of any dimension (their base class is private)."""
    return isinstance(layer, nn.layer.norm._BatchNormBase)


def batch_norm_stats(layer: nn.Layer) -> list[paddle.Tensor]:
    """The batch-norm running means and variances inside ``layer`` (empty without batch norm)."""
    out = []
    for sub in layer.sublayers(include_self=True):
        if is_batch_norm(sub):
            out += [sub._mean, sub._variance]
    return out


def batch_norm_running(layer: nn.BatchNorm2D) -> tuple[paddle.Tensor, paddle.Tensor, float] | None:
    """A channels-first batch norm's running mean and variance and its epsilon (what its
    eval-mode forward normalises with; private attributes), or ``None`` when its data
    format is not NCHW."""
    if layer._data_format != "NCHW":
        return None
    return layer._mean, layer._variance, float(layer._epsilon)


def conv2d_geometry(conv: nn.Conv2D) -> tuple[int, int, int] | None:
    """``(kernel, stride, padding)`` of a plain ``nn.Conv2D`` (square kernel and stride,
    one explicit zero padding on every side, no groups or dilation, NCHW; its settings are
    private attributes), or ``None`` when it has any other setting."""
    kernel, stride = list(conv._kernel_size), list(conv._stride)
    plain = (
        conv._groups == 1
        and list(conv._dilation) == [1, 1]
        and conv._padding_mode == "zeros"
        and conv._data_format == "NCHW"
        and conv._padding_algorithm == "EXPLICIT"
        and isinstance(conv._padding, int)
        and len(set(kernel)) == 1
        and len(set(stride)) == 1
    )
    return (int(kernel[0]), int(stride[0]), int(conv._padding)) if plain else None


def set_layer_norm_epsilon(layer: nn.LayerNorm, eps: float) -> None:
    """Set a LayerNorm's epsilon after construction (it has no public setter)."""
    layer._epsilon = eps


@contextmanager
def eager_guard() -> Iterator[None]:
    """Run the block in eager (dynamic) mode, also while a static program is being built."""
    with paddle.base.dygraph.guard():
        yield
