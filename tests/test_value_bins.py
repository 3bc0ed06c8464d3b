"""The value head as a classifier (``agents.policy.value_bins``, HL-Gauss): its target
histograms, the value as the softmax's mean in every evaluator, training toward the
targets, the settings' checks, the saved policy, and a bit-identical resume with it on."""

from __future__ import annotations

import math

import numpy as np
import paddle
import pytest
from selfplay_kit import replay_arena as _arena
from selfplay_kit import ttt_boards, ttt_policy
from test_frozen_evaluator import LINES

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.export import export_layer, read_record
from paddlecraft.agents.settings import ConfigError
from paddlecraft.agents.value_head import (
    expected_value,
    expected_value_numpy,
    hl_gauss_targets,
    support,
)
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay.alphazero import alphazero_step
from paddlecraft.arenas.selfplay.config import UpdateConfig


def _normal_mass(lo: float, hi: float, mean: float, sd: float) -> float:
    """The probability of [lo, hi] under a normal (the reference: math.erf, float64)."""
    cdf = [0.5 * (1 + math.erf((x - mean) / (sd * math.sqrt(2)))) for x in (lo, hi)]
    return cdf[1] - cdf[0]


def test_the_support_spans_minus_one_to_one():
    s = support(5)
    assert s.dtype == np.float32 and np.array_equal(s, [-1.0, -0.5, 0.0, 0.5, 1.0])


@pytest.mark.parametrize("z", [-1.0, -0.37, 0.0, 0.358, 0.95, 1.0])
def test_targets_are_a_gaussians_mass_over_each_bin(z):
    bins, sigma = 11, 0.75  # width 0.2: edges -1.1, -0.9, ..., 1.1
    got = hl_gauss_targets(paddle.to_tensor([z], "float32"), bins, sigma).numpy()[0]
    edges = np.linspace(-1.1, 1.1, bins + 1)
    sd = sigma * 0.2
    want = np.array([_normal_mass(a, b, z, sd) for a, b in zip(edges[:-1], edges[1:])])
    want /= _normal_mass(edges[0], edges[-1], z, sd)  # renormalised over the range
    np.testing.assert_allclose(got, want, atol=2e-6)
    assert abs(got.sum() - 1) < 1e-5
    # an interior target is the histogram's mean; at the ends the range cuts the tail off
    if abs(z) < 0.9:
        assert abs(float((got * support(bins)).sum()) - z) < 1e-4
    assert got.argmax() == np.abs(support(bins) - z).argmin()  # the nearest bin is the mode


def test_the_value_is_the_softmaxs_mean_in_paddle_and_numpy():
    logits = np.random.default_rng(0).normal(0, 3, (8, 21)).astype(np.float32)
    p = np.exp(logits - logits.max(1, keepdims=True))
    want = (p / p.sum(1, keepdims=True) * np.linspace(-1, 1, 21)).sum(1)
    np.testing.assert_allclose(expected_value(paddle.to_tensor(logits)).numpy(), want, atol=1e-6)
    np.testing.assert_allclose(expected_value_numpy(logits), want, atol=1e-6)
    assert np.abs(want).max() > 0.2  # not all near 0: the weights matter


@pytest.mark.parametrize("moves_left", [False, True], ids=["value", "moves-left"])
def test_every_evaluator_reads_the_same_value(moves_left, make_scope):
    policy = Policy(make_scope("vb"), encoder=LINES, obs_shape=[6, 7, 2], num_actions=7,
                    seed=0, value_bins=31, moves_left=moves_left)  # fmt: skip
    assert policy.value_head.weight.shape == [policy.encoder.feature_dim, 31]
    with paddle.no_grad():  # values well away from 0
        policy.value_head.weight.set_value(policy.value_head.weight * 20)
    planes = np.random.default_rng(1).integers(0, 2, (32, 6, 7, 2)).astype(np.float32)
    masks = np.random.default_rng(2).random((32, 7)) < 0.7
    masks[:, 3] = True
    out = policy.heads(planes)
    want = expected_value(out["value_logits"]).numpy()
    np.testing.assert_array_equal(out["value"].numpy(), want)
    assert np.abs(want).max() > 0.1 and np.abs(want).max() <= 1
    live = policy.search_settings()["evaluate"](planes, masks)
    frozen = policy.search_settings(frozen=True)["evaluate"]
    assert frozen not in (policy.priors_and_values, policy.priors_values_and_moves_left)
    got = frozen(planes, masks)
    np.testing.assert_allclose(live[1], want, atol=1e-7)
    for a, b in zip(got, live):  # the NumPy copy: the same numbers to float32 rounding
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert policy(planes)[1].shape == [32]  # forward (PPO, export): the scalar value


def test_the_head_trains_toward_the_targets_by_cross_entropy(make_scope):
    policy = ttt_policy(make_scope("ce"), value_bins=21, lr=0.01)
    obs = ttt_boards(6)  # six distinct boards
    z = np.array([-0.9, -0.45, 0.0, 0.2, 0.6, 0.95], np.float32)
    batch = {"obs": obs, "mask": np.ones((6, 9), bool), "pi": np.full((6, 9), 1 / 9, np.float32),
             "z": z}  # fmt: skip
    u = UpdateConfig()
    first = alphazero_step(policy, batch, u)
    for _ in range(300):
        last = alphazero_step(policy, batch, u)
    assert last["value_loss"] < first["value_loss"] / 50  # the MSE, logged for every head
    # the cross-entropy falls toward the targets' own entropy (its minimum), not to 0
    t = hl_gauss_targets(paddle.to_tensor(z), 21, 0.75).numpy()
    floor = float(-(t * np.log(np.maximum(t, 1e-30))).sum(1).mean())
    assert last["value_ce"] < first["value_ce"] and last["value_ce"] - floor < 0.05
    _, values = policy.priors_and_values(obs, batch["mask"])
    assert np.abs(values - z).max() < 0.03


def test_the_tanh_heads_step_has_no_cross_entropy(make_scope):
    plain = ttt_policy(make_scope("tanh"))
    assert plain.value_bins == 0 and plain.value_head.weight.shape[1] == 1
    assert "value_logits" not in plain.heads(ttt_boards(2))
    batch = {"obs": ttt_boards(2), "mask": np.ones((2, 9), bool),
             "pi": np.full((2, 9), 1 / 9, np.float32), "z": np.zeros(2, np.float32)}  # fmt: skip
    assert "value_ce" not in alphazero_step(plain, batch, UpdateConfig())


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"value_bins": 1}, r"value_bins=1: expected 0 .* or an integer >= 2"),
        ({"value_bins": -5}, r"value_bins=-5: expected 0"),
        ({"value_sigma": 0.0}, r"value_sigma=0.0: must be > 0 .*value_sigma=0.75"),
    ],
)
def test_settings_are_checked(settings, message, make_scope):
    with pytest.raises(ConfigError, match=message):
        ttt_policy(make_scope("bad"), **settings)


def test_saved_policy_evaluates_as_trained(make_scope, tmp_path):
    policy = ttt_policy(make_scope("sv"), value_bins=11, value_sigma=0.5)
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("sv2"))
    assert (loaded.value_bins, loaded.value_sigma) == (11, 0.5)
    obs, mask = ttt_boards(4), np.ones((4, 9), bool)
    for a, b in zip(policy.priors_and_values(obs, mask), loaded.priors_and_values(obs, mask)):
        assert np.array_equal(a, b)


def test_search_updates_train_it_and_resume_bit_identically():
    seed_everything(0)
    policy = ttt_policy("policy", value_bins=21)
    arena = _arena(policy)
    m = arena.train_step(0)
    assert m["value_ce"] > 0 and 0 <= m["value_loss"] <= 4
    passed = check_arena(_arena(policy), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed


def test_an_exported_policy_gives_the_mean_value(make_scope, tmp_path):
    policy = ttt_policy(make_scope("ex"), value_bins=11)
    record = export_layer(policy, tmp_path / "p")
    assert read_record(tmp_path / "p")["outputs"] == ["logits", "value"]
    assert record["checks"]["paddle_inference_max_abs_diff"] <= 1e-5  # the static graph's
