"""Static-graph (PIR) support for encoders: feed variables, gradient Values, ``init_missing``.

In static mode an encoder's ``build()`` creates the program's feeds and outputs (seed
style: ``enc.input``, ``enc.label``, ``enc.prediction``), and ``get_gradient`` returns
Values to fetch: for a parameter, the gradient its optimizer op consumes; for an output,
``paddle.static.gradients`` of the loss found in the program.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import paddle

from .naming import check_unique_names
from .specs import InputSpec


def build_static_io(
    scope: str,
    inputs: Mapping[str, InputSpec],
    label_feed: bool,
    forward: Callable[..., Mapping[str, Any]],
) -> dict[str, Any]:
    """Create an encoder's feed variables (``<scope>.<input>``, and ``<scope>.label`` when
    ``label_feed``) in the current program and run ``forward`` on them; return the feeds
    and the forward's outputs by logical name."""
    outputs: dict[str, Any] = {}
    feeds = []
    for name, spec in inputs.items():
        shape = [None, *[(-1 if d is None else d) for d in spec.shape]]
        var = paddle.static.data(f"{scope}.{name}", shape, spec.allowed_dtypes()[0])
        outputs[name] = var
        feeds.append(var)
    if label_feed:
        outputs["label"] = paddle.static.data(f"{scope}.label", [None, 1], "int64")
    outputs.update(forward(*feeds))
    return outputs


def build_static(
    scope: str,
    who: str,
    inputs: Mapping[str, InputSpec],
    label_feed: bool,
    forward: Callable[..., Mapping[str, Any]],
) -> tuple[paddle.static.Program, paddle.static.Scope, dict[str, Any]]:
    """(the program, a fresh scope, feeds and outputs by logical name) of an encoder built
    into the current default main program, its physical names checked unique there."""
    check_unique_names(
        paddle.static.default_main_program().global_block().all_parameters(),
        f"the static program {who} builds into",
        f"Give this encoder a scope no other encoder of the program uses (not "
        f"{scope!r}), or build it into a new program.",
    )
    program = paddle.static.default_main_program()
    static_scope = paddle.static.Scope()
    return program, static_scope, build_static_io(scope, inputs, label_feed, forward)


def param_grad_value(program: Any, who: str, p: Any, loss: Any) -> Any:
    """The gradient Value of parameter ``p``: the one its optimizer op consumes, if any."""
    for op in program.global_block().ops:
        try:
            names = op.get_input_names()
        except ValueError:  # ops without yaml info (builtin.*) have no input names
            continue
        if "param" in names and "grad" in names:
            if op.operand_source(names.index("param")).is_same(p):
                return op.operand_source(names.index("grad"))
    loss = loss if loss is not None else find_loss(program, who)
    return paddle.static.gradients([loss], [p])[0]


def output_grad_value(program: Any, who: str, output: Any, loss: Any) -> Any:
    """The gradient Value of the loss with respect to an output Value."""
    loss = loss if loss is not None else find_loss(program, who)
    return paddle.static.gradients([loss], [output])[0]


def find_loss(program: Any, who: str) -> Any:
    """The loss Value ``program``'s backward pass starts from (``who``: for the error)."""
    # backward is seeded with full_like(loss, 1.0) right before the first *_grad op;
    # forward code may use full_like too, so take the last one before backward starts
    seed = None
    for op in program.global_block().ops:
        if op.name().endswith("_grad"):
            if seed is not None:
                return seed.operand_source(0)
            break
        if op.name() == "pd_op.full_like":
            seed = op
    raise RuntimeError(
        f"{who}: no backward pass in the program yet; call optimizer.minimize(loss) "
        "first or pass loss= to get_gradient"
    )


def init_missing(
    exe: paddle.static.Executor,
    startup: paddle.static.Program,
    scope: paddle.static.Scope | None = None,
) -> list[str]:
    """Run ``startup`` but keep values already in ``scope``; return the names initialised.

    Use it after rebuilding a static program (e.g. to unfreeze): parameters keep their
    trained values, new variables (fresh optimizer state) get initialised.
    """
    scope = scope or paddle.static.global_scope()
    tmp = paddle.static.Scope()
    exe.run(startup, scope=tmp)
    place = paddle.CPUPlace()
    new = []
    for name in tmp.local_var_names():
        var = tmp.find_var(name)
        if scope.find_var(name) is not None or var is None:
            continue
        try:
            value = np.array(var.get_tensor())
        except Exception:  # not a dense tensor (e.g. a reader)
            continue
        scope.var(name).get_tensor().set(value, place)
        new.append(name)
    return new
