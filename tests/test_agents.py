"""Agents: physical names per agent, borrowed layers, checkpoints, devices, config safety, seeds."""

from __future__ import annotations

import functools
import gc
import json
import os
import struct

import numpy as np
import paddle
import pytest

from paddlecraft import agents
from paddlecraft.agents import (
    Agent,
    Classifier,
    DeviceError,
    UnsafeConfigError,
    check_targets,
    resolve_device,
)
from paddlecraft.agents.optim import scheduler_rate_arg
from paddlecraft.encoders import CheckpointError, ScopeError
from paddlecraft.errors import ConfigError

IN, HID, NC = 16, 16, 4
MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": IN,
    "hidden_size": HID,
    "num_classes": NC,
}
SGD = {"_target_": "paddle.optimizer.SGD", "_partial_": True}
ADAM = {"_target_": "paddle.optimizer.Adam", "_partial_": True}
STEP_DECAY = {
    "_target_": "paddle.optimizer.lr.StepDecay",
    "_partial_": True,
    "step_size": 1,
    "gamma": 0.5,
}


def _clf(name, **kw):
    kw.setdefault("encoder", MLP)
    kw.setdefault("seed", 0)
    return Classifier(name, **kw)


def _batches(n, seed=123, size=8):
    rng = np.random.default_rng(seed)
    return [
        (
            paddle.to_tensor(rng.standard_normal((size, IN)).astype("float32")),
            paddle.to_tensor(rng.integers(0, NC, size).astype("int64")),
        )
        for _ in range(n)
    ]


def _params_np(agent):
    return {p.name: p.numpy().copy() for p in agent.parameters()}


# ---------------------------------------------------------------------------- names
def test_every_physical_name_starts_with_agent_name(make_scope):
    name = make_scope("clf")
    agent = _clf(name)
    names = [p.name for p in agent.parameters()]
    assert names == [
        f"{name}.hidden_layer_1.w_0",
        f"{name}.hidden_layer_1.b_0",
        f"{name}.hidden_layer_2.w_0",
        f"{name}.hidden_layer_2.b_0",
        f"{name}.prediction.w_0",
        f"{name}.prediction.b_0",
    ]
    assert all(n.startswith(f"{name}.") for n in names)
    # the optimizer takes exactly the agent's own parameters, each once
    own = agent.own_parameters()
    assert [p.name for p in own] == names
    opt_ids = [id(p) for p in agent.optimizer._parameter_list]
    assert sorted(opt_ids) == sorted(id(p) for p in own)
    weights, _, meta = agent.state_files()
    assert sorted(weights) == sorted(names)
    assert meta["name"] == name


def test_two_agents_get_disjoint_physical_names(make_scope):
    a, b = _clf(make_scope("clf")), _clf(make_scope("clf"))
    na = {p.name for p in a.parameters()}
    nb = {p.name for p in b.parameters()}
    assert na.isdisjoint(nb)
    assert len(na) == len(nb) == 6


# ---------------------------------------------------------------------------- sharing
def test_borrowed_layer_is_deduplicated_and_updated_once_by_its_owner(make_scope):
    lr = 0.1
    a = _clf(make_scope("owner"), optimizer=SGD, lr=lr, seed=1)
    b = _clf(make_scope("borrower"), optimizer=SGD, lr=lr, seed=2)
    b.encoder.share("hidden_layer_2", a.encoder)
    b.build_optimizer()

    shared_w = a.encoder.layers["hidden_layer_2"].weight
    assert b.encoder.layers["hidden_layer_2"].weight is shared_w
    assert b.encoder.borrowed == {"hidden_layer_2": (a.encoder, "hidden_layer_2")}
    assert a.encoder.borrowed == {}
    a_ids = {id(p) for p in a.parameters()}

    b_params = b.parameters()
    assert len({id(p) for p in b_params}) == len(b_params)  # no duplicates
    own_b = b.own_parameters()
    assert all(id(p) not in a_ids for p in own_b)
    assert all(p.name.startswith(f"{b.name}.") for p in own_b)
    assert len(own_b) == 4  # hidden_layer_1 + prediction (w, b)
    borrowed = [p for p in b_params if id(p) in a_ids]
    assert sorted(p.name for p in borrowed) == [
        f"{a.name}.hidden_layer_2.b_0",
        f"{a.name}.hidden_layer_2.w_0",
    ]
    assert {id(p) for p in b.optimizer._parameter_list} == {id(p) for p in own_b}

    # one step on a loss that uses both agents
    x, y = _batches(1)[0]
    old = shared_w.numpy().copy()
    old_b_pred = b.encoder.layers["prediction"].weight.numpy().copy()
    loss = a.loss(x, y) + b.loss(x, y)
    loss.backward()
    grad = shared_w.grad.numpy().copy()
    grad_b_pred = b.encoder.layers["prediction"].weight.grad.numpy().copy()
    assert np.abs(grad).max() > 0
    a.optimizer.step()
    b.optimizer.step()
    new = shared_w.numpy()
    np.testing.assert_allclose(new, old - np.float32(lr) * grad, rtol=0, atol=1e-7)
    assert not np.allclose(new, old - 2 * np.float32(lr) * grad, rtol=0, atol=1e-7)
    # B's own weights moved by B's optimizer
    np.testing.assert_allclose(
        b.encoder.layers["prediction"].weight.numpy(),
        old_b_pred - np.float32(lr) * grad_b_pred,
        rtol=0,
        atol=1e-7,
    )

    text = b.summary()
    lines = {line.split()[0]: line for line in text.splitlines()[2:]}
    assert f"{a.name} (borrowed" in lines[f"{a.name}.hidden_layer_2.w_0"]
    assert f"{b.name} (SGD)" in lines[f"{b.name}.hidden_layer_1.w_0"]
    assert "borrowed" not in lines[f"{b.name}.prediction.w_0"]


def test_borrowing_from_an_agent_whose_name_extends_mine(make_scope):
    """Agent ``t`` borrowing from agent ``t.gen``: the prefix ``t.`` must not make it the owner."""
    lr = 0.1
    base = make_scope("team")
    lender = _clf(f"{base}.gen", optimizer=SGD, lr=lr, seed=1)
    me = _clf(base, optimizer=SGD, lr=lr, seed=2)
    me.encoder.share("hidden_layer_2", lender.encoder)
    me.build_optimizer()
    shared_w = lender.encoder.layers["hidden_layer_2"].weight
    assert id(shared_w) not in {id(p) for p in me.own_parameters()}
    assert id(shared_w) not in {id(p) for p in me.optimizer._parameter_list}
    x, y = _batches(1)[0]
    old = shared_w.numpy().copy()
    (lender.loss(x, y) + me.loss(x, y)).backward()
    grad = shared_w.grad.numpy().copy()
    lender.optimizer.step()
    me.optimizer.step()
    np.testing.assert_allclose(shared_w.numpy(), old - np.float32(lr) * grad, rtol=0, atol=1e-7)
    row = next(r for r in me.summary().splitlines() if r.startswith(shared_w.name))
    assert f"{lender.name} (borrowed" in row


# ---------------------------------------------------------------------------- save / load
def _train(agent, batches):
    for x, y in batches:
        agent.update(agent.loss(x, y))


def _assert_not_pickle(path):
    data = path.read_bytes()
    assert not data.startswith(b"\x80"), f"{path.name} looks like a pickle"
    if path.suffix == ".safetensors":
        (n,) = struct.unpack("<Q", data[:8])
        assert 0 < n <= len(data) - 8
        assert data[8:9] == b"{"
        json.loads(data[8 : 8 + n])  # the header is JSON
    else:
        assert path.suffix == ".json"
        json.loads(data)


def test_save_load_round_trip_continues_training_identically(make_scope, tmp_path):
    name = make_scope("clf")
    agent = _clf(name, optimizer=ADAM, lr=0.01)
    batches = _batches(6)
    _train(agent, batches[:3])
    d = tmp_path / "ckpt"
    sums = agent.save(d)

    assert sorted(os.listdir(d)) == ["agent.json", "optimizer.safetensors", "weights.safetensors"]
    assert sorted(sums) == ["optimizer.safetensors", "weights.safetensors"]
    for f in d.iterdir():
        _assert_not_pickle(f)
    meta = json.loads((d / "agent.json").read_text())
    assert meta["class"] == "paddlecraft.agents.classifier.Classifier"
    assert meta["name"] == name
    assert meta["step"] == 3
    assert meta["config"]["encoder"] == MLP
    assert meta["config"]["optimizer"] == ADAM
    assert meta["config"]["lr"] == 0.01
    assert meta["config"]["seed"] == 0

    new_name = make_scope("clf")
    loaded = Agent.load(d, name=new_name)
    assert type(loaded) is Classifier
    assert loaded.step_count == 3
    assert not loaded.training  # loaded for inference
    x = np.random.default_rng(7).standard_normal((32, IN)).astype("float32")
    agent.eval()
    np.testing.assert_array_equal(
        loaded(paddle.to_tensor(x)).numpy(), agent(paddle.to_tensor(x)).numpy()
    )
    np.testing.assert_array_equal(loaded.predict(x), agent.predict(x))

    # 3 more Adam steps on both: bit-identical only if the moments and beta powers came back
    agent.train()
    loaded.train()
    _train(agent, batches[3:])
    _train(loaded, batches[3:])
    pa, pl = _params_np(agent), _params_np(loaded)
    assert sorted(pl) == sorted(n.replace(name, new_name, 1) for n in pa)
    for n, v in pa.items():
        np.testing.assert_array_equal(pl[n.replace(name, new_name, 1)], v, err_msg=n)


def test_fresh_optimizer_state_would_diverge(make_scope, tmp_path):
    """Control for the test above: loading without optimizer state does NOT match."""
    agent = _clf(make_scope("clf"), optimizer=ADAM, lr=0.01)
    batches = _batches(6)
    _train(agent, batches[:3])
    agent.save(tmp_path)
    other = _clf(make_scope("clf"), optimizer=ADAM, lr=0.01)
    other.load_state(tmp_path, old_name=agent.name, optimizer=False)
    _train(agent, batches[3:])
    _train(other, batches[3:])
    wa = agent.encoder.layers["prediction"].weight.numpy()
    wo = other.encoder.layers["prediction"].weight.numpy()
    assert not np.array_equal(wa, wo)


def test_lr_scheduler_state_round_trips(make_scope, tmp_path):
    agent = _clf(make_scope("clf"), optimizer=ADAM, lr=0.1, lr_scheduler=STEP_DECAY)
    assert agent.optimizer.get_lr() == pytest.approx(0.1)
    agent.scheduler_step()
    agent.scheduler_step()
    assert agent.optimizer.get_lr() == pytest.approx(0.025)
    agent.save(tmp_path)
    meta = json.loads((tmp_path / "agent.json").read_text())
    assert meta["optimizer"]["lr_scheduler"]["last_epoch"] == 2
    loaded = Agent.load(tmp_path, name=make_scope("clf"))
    assert loaded.optimizer.get_lr() == agent.optimizer.get_lr()
    assert loaded.scheduler is not None and loaded.scheduler.last_epoch == 2
    loaded.scheduler_step()
    assert loaded.optimizer.get_lr() == pytest.approx(0.0125)


def test_a_one_cycle_schedule_peaks_at_lr_and_round_trips(make_scope, tmp_path):
    one_cycle = {"_target_": "paddle.optimizer.lr.OneCycleLR", "_partial_": True,
                 "total_steps": 10, "divide_factor": 4.0, "phase_pct": 0.3,
                 "end_learning_rate": 0.001}  # fmt: skip
    agent = _clf(make_scope("clf"), optimizer=ADAM, lr=0.02, lr_scheduler=one_cycle)
    rates = [agent.optimizer.get_lr()]
    for _ in range(2):
        agent.scheduler_step()
        rates.append(agent.optimizer.get_lr())
    # agents.*.lr is the cycle's peak (OneCycleLR's max_learning_rate): 0.02 / 4 up to 0.02
    assert rates[0] == pytest.approx(0.005) and max(rates) == pytest.approx(0.02)
    agent.save(tmp_path)
    loaded = Agent.load(tmp_path, name=make_scope("clf"))
    for a in (agent, loaded):
        a.scheduler_step()
    assert loaded.optimizer.get_lr() == agent.optimizer.get_lr() < 0.02


def test_a_scheduler_that_takes_no_rate_is_refused_naming_the_setting():
    def no_rate(step_size: int) -> None: ...

    with pytest.raises(ConfigError, match="agents.policy.lr_scheduler: no_rate takes none of "
                       "learning_rate, max_learning_rate"):  # fmt: skip
        scheduler_rate_arg(functools.partial(no_rate, step_size=2), "policy")
    assert scheduler_rate_arg(functools.partial(paddle.optimizer.lr.StepDecay), "a") == (
        "learning_rate"
    )


def test_load_under_another_name_maps_physical_names(make_scope, tmp_path):
    old = make_scope("clf")
    new = old + "_2"  # the old name is a prefix of the new one
    agent = _clf(old, optimizer=ADAM)
    _train(agent, _batches(2))
    agent.save(tmp_path)
    loaded = Agent.load(tmp_path, name=new)
    names = [p.name for p in loaded.parameters()]
    assert names == [n.replace(old, new, 1) for n in (p.name for p in agent.parameters())]
    assert all(n.startswith(f"{new}.") for n in names)
    assert not any(n.startswith(f"{old}.") for n in names)
    assert len(loaded.own_parameters()) == 6  # all owned under the new name
    # Adam moments were re-keyed to the new names and hold the saved values
    for acc in ("moment1", "moment2"):
        src = agent.optimizer._accumulators[acc]
        dst = loaded.optimizer._accumulators[acc]
        for p in agent.parameters():
            np.testing.assert_array_equal(
                dst[p.name.replace(old, new, 1)].numpy(), src[p.name].numpy()
            )
    # the weights file itself keeps the saved names
    from safetensors import safe_open

    with safe_open(str(tmp_path / "weights.safetensors"), framework="numpy") as f:
        assert sorted(f.keys()) == sorted(p.name for p in agent.parameters())
        assert f.metadata()["agent"] == old


def test_truncated_weights_raise_checkpoint_error(make_scope, tmp_path):
    agent = _clf(make_scope("clf"))
    agent.save(tmp_path)
    w = tmp_path / "weights.safetensors"
    w.write_bytes(w.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="weights.safetensors"):
        Agent.load(tmp_path, name=make_scope("clf"))
    # without the recorded checksum the broken header itself is reported
    meta = json.loads((tmp_path / "agent.json").read_text())
    del meta["sha256"]
    (tmp_path / "agent.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="weights.safetensors.*not a readable"):
        Agent.load(tmp_path, name=make_scope("clf"))


def test_missing_dir_raises_checkpoint_error_naming_agent_json(tmp_path):
    with pytest.raises(CheckpointError, match="agent.json"):
        Agent.load(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="agent.json"):
        agents.load_agent(tmp_path)  # exists but empty


def test_load_refuses_tampered_class(make_scope, tmp_path):
    _clf(make_scope("clf")).save(tmp_path)
    meta = json.loads((tmp_path / "agent.json").read_text())
    meta["class"] = "subprocess.Popen"
    (tmp_path / "agent.json").write_text(json.dumps(meta))
    with pytest.raises(UnsafeConfigError, match="subprocess.Popen"):
        Agent.load(tmp_path, name=make_scope("clf"))


# ---------------------------------------------------------------------------- devices
def test_resolve_device_cpu_and_malformed():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(" CPU ") == "cpu"
    assert resolve_device("cpu:0") == "cpu"
    for bad in ("tpu", "gpu:x", "cuda:0", "cpu:1"):
        with pytest.raises(DeviceError) as e:
            resolve_device(bad, setting="agents.clf.device")
        msg = str(e.value)
        assert f"agents.clf.device={bad!r}" in msg
        assert "\n" not in msg


@pytest.mark.skipif(paddle.device.is_compiled_with_cuda(), reason="needs the CPU-only build")
@pytest.mark.parametrize("spec", ["gpu", "gpu:0"])
def test_gpu_on_cpu_build_is_one_clear_line(spec):
    with pytest.raises(DeviceError) as e:
        resolve_device(spec, setting="agents.clf.device")
    msg = str(e.value)
    assert "\n" not in msg
    assert f"agents.clf.device={spec!r}" in msg
    assert "CPU-only" in msg
    assert "set agents.clf.device=cpu" in msg


def test_gpu_index_beyond_count_on_simulated_cuda_build(monkeypatch):
    monkeypatch.setattr(paddle.device, "is_compiled_with_cuda", lambda: True)
    monkeypatch.setattr(paddle.device.cuda, "device_count", lambda: 1)
    assert resolve_device("gpu") == "gpu:0"
    assert resolve_device("gpu:0") == "gpu:0"
    with pytest.raises(DeviceError) as e:
        resolve_device("gpu:3", setting="agents.clf.device")
    msg = str(e.value)
    assert "has 1 GPU(s)" in msg
    assert "agents.clf.device='gpu:3'" in msg
    assert "\n" not in msg


@pytest.mark.skipif(paddle.device.is_compiled_with_cuda(), reason="needs the CPU-only build")
def test_classifier_on_gpu_fails_before_building(make_scope, monkeypatch):
    built = []
    monkeypatch.setattr(agents.base, "safe_instantiate", lambda *a, **k: built.append(a))
    name = make_scope("clf")
    with pytest.raises(DeviceError, match=rf"agents\.{name}\.device='gpu:0'"):
        Classifier(name, encoder=MLP, device="gpu:0")
    assert built == []


# ---------------------------------------------------------------------------- config safety
def test_check_targets_refuses_unsafe_targets():
    with pytest.raises(UnsafeConfigError, match="os.system"):
        check_targets({"_target_": "os.system"})
    with pytest.raises(UnsafeConfigError, match=r"a\.b\[0\]\._target_.*subprocess\.run"):
        check_targets({"a": {"b": [{"_target_": "subprocess.run"}]}})
    # allowed prefix by name, but it resolves to os.system
    with pytest.raises(UnsafeConfigError, match="resolves to"):
        check_targets({"_target_": "paddlecraft.encoders.base.os.system"})
    with pytest.raises(UnsafeConfigError, match="cannot be found"):
        check_targets({"_target_": "paddlecraft.encoders.NoSuchEncoder"})


def test_check_targets_accepts_toolkit_and_paddle_targets():
    check_targets({"_target_": "paddle.optimizer.Adam"})
    check_targets({"_target_": "paddlecraft.encoders.ImageMLPEncoder"})
    check_targets({"opt": ADAM, "sched": STEP_DECAY, "enc": [MLP]})
    with pytest.raises(UnsafeConfigError):
        check_targets({"_target_": "collections.OrderedDict"})
    check_targets({"_target_": "collections.OrderedDict"}, allow=["collections.OrderedDict"])
    check_targets({"_target_": "collections.OrderedDict"}, allow=["collections."])
    # an exact allow entry does not open up its neighbours
    with pytest.raises(UnsafeConfigError):
        check_targets({"_target_": "collections.Counter"}, allow=["collections.OrderedDict"])


@pytest.mark.parametrize("target", ["os.system", "paddlecraft.encoders.base.os.system"])
def test_classifier_with_unsafe_encoder_never_calls_it(make_scope, monkeypatch, target):
    calls = []
    monkeypatch.setattr(os, "system", lambda *a, **k: calls.append(a) or 0)
    name = make_scope("clf")
    with pytest.raises(UnsafeConfigError, match="paddlecraft.encoders.base.os.system|os.system"):
        Classifier(name, encoder={"_target_": target, "command": "echo pwned"})
    assert calls == []


# ---------------------------------------------------------------------------- seeds
def test_same_seed_different_names_give_different_weights(make_scope):
    a = _clf(make_scope("clf"), seed=5)
    b = _clf(make_scope("clf"), seed=5)
    wa = a.encoder.layers["hidden_layer_1"].weight.numpy()
    wb = b.encoder.layers["hidden_layer_1"].weight.numpy()
    assert not np.array_equal(wa, wb)


def test_seeded_weights_do_not_depend_on_global_stream(make_scope):
    name = make_scope("clf")
    first = _params_np(_clf(name, seed=3))  # the agent is dropped right away
    gc.collect()
    paddle.rand([7])
    paddle.randn([3, 5])
    second_agent = _clf(name, seed=3)
    second = _params_np(second_agent)
    assert sorted(first) == sorted(second)
    for n in first:
        np.testing.assert_array_equal(first[n], second[n], err_msg=n)
    # a different seed under the same name gives different weights
    del second_agent
    gc.collect()
    other = _params_np(_clf(name, seed=4))
    w = f"{name}.hidden_layer_1.w_0"
    assert not np.array_equal(first[w], other[w])


def test_seeded_build_leaves_global_stream_untouched(make_scope):
    paddle.seed(11)
    expected = paddle.rand([5]).numpy()
    paddle.seed(11)
    _clf(make_scope("clf"), seed=9)
    np.testing.assert_array_equal(paddle.rand([5]).numpy(), expected)


def test_update_returns_the_gradient_norm_before_the_step(make_scope):
    agent = _clf(make_scope("gn"), optimizer=SGD, lr=0.1)
    x, y = _batches(1)[0]
    loss = agent.loss(x, y)
    # the same gradients, computed independently
    ref_grads = paddle.grad(agent.loss(x, y), agent.own_parameters())
    want = float(np.sqrt(sum(float((g.numpy().astype(np.float64) ** 2).sum()) for g in ref_grads)))
    before = _params_np(agent)
    norm = agent.update(loss, grad_norm=True)
    assert norm == pytest.approx(want, rel=1e-5) and want > 0
    after = _params_np(agent)
    assert any(not np.array_equal(before[k], after[k]) for k in before)  # the step happened
    assert agent.update(agent.loss(x, y)) is None  # no norm unless asked: no host sync


def test_freeze_setting_freezes_logical_layers_at_start(make_scope):
    from paddlecraft.agents.settings import ConfigError

    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 64, "hidden_size": 16}
    agent = Classifier(make_scope("frz"), encoder=enc, freeze=["hidden_layer_1"], seed=0)
    e = agent.encoder
    assert e.is_frozen("hidden_layer_1") and not e.is_frozen("prediction")
    before = {p.name: p.numpy().copy() for p in agent.parameters()}
    x, y = np.random.default_rng(0).random((8, 64), np.float32), np.arange(8) % 10
    agent.update(agent.loss(agent.to_tensor(x), agent.to_tensor(y)))
    for p in agent.parameters():
        moved = not np.array_equal(before[p.name], p.numpy())
        assert moved == (".hidden_layer_1." not in p.name), p.name
    agent.unfreeze("hidden_layer_1")
    assert not e.is_frozen("hidden_layer_1")
    assert agent.config["freeze"] == ["hidden_layer_1"]  # saved with the agent
    with pytest.raises(ConfigError) as err:
        Classifier(make_scope("frz"), encoder=enc, freeze=["stem"])
    assert "'stem'" in str(err.value) and "hidden_layer_1" in str(err.value)


# ---------------------------------------------------------------------------- joint loss
def test_update_together_steps_each_agent_once_with_the_joint_gradients(make_scope):
    """One backward over speaker+listener's loss == each agent's own SGD step on its grads."""
    small = {**MLP, "input_size": NC}  # the listener reads the speaker's 4 logits
    spk = _clf(make_scope("spk"), optimizer=SGD, lr=0.1)
    lis = _clf(make_scope("lis"), encoder=small, optimizer=SGD, lr=0.5,
               freeze=["hidden_layer_1"])  # fmt: skip
    bystander = _clf(make_scope("by"), encoder=small, optimizer=SGD, lr=0.1)
    ((x, y),) = _batches(1)

    def joint_loss():
        return lis.loss(spk(x) + bystander(spk(x)), y)

    # expected: the gradient of the same loss w.r.t. every parameter, taken separately
    before = {a.name: _params_np(a) for a in (spk, lis, bystander)}
    params = [p for a in (spk, lis) for p in a.parameters() if not p.stop_gradient]
    grads = dict(zip([p.name for p in params], paddle.grad(joint_loss(), params)))
    for a in (spk, lis, bystander):
        a.clear_gradients()

    norms = agents.update_together(joint_loss(), [spk, lis], grad_norm=True)
    assert set(norms) == {spk.name, lis.name} and all(n > 0 for n in norms.values())
    for a, lr in ((spk, 0.1), (lis, 0.5)):
        for p in a.parameters():
            old = before[a.name][p.name]
            if p.stop_gradient:  # the listener's frozen hidden layer
                assert ".hidden_layer_1." in p.name
                np.testing.assert_array_equal(p.numpy(), old)
            else:
                want = old - lr * grads[p.name].numpy()
                np.testing.assert_allclose(p.numpy(), want, rtol=1e-5, atol=1e-6)
                assert p.grad is None or not np.any(p.grad.numpy())  # cleared after the step
        assert a.step_count == 1
    for p in bystander.parameters():  # took part in the forward, not in the update
        np.testing.assert_array_equal(p.numpy(), before[bystander.name][p.name])
    assert bystander.step_count == 0


def test_update_together_refuses_duplicates_and_fp16(make_scope, monkeypatch):
    a = _clf(make_scope("ja"))
    ((x, y),) = _batches(1)
    with pytest.raises(ValueError, match="distinct"):
        agents.update_together(a.loss(x, y), [a, a])
    monkeypatch.setattr(a.amp, "scaler", object())  # as amp=fp16 would set
    with pytest.raises(agents.ConfigError, match="amp=bf16"):
        agents.update_together(a.loss(x, y), [a])


def test_update_together_refuses_an_agent_with_nothing_to_update_before_the_backward(make_scope):
    a, fixed = _clf(make_scope("jb")), _clf(make_scope("jfixed"))
    fixed.optimizer = None  # as build_optimizer leaves an agent with no own parameters
    ((x, y),) = _batches(1)
    with pytest.raises(RuntimeError, match=f"agent '{fixed.name}' has no trainable parameters"):
        agents.update_together(a.loss(x, y) + fixed.loss(x, y), [a, fixed])
    assert all(p.grad is None for p in a.parameters())  # refused before any backward


def test_an_agent_saved_before_the_namespace_loads(make_scope, tmp_path):
    """agent.json files written by 0.1 name ``agents.…``/``encoders.…``: they still load."""
    a = _clf(make_scope("old"))
    a.save(tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "agent.json").read_text())
    meta["class"] = "agents.classifier.Classifier"
    meta["config"]["encoder"]["_target_"] = "encoders.ImageMLPEncoder"
    (tmp_path / "a" / "agent.json").write_text(json.dumps(meta))
    b = Agent.load(tmp_path / "a", name=make_scope("new"))
    assert type(b) is Classifier
    assert b.config["encoder"]["_target_"] == "paddlecraft.encoders.ImageMLPEncoder"
    x = _batches(1)[0][0]
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


# ---------------------------------------------------------------------------- physical names
class _TwoEncoders(Classifier):
    """A careless agent: its second encoder is built in the same scope as the first."""

    def __init__(self, name, role=None, **settings):
        super().__init__(name, **settings)
        with self.seeded():
            self.second = self.make_encoder(MLP, role=role)
        self.build_optimizer()


def test_one_optimizer_refuses_two_parameters_with_one_name(make_scope):
    name = make_scope("clf")
    with pytest.raises(ScopeError) as e:
        _TwoEncoders(name, encoder=MLP)
    msg = str(e.value)
    assert f"agents.{name}'s optimizer" in msg and f"{name}.hidden_layer_1.w_0" in msg
    assert "role" in msg  # the fix
    ok = _TwoEncoders(make_scope("clf"), role="second", encoder=MLP)
    assert len(ok.optimizer._parameter_list) == 12  # two MLPs, each stepped once


def test_two_agents_may_share_a_name_each_with_its_own_optimizer(make_scope):
    """What names must be unique across is an optimizer, not the process: two live agents
    of one name train apart (a frozen opponent beside its learner, a sweep's next job)."""
    name = make_scope("clf")
    a, b = _clf(name, seed=1), _clf(name, seed=2)
    ((x, y),) = _batches(1)
    before = _params_np(b)
    a.update(a.loss(x, y))
    after = _params_np(b)
    assert all(np.array_equal(before[k], after[k]) for k in before)  # b untouched by a's step
