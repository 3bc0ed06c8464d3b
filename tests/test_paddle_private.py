"""paddlecraft.paddle_private: Paddle's private API in one module, version-checked, with
public fallbacks that give the same numbers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import paddle
import pytest
import tomllib
from paddle import nn

from paddlecraft import paddle_private as pp

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("agents", "arenas", "encoders", "craftdata", "paddlecraft")
# a private Paddle module, a private optimizer/layer attribute, or a pybind object made by hand
PRIVATE = re.compile(
    r"_C_ops|paddle\.base|paddle\.fluid|paddle\.framework\.core|\._accumulators|"
    r"\._learning_rate|\._parameter_list|\._forward_(pre|post)_hooks|_grad_ivar|"
    r"GeneratorState|\._create_accumulators|\._global_learning_rate|_BatchNormBase|"
    r"\b(?!self\b)\w+\._(mean|variance|epsilon)\b"
)


def test_version_check_accepts_only_the_checked_minor_versions():
    assert pp.checked("3.3.1") and pp.checked("3.3.0rc1")
    assert not pp.checked("3.4.0") and not pp.checked("3.30.0") and not pp.checked("0.0.0")
    assert not pp.checked("develop")
    assert pp.FAST == pp.checked(paddle.__version__)


def test_the_cpu_extra_bounds_paddle_to_the_checked_versions():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = extras["optional-dependencies"]["cpu"]
    lo, hi = re.fullmatch(r"paddlepaddle>=(\d+\.\d+),<(\d+\.\d+)", spec).groups()
    ((major, minor),) = pp.CHECKED
    assert (lo, hi) == (f"{major}.{minor}", f"{major}.{minor + 1}")


def test_no_library_module_but_this_one_touches_paddles_private_api():
    offenders = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for top in LIBRARY
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.name != "paddle_private.py"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert offenders == []


def _numbers(fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Forward, loss and eight Adam steps of a small model, on the fast or public paths."""
    monkeypatch.setattr(pp, "FAST", fast)
    paddle.seed(0)
    layer = nn.Linear(5, 4)
    sched = paddle.optimizer.lr.StepDecay(0.01, 3)
    opt = paddle.optimizer.Adam(sched, parameters=layer.parameters())
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal((8, 3, 5)), "float32")
    label = paddle.to_tensor(np.random.default_rng(1).integers(0, 4, (8, 3, 1)))
    out = []
    for _ in range(8):
        logits = pp.linear(layer, x)  # [8, 3, 4]
        loss = pp.cross_entropy(logits, label)  # [8, 3, 1]
        loss.mean().backward()
        if not pp.adam_step(opt):
            opt.step()
        opt.clear_grad()
        sched.step()
        out += [logits.numpy(), loss.numpy()]
    out += [p.numpy() for p in layer.parameters()]
    out += [v.numpy() for per in pp.accumulators(opt).values() for v in per.values()]
    return out


def test_fast_and_public_paths_give_the_same_numbers(monkeypatch):
    fast = _numbers(True, monkeypatch)
    public = _numbers(False, monkeypatch)
    assert len(fast) == len(public) > 20
    for a, b in zip(fast, public):
        np.testing.assert_array_equal(a, b)


def test_an_unchecked_paddle_runs_the_public_calls(monkeypatch):
    monkeypatch.setattr(pp, "FAST", False)
    layer = nn.Linear(2, 2)
    opt = paddle.optimizer.Adam(parameters=layer.parameters())
    layer(paddle.ones([1, 2])).sum().backward()
    assert pp.adam_step(opt) is False  # the caller steps with opt.step()
    assert all(not per for per in pp.accumulators(opt).values())
    calls = []
    layer.register_forward_post_hook(lambda *a: calls.append(1))
    pp.linear(layer, paddle.ones([1, 2]))
    assert calls == [1]  # went through layer(x)


def test_generator_state_round_trips_exactly():
    paddle.seed(7)
    paddle.rand([3])
    state = pp.get_cpu_generator_state()
    want = paddle.rand([5]).numpy()
    pp.set_cpu_generator_state(state)
    np.testing.assert_array_equal(paddle.rand([5]).numpy(), want)


def test_conv_geometry_and_batch_norm_statistics_read_the_layers_settings():
    """What the conv trunk's NumPy copy reads (`ImageCNNEncoder.numpy_forward`): a plain
    convolution's kernel, stride and padding, ``None`` for any setting the copy lacks; a
    batch norm's running statistics (the tensors themselves) and epsilon."""
    assert pp.conv2d_geometry(nn.Conv2D(2, 4, 3, stride=2, padding=1)) == (3, 2, 1)
    assert pp.conv2d_geometry(nn.Conv2D(2, 4, 4, padding=0)) == (4, 1, 0)
    for other in (
        nn.Conv2D(2, 4, 3, padding=2, dilation=2),
        nn.Conv2D(2, 4, 3, padding=1, groups=2),
        nn.Conv2D(2, 4, 3, padding=1, padding_mode="reflect"),
        nn.Conv2D(2, 4, 3, padding="SAME"),
        nn.Conv2D(2, 4, (3, 5), padding=1),
        nn.Conv2D(2, 4, 3, stride=(1, 2), padding=1),
        nn.Conv2D(2, 4, 3, padding=1, data_format="NHWC"),
    ):
        assert pp.conv2d_geometry(other) is None
    bn = nn.BatchNorm2D(3, epsilon=1e-3)
    mean, var, eps = pp.batch_norm_running(bn)
    assert mean is bn._mean and var is bn._variance and eps == pytest.approx(1e-3)
    assert pp.batch_norm_running(nn.BatchNorm2D(3, data_format="NHWC")) is None
