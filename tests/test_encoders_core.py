"""The names API on ImageMLPEncoder and ImageCNNEncoder: names, params, gradients, sharing, I/O."""

from __future__ import annotations

import gc
import json
import struct

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

from paddlecraft.craftdata import iterate_minibatches, load_digits
from paddlecraft.encoders import (
    CheckpointError,
    EncoderInputError,
    ImageCNNEncoder,
    ImageMLPEncoder,
    ScopeError,
    physical_names,
)


def _mlp(scope, **kw):
    kw.setdefault("input_size", 64)
    kw.setdefault("hidden_size", 32)
    return ImageMLPEncoder(scope, **kw).build()


def test_physical_names_are_scope_logical_suffix(scope):
    enc = _mlp(scope)
    names = [p.name for p in enc.parameters()]
    assert names == [
        f"{scope}.hidden_layer_1.w_0",
        f"{scope}.hidden_layer_1.b_0",
        f"{scope}.hidden_layer_2.w_0",
        f"{scope}.hidden_layer_2.b_0",
        f"{scope}.prediction.w_0",
        f"{scope}.prediction.b_0",
    ]
    assert enc.logical_names == ["hidden_layer_1", "hidden_layer_2", "prediction"]


def test_cnn_names_carry_scope_and_logical_layer(scope):
    enc = ImageCNNEncoder(scope, image_size=8).build()
    for logical, params in enc.named_logical_params().items():
        assert params, logical
        assert all(p.name.startswith(f"{scope}.{logical}.") for p in params)
    assert len({p.name for p in enc.parameters()}) == len(enc.parameters())


def test_two_scopes_never_collide(make_scope):
    a, b = _mlp(make_scope()), _mlp(make_scope())
    assert not {p.name for p in a.parameters()} & {p.name for p in b.parameters()}


def test_one_scope_twice_is_fine_apart_and_refused_in_one_program(scope):
    """Names must be unique per optimizer and per static program, not per process: two
    live encoders may share a scope, but not one static program (where a parameter IS
    its name: the second would silently reuse the first's weights)."""
    a, b = _mlp(scope), _mlp(scope)  # both alive, each could have its own optimizer
    assert [p.name for p in a.parameters()] == [p.name for p in b.parameters()]
    assert a.layers["prediction"].weight is not b.layers["prediction"].weight
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            _mlp(f"{scope}_static")
            with pytest.raises(ScopeError) as e:
                _mlp(f"{scope}_static")
        assert f"{scope}_static.hidden_layer_1.w_0" in str(e.value)
        assert "static program" in str(e.value) and "scope" in str(e.value)
        for _ in range(2):  # one per program is fine
            with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
                _mlp(f"{scope}_static")
    finally:
        paddle.disable_static()


def test_bad_scope_syntax_rejected():
    with pytest.raises(ScopeError, match="not a valid name scope"):
        ImageMLPEncoder("1bad scope")


def test_calling_before_build_builds(scope):
    enc = ImageMLPEncoder(scope, input_size=64, hidden_size=16)
    assert not enc.built
    out = enc(paddle.rand([3, 64]))
    assert enc.built and out.shape == [3, 10]


def test_get_param_by_logical_physical_and_prefix(scope):
    enc = _mlp(scope)
    by_logical = enc.get_param("hidden_layer_1")
    assert list(by_logical) == ["hidden_layer_1"]
    w = by_logical["hidden_layer_1"][0]
    assert enc.get_param(w.name) == {"hidden_layer_1": [w]}
    assert list(enc.get_param("hidden_layer")) == ["hidden_layer_1", "hidden_layer_2"]
    assert list(enc.get_param(f"{scope}.prediction")) == ["prediction"]
    with pytest.raises(KeyError, match="logical names"):
        enc.get_param("nope")


def test_get_gradient_param_layer_and_output_match_autograd(scope):
    enc = _mlp(scope)
    x = paddle.rand([5, 64])
    y = paddle.to_tensor([0, 1, 2, 3, 4])
    out = enc(x)
    loss = F.cross_entropy(out, y)
    (g_out,) = paddle.grad(loss, out, retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(
        enc.get_gradient("prediction")["prediction"][0].numpy(), g_out.numpy(), rtol=1e-6
    )
    w = enc.get_param("hidden_layer_2")["hidden_layer_2"][0]
    np.testing.assert_array_equal(enc.get_gradient(w)[w.name][0].numpy(), w.grad.numpy())
    layer_grads = enc.get_gradient("hidden_layer_2")["hidden_layer_2"]
    assert [g.shape for g in layer_grads] == [[32, 32], [32]]
    assert float(layer_grads[0].abs().sum()) > 0


def test_unwatched_output_gradient_error_says_what_to_do(scope):
    enc = ImageCNNEncoder(scope, image_size=8).build()
    out = enc.forward_all(paddle.rand([2, 1, 8, 8]))
    out["pooled"].sum().backward()
    with pytest.raises(RuntimeError, match=r"watch\('pooled'\)"):
        enc.get_gradient("pooled")
    enc.watch("pooled")
    enc.forward_all(paddle.rand([2, 1, 8, 8]))["pooled"].sum().backward()
    assert enc.get_gradient("pooled")["pooled"][0].shape == [2, 128]


def test_share_across_encoders_one_owner_updated_once(make_scope):
    a, b = _mlp(make_scope()), _mlp(make_scope())
    b.share("hidden_layer_2", a)
    wa = a.get_param("hidden_layer_2")["hidden_layer_2"][0]
    assert b.get_param("hidden_layer_2")["hidden_layer_2"][0] is wa
    assert wa.name.startswith(a.scope)
    assert id(wa) not in map(id, b.own_parameters()) and id(wa) in map(id, a.own_parameters())
    assert b.shared_with("hidden_layer_2") == [f"{a.scope}.hidden_layer_2"]
    assert a.shared_with("hidden_layer_2") == [f"{b.scope}.hidden_layer_2"]
    # one optimizer per encoder over what it owns: the shared weight moves once
    lr = 0.1
    opt_a = paddle.optimizer.SGD(lr, parameters=a.own_parameters())
    opt_b = paddle.optimizer.SGD(lr, parameters=b.own_parameters())
    x = paddle.rand([4, 64])
    before = wa.numpy().copy()
    (a(x).sum() + b(x).sum()).backward()
    g = wa.grad.numpy().copy()
    opt_a.step()
    opt_b.step()
    np.testing.assert_allclose(wa.numpy(), before - lr * g, rtol=0, atol=1e-7)
    table = str(b.summary())
    assert f"{a.scope}.hidden_layer_2" in table and f"{a.scope}.hidden_layer_2.w_0" in table


def test_share_mismatched_shapes_is_clear(make_scope):
    a = _mlp(make_scope(), hidden_size=16)
    b = _mlp(make_scope())
    with pytest.raises(ValueError, match="same input and output sizes"):
        b.share("hidden_layer_2", a)


def test_freeze_mid_training_under_adam_and_unfreeze(scope):
    enc = _mlp(scope)
    opt = paddle.optimizer.Adam(0.01, parameters=enc.parameters())
    x, y = paddle.rand([8, 64]), paddle.randint(0, 10, [8])

    def step():
        F.cross_entropy(enc(x), y).backward()
        opt.step()
        opt.clear_grad(set_to_zero=False)

    step()
    w = enc.get_param("hidden_layer_1")["hidden_layer_1"][0]
    enc.freeze("hidden_layer_1")
    assert enc.is_frozen("hidden_layer_1")
    frozen = w.numpy().copy()
    for _ in range(3):
        step()
    assert np.array_equal(w.numpy(), frozen)
    enc.unfreeze("hidden_layer_1")
    step()
    assert not np.array_equal(w.numpy(), frozen)


def test_summary_rows(scope):
    enc = ImageMLPEncoder(scope, input_size=784)
    enc.model["hidden_layer_2"] = enc.model["hidden_layer_1"]
    enc.build()
    rows = enc.summary()
    assert [r["logical"] for r in rows] == ["hidden_layer_1", "hidden_layer_2", "prediction"]
    assert rows[1]["physical"] == [f"{scope}.hidden_layer_1.w_0", f"{scope}.hidden_layer_1.b_0"]
    assert rows[0]["shared_with"] == [f"{scope}.hidden_layer_2"]
    assert rows[2]["shapes"] == [[784, 10], [10]]
    assert "hidden_layer_1" in str(rows)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_save_load_round_trip_safetensors(tmp_path, scope, kind):
    def make():
        if kind == "mlp":
            return _mlp(scope)
        return ImageCNNEncoder(scope, image_size=8).build()

    enc = make()
    x = paddle.rand([4, 64]) if kind == "mlp" else paddle.rand([4, 1, 8, 8])
    enc.eval()
    ref = enc(x).numpy()
    path = tmp_path / "w.safetensors"
    enc.save(path)
    header_len = struct.unpack("<Q", path.read_bytes()[:8])[0]
    header = json.loads(path.read_bytes()[8 : 8 + header_len])
    assert set(header) - {"__metadata__"} == {p.name for p in enc.parameters()}
    assert header["__metadata__"]["scope"] == scope
    del enc
    gc.collect()
    enc2 = make()
    enc2.load(path).eval()
    np.testing.assert_array_equal(enc2(x).numpy(), ref)


def test_load_into_other_scope_or_corrupt_file_is_clear(tmp_path, make_scope):
    a = _mlp(make_scope())
    path = tmp_path / "a.safetensors"
    a.save(path)
    b = _mlp(make_scope())
    with pytest.raises(CheckpointError, match="missing from file"):
        b.load(path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="not a readable safetensors"):
        a.load(path)


@pytest.mark.parametrize(
    "shape,dtype,match",
    [
        ([4, 63], "float32", r"expected \[batch, 64\] float32, got \[4, 63\] float32"),
        ([4, 64], "int64", r"got \[4, 64\] int64"),
    ],
)
def test_wrong_input_is_clear(scope, shape, dtype, match):
    enc = _mlp(scope)
    with pytest.raises(
        EncoderInputError, match=f"ImageMLPEncoder\\('{scope}'\\) input 'input'.*{match}"
    ):
        enc(paddle.zeros(shape, dtype=dtype))


def test_cnn_wrong_image_shape_is_clear(scope):
    enc = ImageCNNEncoder(scope, in_channels=3, image_size=64, num_classes=None)
    with pytest.raises(EncoderInputError, match=r"\[batch, 3, 64, 64\].*got \[2, 64, 64, 3\]"):
        enc(paddle.zeros([2, 64, 64, 3]))


def test_physical_names_for_heads(scope):
    with physical_names(f"{scope}.value_head"):
        head = paddle.nn.Linear(4, 1)
    assert [p.name for p in head.parameters()] == [
        f"{scope}.value_head.w_0",
        f"{scope}.value_head.b_0",
    ]


def test_static_programs_run_in_their_own_scopes(scope):
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        enc = ImageMLPEncoder(scope, input_size=16, hidden_size=8).build()
        loss = F.cross_entropy(enc.prediction, enc.label).mean()
        paddle.optimizer.Adam(0.1).minimize(loss)
    assert enc.static_scope is not None
    exe = paddle.static.Executor(paddle.CPUPlace())
    other = paddle.static.Scope()
    exe.run(startup, scope=enc.static_scope)
    exe.run(startup, scope=other)
    name = f"{scope}.hidden_layer_1.w_0"
    w_other = np.array(other.find_var(name).get_tensor()).copy()
    feed = {
        f"{scope}.input": np.random.rand(8, 16).astype("float32"),
        f"{scope}.label": np.ones((8, 1), "int64"),
    }
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=[loss], scope=enc.static_scope)
    assert not np.array_equal(np.array(enc.static_scope.find_var(name).get_tensor()), w_other)
    assert np.array_equal(np.array(other.find_var(name).get_tensor()), w_other)


def _fit(enc, data, epochs, lr=1e-3, seed=0):
    opt = paddle.optimizer.Adam(lr, parameters=enc.parameters())
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        enc.train()
        for xb, yb in iterate_minibatches(data.train.x, data.train.y, 64, rng):
            F.cross_entropy(enc(paddle.to_tensor(xb)), paddle.to_tensor(yb)).backward()
            opt.step()
            opt.clear_grad()
    enc.eval()
    with paddle.no_grad():
        pred = enc(paddle.to_tensor(data.test.x)).numpy().argmax(-1)
    return float((pred == data.test.y).mean())


def test_mlp_reaches_097_on_digits(scope):
    paddle.seed(0)
    data = load_digits(seed=0, flatten=True)
    acc = _fit(ImageMLPEncoder(scope, input_size=64, hidden_size=784), data, epochs=15)
    assert acc >= 0.97, acc


def test_cnn_reaches_097_on_digits(scope):
    paddle.seed(0)
    data = load_digits(seed=0)
    acc = _fit(ImageCNNEncoder(scope, image_size=8), data, epochs=10)
    assert acc >= 0.97, acc
