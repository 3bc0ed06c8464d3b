"""The residual MLP (``encoder.residual``: the MLP's layers after the first in blocks of two
with a skip around each, a residual tower's block without batch norm): the function each
block computes, the Paddle forward and its NumPy copy alike, the same layers and weights as
the plain MLP, the depth's check, a policy's evaluators, training through the skips, the
saved policy, an exported policy and a bit-identical resume."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from errors_kit import config_error
from selfplay_kit import TTT_MLP, ttt_boards
from selfplay_kit import replay_arena as _arena
from test_frozen_evaluator import LINES

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.export import export_layer
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine import build_agents
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay.alphazero import alphazero_step
from paddlecraft.arenas.selfplay.config import UpdateConfig
from paddlecraft.encoders import BoardLineEncoder, ImageMLPEncoder

RESIDUAL_TTT = {**TTT_MLP, "hidden_layers": 3, "residual": True}


def _by_hand(x: np.ndarray, weights: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """relu(x W1 + b1), then h = relu(h + relu(h Wa + ba) Wb + bb) for each pair of layers."""
    h = np.maximum(x @ weights[0][0] + weights[0][1], 0)
    for (wa, ba), (wb, bb) in zip(weights[1::2], weights[2::2], strict=True):
        h = np.maximum(h + np.maximum(h @ wa + ba, 0) @ wb + bb, 0)
    return h


def _weights(enc: ImageMLPEncoder) -> list[tuple[np.ndarray, np.ndarray]]:
    layers = [enc.layers[f"hidden_layer_{i}"] for i in range(1, enc.hidden_layers + 1)]
    return [(lay.weight.numpy(), lay.bias.numpy()) for lay in layers]


@pytest.mark.parametrize("depth", [3, 5])
def test_each_block_adds_its_input(depth, make_scope):
    paddle.seed(0)
    enc = ImageMLPEncoder(make_scope("res"), 20, 16, None, depth, residual=True).build()
    x = np.random.default_rng(0).normal(size=(32, 20)).astype(np.float32)
    got = enc.forward_all(paddle.to_tensor(x))["pooled"].numpy()
    want = _by_hand(x, _weights(enc))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(enc.numpy_forward()(x), want, rtol=1e-5, atol=1e-6)
    # the skips matter: the plain MLP over the same weights gives other features
    plain = x
    for w, b in _weights(enc):
        plain = np.maximum(plain @ w + b, 0)
    assert np.abs(plain - want).max() > 0.1


def test_the_board_lines_encoder_takes_it_over_its_features(make_scope):
    paddle.seed(0)
    enc = BoardLineEncoder(
        make_scope("res"), image_size=[6, 7], hidden_size=16, hidden_layers=5, gravity=True,
        residual=True,
    ).build()  # fmt: skip
    planes = (np.random.default_rng(1).random((16, 84)) < 0.2).astype(np.float32)
    feats = enc.line_features(paddle.to_tensor(planes)).numpy()  # [16, 709]
    want = _by_hand(feats, _weights(enc))
    got = enc.forward_all(paddle.to_tensor(planes))["pooled"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(enc.numpy_forward()(planes), want, rtol=1e-5, atol=1e-6)


def test_the_same_layers_names_and_initial_weights_as_the_plain_mlp(make_scope):
    scope = make_scope("res")
    paddle.seed(3)
    plain = ImageMLPEncoder(scope, 20, 16, 4, 5).build()
    paddle.seed(3)
    res = ImageMLPEncoder(scope, 20, 16, 4, 5, residual=True).build()
    assert [p.name for p in res.parameters()] == [p.name for p in plain.parameters()]
    assert f"{scope}.hidden_layer_5.w_0" in {p.name for p in res.parameters()}
    for a, b in zip(plain.parameters(), res.parameters(), strict=True):
        assert np.array_equal(a.numpy(), b.numpy())
    x = paddle.to_tensor(np.random.default_rng(0).normal(size=(8, 20)).astype(np.float32))
    outs = res.forward_all(x)
    assert outs["prediction"].shape == [8, 4] and outs["pooled"].shape == [8, 16]
    assert not np.allclose(outs["pooled"].numpy(), plain.forward_all(x)["pooled"].numpy())


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_a_depth_without_whole_blocks_is_refused(depth, make_scope):
    wanted = rf"residual=True needs an odd hidden_layers .*got hidden_layers={depth}"
    with pytest.raises(ValueError, match=wanted) as err:
        ImageMLPEncoder(make_scope("res"), 20, 16, None, depth, residual=True)
    assert "hidden_layers=3 (one block) or 5 (two)" in str(err.value)
    assert "residual=false" in str(err.value)


def test_the_config_names_the_setting(compose_config):
    cfg = compose_config(
        "arena=selfplay", "game=connect_four", "agents.policy.encoder.residual=true",
        "agents.policy.encoder.hidden_layers=4",
    )  # fmt: skip
    e = config_error(build_agents, cfg)
    assert "agents.policy.encoder" in str(e) and "hidden_layers=4" in str(e)


def test_the_default_config_takes_it_by_one_override(compose_config):
    cfg = compose_config(
        "arena=selfplay", "game=connect_four", "agents.policy.encoder.residual=true",
        "agents.policy.encoder.hidden_layers=5",
    )  # fmt: skip
    enc = build_agents(cfg)["policy"].encoder
    assert isinstance(enc, BoardLineEncoder) and enc.residual and enc.hidden_layers == 5


def test_every_evaluator_reads_the_residual_trunk(make_scope):
    encoder = {**LINES, "hidden_layers": 3, "residual": True}
    policy = Policy(make_scope("res"), encoder=encoder, obs_shape=[6, 7, 2], num_actions=7, seed=0)
    planes = np.random.default_rng(1).integers(0, 2, (32, 6, 7, 2)).astype(np.float32)
    masks = np.random.default_rng(2).random((32, 7)) < 0.7
    masks[:, 3] = True
    live = policy.search_settings()["evaluate"](planes, masks)
    frozen = policy.search_settings(frozen=True)["evaluate"]
    assert frozen is not policy.priors_and_values  # the NumPy copy, not the Paddle forward
    for a, b in zip(frozen(planes, masks), live, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    h = policy.encoder.forward_all(paddle.to_tensor(planes.reshape(32, -1)))["pooled"].numpy()
    feats = policy.encoder.line_features(paddle.to_tensor(planes.reshape(32, -1))).numpy()
    np.testing.assert_allclose(h, _by_hand(feats, _weights(policy.encoder)), rtol=1e-5, atol=1e-6)


def test_training_reaches_every_layer_through_the_skips(make_scope):
    policy = Policy(make_scope("res"), encoder=RESIDUAL_TTT, obs_shape=[3, 3, 2], num_actions=9,
                    seed=0, lr=0.01)  # fmt: skip
    obs = ttt_boards(6)
    z = np.array([-0.9, -0.45, 0.0, 0.2, 0.6, 0.95], np.float32)
    batch = {"obs": obs, "mask": np.ones((6, 9), bool), "pi": np.full((6, 9), 1 / 9, np.float32),
             "z": z}  # fmt: skip
    before = [w.copy() for w, _ in _weights(policy.encoder)]
    first = alphazero_step(policy, batch, UpdateConfig())
    for _ in range(300):
        last = alphazero_step(policy, batch, UpdateConfig())
    for i, ((w, _), old) in enumerate(zip(_weights(policy.encoder), before, strict=True), 1):
        assert np.abs(w - old).max() > 1e-3, f"hidden_layer_{i} did not move"
    assert last["value_loss"] < first["value_loss"] / 50
    _, values = policy.priors_and_values(obs, batch["mask"])
    assert np.abs(values - z).max() < 0.05


def test_a_saved_policy_keeps_the_skips(make_scope, tmp_path):
    policy = Policy(make_scope("res"), encoder=RESIDUAL_TTT, obs_shape=[3, 3, 2], num_actions=9,
                    seed=0)  # fmt: skip
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("res2"))
    assert loaded.encoder.residual
    obs, mask = ttt_boards(4), np.ones((4, 9), bool)
    for a, b in zip(policy.priors_and_values(obs, mask), loaded.priors_and_values(obs, mask)):
        assert np.array_equal(a, b)


def test_an_exported_policy_matches_its_forward(make_scope, tmp_path):
    policy = Policy(make_scope("res"), encoder=RESIDUAL_TTT, obs_shape=[3, 3, 2], num_actions=9,
                    seed=0)  # fmt: skip
    record = export_layer(policy, tmp_path / "p")
    assert record["checks"]["paddle_inference_max_abs_diff"] <= 1e-5


def test_a_run_with_it_resumes_bit_identically():
    seed_everything(0)
    policy = Policy("policy", encoder=RESIDUAL_TTT, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    passed = check_arena(_arena(policy), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed
