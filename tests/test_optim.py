"""agents.optim.adam_step: Paddle's Adam update without its Python bookkeeping, bit-identical."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from paddle import nn

from paddlecraft.agents.optim import adam_step, optimizer_state


def _twins(seed: int = 0) -> tuple[nn.Layer, nn.Layer]:
    """Two identical small models (an unused layer among them: a parameter with no grad)."""
    paddle.seed(seed)
    a = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3), nn.Linear(3, 3))
    b = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3), nn.Linear(3, 3))
    b.set_state_dict(a.state_dict())
    return a, b


def _backward(model: nn.Layer, x: paddle.Tensor) -> None:
    model[2](model[1](model[0](x))).square().mean().backward()  # model[3] unused: grad None


@pytest.mark.parametrize("scheduled", [False, True])
def test_adam_step_is_bit_identical_to_adam_step_method(scheduled):
    ref, fast = _twins()
    fast[0].weight.stop_gradient = True  # frozen: both must leave it (and its moments) alone

    def make(model):
        lr = paddle.optimizer.lr.StepDecay(0.01, step_size=2, gamma=0.5) if scheduled else 0.01
        return paddle.optimizer.Adam(lr, parameters=model.parameters())

    o_ref, o_fast = make(ref), make(fast)
    ref[0].weight.stop_gradient = True
    frozen = fast[0].weight.numpy().copy()
    rng = np.random.default_rng(0)
    for step in range(6):
        x = paddle.to_tensor(rng.standard_normal((5, 6)).astype("float32"))
        for model in (ref, fast):
            _backward(model, x)
        o_ref.step()
        assert adam_step(o_fast) is True
        for o in (o_ref, o_fast):
            o.clear_grad(set_to_zero=False)
            if scheduled:
                o._learning_rate.step()
            elif step == 2:
                o.set_lr(0.003)
        for p, q in zip(ref.parameters(), fast.parameters()):
            np.testing.assert_array_equal(p.numpy(), q.numpy())
    np.testing.assert_array_equal(fast[0].weight.numpy(), frozen)
    t_ref, _ = optimizer_state(o_ref)
    t_fast, _ = optimizer_state(o_fast)
    same = {p.name: q.name for p, q in zip(ref.parameters(), fast.parameters())}
    assert len(t_fast) == 4 * 3  # 4 accumulators of the 3 trained tensors (not the frozen)
    assert sorted(f"{k.split('/')[0]}/{same[k.split('/')[1]]}" for k in t_ref) == sorted(t_fast)
    for key, value in t_ref.items():
        acc, name = key.split("/")
        np.testing.assert_array_equal(value.numpy(), t_fast[f"{acc}/{same[name]}"].numpy())


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: paddle.optimizer.Adam(0.01, parameters=ps, weight_decay=0.1),
        lambda ps: paddle.optimizer.Adam(
            0.01, parameters=ps, grad_clip=nn.ClipGradByGlobalNorm(1.0)
        ),
        lambda ps: paddle.optimizer.Adam(0.01, parameters=ps, amsgrad=True),
        lambda ps: paddle.optimizer.AdamW(0.01, parameters=ps),
        lambda ps: paddle.optimizer.SGD(0.01, parameters=ps),
        lambda ps: paddle.optimizer.Adam(0.01, parameters=[{"params": ps}]),
    ],
    ids=["weight_decay", "grad_clip", "amsgrad", "adamw", "sgd", "param_groups"],
)
def test_adam_step_declines_what_it_does_not_cover_and_touches_nothing(make):
    model, _ = _twins()
    opt = make(model.parameters())
    _backward(model, paddle.ones([2, 6]))
    before = [p.numpy().copy() for p in model.parameters()]
    assert adam_step(opt) is False
    for p, old in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), old)
    assert all(not per for per in opt._accumulators.values())  # no moments made either
