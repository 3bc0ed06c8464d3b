"""Export an agent (or one of its encoders) for deployment: paddle.inference, optionally ONNX.

``export_layer(agent, out_dir)`` writes ``model.json`` + ``model.pdiparams`` with
``paddle.jit.save`` (input specs from the declared logical inputs, batch axis dynamic),
then loads them with ``paddle.inference`` and checks the outputs against the eager
forward on a probe batch. ``onnx=True`` also converts with paddle2onnx (in a child
process: paddle2onnx aborts the whole process on an unsupported operator) and checks
``model.onnx`` with onnxruntime. ``export.json`` records inputs, outputs and the checks.

What gets exported: a layer with ``export_signature()`` (e.g. `paddlecraft.agents.Policy`)
declares its inputs and outputs; otherwise an `Encoder` exports all
its logical outputs, and an agent with an ``encoder`` exports ``forward`` with that
encoder's inputs (a `paddlecraft.agents.Classifier` gives the ``prediction`` logits).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import paddle
from paddle import nn

from paddlecraft.encoders.base import Encoder
from paddlecraft.encoders.tensorio import atomic_write_json

#: eager vs exported outputs must agree to this absolute difference
TOLERANCE = 1e-5
#: size given to dynamic (None) axes other than the batch in the probe inputs
PROBE_LENGTH = 5

Signature = tuple[dict[str, tuple[tuple[Any, ...], str]], list[str]]


class ExportError(RuntimeError):
    """A layer could not be exported, or the exported model disagrees with the eager one."""


def export_signature(layer: nn.Layer) -> Signature:
    """``({input name: (shape without batch, dtype)}, [output names])`` of what is exported."""
    declared = getattr(layer, "export_signature", None)
    if callable(declared):
        return declared()
    if isinstance(layer, Encoder):
        return _encoder_inputs(layer), list(layer.output_names)
    encoder = getattr(layer, "encoder", None)
    if isinstance(encoder, Encoder):
        return _encoder_inputs(encoder), [encoder.primary_output]
    raise ExportError(
        f"{type(layer).__name__} declares no inputs to export: give it an export_signature() "
        "method, an encoder attribute, or export one of its encoders (export.part=<attribute>)"
    )


def _encoder_inputs(enc: Encoder) -> dict[str, tuple[tuple[Any, ...], str]]:
    return {name: (tuple(s.shape), s.allowed_dtypes()[0]) for name, s in enc.input_specs.items()}


class _Exported(nn.Layer):
    """Fixed-arity forward (``paddle.jit`` cannot trace ``*inputs``) returning a tuple."""

    def __init__(self, inner: nn.Layer, call: Callable[..., Any]) -> None:
        super().__init__()
        self.inner = inner
        self._call = call


class _Exported1(_Exported):
    def forward(self, x0):  # noqa: ANN001, ANN202
        return self._call(self.inner, x0)


class _Exported2(_Exported):
    def forward(self, x0, x1):  # noqa: ANN001, ANN202
        return self._call(self.inner, x0, x1)


class _Exported3(_Exported):
    def forward(self, x0, x1, x2):  # noqa: ANN001, ANN202
        return self._call(self.inner, x0, x1, x2)


_ARITY = {1: _Exported1, 2: _Exported2, 3: _Exported3}


def _as_tuple(out: Any) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _call_of(layer: nn.Layer) -> Callable[..., tuple]:
    if isinstance(layer, Encoder) and not callable(getattr(layer, "export_signature", None)):
        return lambda m, *xs: tuple(m.forward_all(*xs)[k] for k in m.output_names)
    return lambda m, *xs: _as_tuple(m(*xs))


def probe_inputs(inputs: dict[str, tuple[tuple[Any, ...], str]], batch: int = 3) -> list:
    """Deterministic numpy inputs matching ``inputs`` (dynamic axes get PROBE_LENGTH)."""
    rng = np.random.default_rng(0)
    out = []
    for shape, dtype in inputs.values():
        full = (batch, *[PROBE_LENGTH if d is None else int(d) for d in shape])
        if dtype.startswith("int"):
            out.append(rng.integers(0, 2, size=full).astype(dtype))
        else:
            out.append(rng.standard_normal(full).astype(dtype))
    return out


def export_layer(
    layer: nn.Layer,
    out_dir: str | os.PathLike,
    *,
    onnx: bool = False,
    opset: int = 17,
    what: str | None = None,
) -> dict[str, Any]:
    """Write ``layer`` for deployment into ``out_dir``; return the ``export.json`` record.

    Raises `ExportError` when tracing fails, when ONNX conversion meets an
    operator paddle2onnx cannot convert (named in the message), or when an exported
    model's outputs differ from the eager ones by more than `TOLERANCE`.
    """
    label = getattr(layer, "scope", None) or getattr(layer, "name", "")
    what = what or f"{type(layer).__name__}({label!r})"
    inputs, outputs = export_signature(layer)
    if len(inputs) not in _ARITY:
        raise ExportError(f"{what}: export supports 1 to 3 inputs, got {list(inputs)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / "model"
    was_training = layer.training
    layer.eval()
    try:
        probe = probe_inputs(inputs)
        with paddle.no_grad():
            eager = [t.numpy() for t in _call_of(layer)(layer, *map(paddle.to_tensor, probe))]
        wrapper = _ARITY[len(inputs)](layer, _call_of(layer))
        specs = [
            paddle.static.InputSpec([None, *[-1 if d is None else d for d in shape]], dtype, name)
            for name, (shape, dtype) in inputs.items()
        ]
        try:
            paddle.jit.save(wrapper, str(prefix), input_spec=specs)
        except Exception as e:  # dy2static errors carry the failing source line
            raise ExportError(
                f"{what} cannot be traced into a static graph by paddle.jit.save "
                f"(forward must use paddle ops only, no numpy/.item() on tensors):\n{e}"
            ) from e
    finally:
        layer.train(was_training)
    record: dict[str, Any] = {
        "what": what,
        "class": f"{type(layer).__module__}.{type(layer).__qualname__}",
        "inputs": [{"name": n, "shape": [None, *s], "dtype": d} for n, (s, d) in inputs.items()],
        "outputs": outputs,
        "paddle": paddle.__version__,
        "files": {"program": "model.json", "params": "model.pdiparams"},
        "checks": {},
    }
    got = run_paddle_inference(out, probe)
    record["checks"]["paddle_inference_max_abs_diff"] = _compare(
        what, "paddle.inference", eager, got
    )
    if onnx:
        convert_to_onnx(out, opset=opset, what=what)
        record["files"]["onnx"] = "model.onnx"
        got = run_onnxruntime(out / "model.onnx", probe)
        record["checks"]["onnxruntime_max_abs_diff"] = _compare(what, "onnxruntime", eager, got)
    atomic_write_json(out / "export.json", record)
    return record


def _compare(what: str, runtime: str, eager: list, got: list) -> float:
    if len(got) != len(eager):
        raise ExportError(f"{what}: {runtime} gave {len(got)} outputs, eager {len(eager)}")
    worst = 0.0
    for e, g in zip(eager, got):
        if e.shape != g.shape:
            raise ExportError(f"{what}: {runtime} output shape {g.shape} != eager {e.shape}")
        worst = max(worst, float(np.abs(e.astype(np.float64) - g).max()) if e.size else 0.0)
    if worst > TOLERANCE:
        raise ExportError(
            f"{what}: {runtime} outputs differ from the eager forward by {worst:.3g} "
            f"(> {TOLERANCE}); the layer may behave differently in eval mode or when traced"
        )
    return worst


def run_paddle_inference(model_dir: str | os.PathLike, inputs: list[np.ndarray]) -> list:
    """Outputs of ``model_dir/model.json`` run by ``paddle.inference`` on CPU."""
    from paddle import inference

    d = Path(model_dir)
    cfg = inference.Config(str(d / "model.json"), str(d / "model.pdiparams"))
    cfg.disable_gpu()
    cfg.disable_glog_info()
    predictor = inference.create_predictor(cfg)
    for name, x in zip(predictor.get_input_names(), inputs):
        handle = predictor.get_input_handle(name)
        handle.reshape(list(x.shape))
        handle.copy_from_cpu(np.ascontiguousarray(x))
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


def run_onnxruntime(path: str | os.PathLike, inputs: list[np.ndarray]) -> list:
    """Outputs of an ONNX file run by onnxruntime on CPU."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)


_CONVERT = """
import sys, paddle2onnx
paddle2onnx.export(sys.argv[1], sys.argv[2], sys.argv[3], opset_version=int(sys.argv[4]),
                   enable_optimize=False)  # the optimizer (polygraphy) pip-installs at run time
"""


def convert_to_onnx(model_dir: str | os.PathLike, opset: int = 17, what: str = "model") -> Path:
    """Convert ``model_dir/model.json`` to ``model.onnx`` with paddle2onnx; return its path."""
    try:
        import onnxruntime  # noqa: F401
        import paddle2onnx  # noqa: F401
    except ImportError as e:
        raise ExportError(
            "export.onnx=true needs paddle2onnx and onnxruntime: "
            "pip install 'paddlecraft[onnx]' (or set export.onnx=false)"
        ) from e
    d = Path(model_dir)
    target = d / "model.onnx"
    args = [str(d / "model.json"), str(d / "model.pdiparams"), str(target), str(opset)]
    proc = subprocess.run(
        [sys.executable, "-c", _CONVERT, *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not target.is_file():
        missing = unsupported_onnx_ops(d)
        if missing:
            raise ExportError(
                f"{what} cannot be converted to ONNX: paddle2onnx has no converter for "
                f"{', '.join(missing)}. Export without ONNX (export.onnx=false) and deploy "
                "with paddle.inference, or replace that operation in the model"
            )
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ExportError(f"{what}: paddle2onnx failed (exit {proc.returncode}):\n{tail}")
    return target


# PIR op name -> paddle2onnx converter name, where they differ beyond a prefix or suffix
_P2O_ALIASES = {
    "matmul": "matmul_v2",
    "topk": "top_k_v2",
    "expand": "expand_v2",
    "flatten": "flatten_contiguous_range",
    "unsqueeze": "unsqueeze2",
    "arange": "range",
    "argmax": "arg_max",
    "argmin": "arg_min",
    "floor_divide": "elementwise_floordiv",
    "subtract": "elementwise_sub",
    "multiply": "elementwise_mul",
    "divide": "elementwise_div",
    "remainder": "elementwise_mod",
    "minimum": "elementwise_min",
    "maximum": "elementwise_max",
    "numel": "size",
    "hardswish": "hard_swish",
    "hardsigmoid": "hard_sigmoid",
    "grid_sample": "grid_sampler",
    "nonzero": "where_index",
    "add_n": "sum",
}
_P2O_BUILTIN = {"pd_op.data", "pd_op.feed", "pd_op.fetch", "pd_op.if", "pd_op.while"}


def unsupported_onnx_ops(model_dir: str | os.PathLike) -> list[str]:
    """Operators in an exported program that paddle2onnx's registry does not list.

    paddle2onnx aborts without naming them, so this names them after a failed conversion.
    """
    from paddle2onnx.paddle2onnx_cpp2py_export import get_all_supported_operators_pir

    known = set(get_all_supported_operators_pir())
    missing = []
    for op in sorted(program_ops(model_dir)):
        if op in _P2O_BUILTIN or op.startswith("builtin."):
            continue
        base = op.split(".", 1)[-1].rstrip("_")
        candidates = {
            base,
            _P2O_ALIASES.get(base, ""),
            f"elementwise_{base}",
            f"reduce_{base}",
            f"{base}_v2",
        }
        if not candidates & known:
            missing.append(op)
    return missing


def program_ops(model_dir: str | os.PathLike) -> set[str]:
    """The operator names (``pd_op.matmul``...) in an exported ``model.json``."""
    prefix = str(Path(model_dir) / "model")
    paddle.enable_static()
    try:
        exe = paddle.static.Executor(paddle.CPUPlace())
        program, _, _ = paddle.static.load_inference_model(prefix, exe)
        return {op.name() for op in program.global_block().ops}
    finally:
        paddle.disable_static()


def read_record(model_dir: str | os.PathLike) -> dict[str, Any]:
    """The ``export.json`` written by `export_layer`."""
    return json.loads((Path(model_dir) / "export.json").read_text())
