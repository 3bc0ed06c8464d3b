"""The value head's own hidden layer (``agents.policy.value_hidden``, AlphaZero's value
head): its shapes and the value it computes, every evaluator reading the same value, the
policy without it unchanged, training through it, the settings' check, the saved policy
an exported policy and a bit-identical resume with it on."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from selfplay_kit import replay_arena as _arena
from selfplay_kit import ttt_boards, ttt_policy
from test_frozen_evaluator import LINES

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.export import export_layer, read_record
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay.alphazero import alphazero_step
from paddlecraft.arenas.selfplay.config import UpdateConfig


def _c4(name: str, **kw: object) -> Policy:
    return Policy(name, encoder=LINES, obs_shape=[6, 7, 2], num_actions=7, seed=0, **kw)


def _planes_and_masks(n: int = 32) -> tuple[np.ndarray, np.ndarray]:
    planes = np.random.default_rng(1).integers(0, 2, (n, 6, 7, 2)).astype(np.float32)
    masks = np.random.default_rng(2).random((n, 7)) < 0.7
    masks[:, 3] = True
    return planes, masks


@pytest.mark.parametrize("bins", [0, 21], ids=["tanh", "hl-gauss"])
def test_the_value_is_read_through_the_hidden_layer(bins, make_scope):
    policy = _c4(make_scope("vh"), value_hidden=24, value_bins=bins)
    feat = policy.encoder.feature_dim
    assert policy.value_hidden.weight.shape == [feat, 24]
    assert policy.value_head.weight.shape == [24, max(bins, 1)]
    assert policy.policy_head.weight.shape == [feat, 7]  # the policy reads the trunk as before
    planes, _ = _planes_and_masks()
    out = policy.heads(planes)
    # the reference: the trunk's features, then ReLU(h W1 + b1) W2 + b2, by hand in NumPy
    h = policy.encoder.forward_all(paddle.to_tensor(planes.reshape(32, -1)))["pooled"].numpy()
    w1, b1 = policy.value_hidden.weight.numpy(), policy.value_hidden.bias.numpy()
    w2, b2 = policy.value_head.weight.numpy(), policy.value_head.bias.numpy()
    z = np.maximum(h @ w1 + b1, 0) @ w2 + b2  # [32, 1 or bins]
    if bins:
        p = np.exp(z - z.max(1, keepdims=True))
        want = (p / p.sum(1, keepdims=True) * np.linspace(-1, 1, bins)).sum(1)
    else:
        want = np.tanh(z[:, 0])
    np.testing.assert_allclose(out["value"].numpy(), want, rtol=1e-5, atol=1e-6)
    assert 0.05 < (h @ w1 + b1 < 0).mean() < 0.95  # the ReLU cuts some units, not all


@pytest.mark.parametrize("moves_left", [False, True], ids=["value", "moves-left"])
def test_every_evaluator_reads_the_same_value(moves_left, make_scope):
    policy = _c4(make_scope("vhe"), value_hidden=24, moves_left=moves_left)
    with paddle.no_grad():  # values well away from 0
        policy.value_head.weight.set_value(policy.value_head.weight * 8)
    planes, masks = _planes_and_masks()
    want = policy.heads(planes)["value"].numpy()
    assert np.abs(want).max() > 0.1
    live = policy.search_settings()["evaluate"](planes, masks)
    frozen = policy.search_settings(frozen=True)["evaluate"]
    assert frozen not in (policy.priors_and_values, policy.priors_values_and_moves_left)
    got = frozen(planes, masks)
    assert len(got) == len(live) == (3 if moves_left else 2)
    np.testing.assert_allclose(live[1], want, atol=1e-7)
    for a, b in zip(got, live):  # the NumPy copy: the same numbers to float32 rounding
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert policy(planes)[1].shape == [32]  # forward (PPO, export): the scalar value


def test_without_it_the_policy_is_unchanged(make_scope):
    plain, hidden = _c4("vh_same"), _c4("vh_same", value_hidden=16)
    names = {n for n, _ in plain.named_parameters()}
    assert not any("value_hidden" in n for n in names) and plain.value_hidden_size == 0
    extra = {n for n, _ in hidden.named_parameters()} - names
    assert extra == {"value_hidden.weight", "value_hidden.bias"}
    # made last: every other layer but the value head starts with the same weights
    theirs = dict(hidden.named_parameters())
    for n, p in plain.named_parameters():
        if not n.startswith("value_head"):
            assert np.array_equal(p.numpy(), theirs[n].numpy()), n


def test_search_updates_train_it_toward_the_targets(make_scope):
    policy = ttt_policy(make_scope("vht"), value_hidden=32, lr=0.01)
    obs = ttt_boards(6)
    z = np.array([-0.9, -0.45, 0.0, 0.2, 0.6, 0.95], np.float32)
    batch = {"obs": obs, "mask": np.ones((6, 9), bool), "pi": np.full((6, 9), 1 / 9, np.float32),
             "z": z}  # fmt: skip
    before = policy.value_hidden.weight.numpy().copy()
    first = alphazero_step(policy, batch, UpdateConfig())
    for _ in range(300):
        last = alphazero_step(policy, batch, UpdateConfig())
    assert np.abs(policy.value_hidden.weight.numpy() - before).max() > 1e-3  # it learns
    assert last["value_loss"] < first["value_loss"] / 50
    _, values = policy.priors_and_values(obs, batch["mask"])
    assert np.abs(values - z).max() < 0.05


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (-1, r"value_hidden=-1: expected an integer >= 0 .*value_hidden=256"),
        (2.5, r"value_hidden: Value '2.5' .* could not be converted to Integer"),
    ],
)
def test_the_setting_is_checked(bad, message, make_scope):
    with pytest.raises(ConfigError, match=message):
        ttt_policy(make_scope("vhbad"), value_hidden=bad)


def test_saved_policy_evaluates_as_trained(make_scope, tmp_path):
    policy = ttt_policy(make_scope("vhs"), value_hidden=12)
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("vhs2"))
    assert loaded.value_hidden_size == 12
    obs, mask = ttt_boards(4), np.ones((4, 9), bool)
    for a, b in zip(policy.priors_and_values(obs, mask), loaded.priors_and_values(obs, mask)):
        assert np.array_equal(a, b)


def test_a_run_with_it_resumes_bit_identically():
    seed_everything(0)
    policy = ttt_policy("policy", value_hidden=16)
    passed = check_arena(_arena(policy), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed


def test_an_exported_policy_reads_the_value_through_it(make_scope, tmp_path):
    policy = ttt_policy(make_scope("vhx"), value_hidden=12)
    record = export_layer(policy, tmp_path / "p")
    assert read_record(tmp_path / "p")["outputs"] == ["logits", "value"]
    assert record["checks"]["paddle_inference_max_abs_diff"] <= 1e-5  # the static graph's
