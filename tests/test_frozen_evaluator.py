"""A search's network over a NumPy copy of the weights (`Policy.frozen_evaluator`)."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from omegaconf import OmegaConf
from test_board_lines import _random_positions
from test_selfplay_search import TTT_MLP, _az_arena

from paddlecraft.agents import Policy
from paddlecraft.arenas.games import ConnectFour, TicTacToe, random_legal
from paddlecraft.arenas.selfplay.alphazero import search_controller
from paddlecraft.arenas.selfplay.config import SearchConfig
from paddlecraft.arenas.selfplay.player import SearchPlayer, evaluation_searcher

LINES = {"_target_": "paddlecraft.encoders.BoardLineEncoder", "line_length": 4,
         "hidden_size": 32, "hidden_layers": 2}  # fmt: skip
GRAVITY = {**LINES, "gravity": True}
MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 32, "hidden_layers": 3}
CNN = {"_target_": "paddlecraft.encoders.ImageCNNEncoder", "channels": [4, 8],
       "embedding_dim": 16, "arch": "lenet"}  # fmt: skip
# the guide's convolutional trunk: full 6x7 resolution, no normalisation
TRUNK = {**CNN, "channels": [8, 8], "embedding_dim": 32, "min_spatial": 7, "norm": "none"}
RESNET = {**CNN, "channels": [4, 4, 8], "arch": "resnet", "min_spatial": 7}  # identity + 1x1
DCGAN = {**CNN, "arch": "dcgan", "min_spatial": 3}  # k4 s2, then k3 s1; LeakyReLU
CONVS = {"trunk": TRUNK, "lenet-bn": CNN, "resnet": RESNET, "dcgan": DCGAN}


def _policy(make_scope, encoder) -> Policy:
    return Policy(make_scope("frozen"), encoder=encoder, obs_shape=[6, 7, 2], num_actions=7, seed=0)


def _positions(n: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """Planes [n, 6, 7, 2] of random positions, and masks [n, 7] with columns closed."""
    planes = _random_positions(np.random.default_rng(1), n)
    masks = np.random.default_rng(2).random((n, 7)) < 0.7
    masks[:, 3] = True  # at least one legal move per row
    return planes, masks


def _running_statistics(layer: paddle.nn.Layer) -> None:
    """Give every batch norm running statistics and an affine part far from (0, 1), so
    folding them into the convolutions is tested (a fresh one is nearly the identity)."""
    rng = np.random.default_rng(3)
    with paddle.no_grad():
        for bn in layer.sublayers():
            if isinstance(bn, paddle.nn.BatchNorm2D):
                n = bn._mean.shape[0]
                for t, value in ((bn._mean, rng.normal(0, 0.5, n)), (bn._variance,
                                 rng.uniform(0.3, 3, n)), (bn.weight, rng.uniform(0.5, 2, n)),
                                 (bn.bias, rng.normal(0, 0.5, n))):  # fmt: skip
                    t.set_value(paddle.to_tensor(value.astype(np.float32)))


def _perturb(policy: Policy) -> None:
    """Change every layer the evaluator reads: trunk and heads."""
    with paddle.no_grad():
        for p in policy.parameters():
            p.set_value(p * 1.5 + 0.05)


@pytest.mark.parametrize("encoder", [MLP, LINES, GRAVITY], ids=["mlp", "lines", "gravity"])
def test_numpy_forward_is_the_encoders_forward(encoder, make_scope):
    enc = _policy(make_scope, encoder).encoder
    planes = _positions()[0].reshape(48, -1)
    want = enc.forward_all(paddle.to_tensor(planes))["pooled"].numpy()
    got = enc.numpy_forward()(planes)
    assert got.dtype == np.float32 and got.shape == want.shape == (48, 32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert (want > 0).mean() > 0.2  # the ReLUs pass values: not a trivial comparison


@pytest.mark.parametrize("encoder", [MLP, LINES, CNN], ids=["mlp", "lines", "cnn"])
def test_the_frozen_evaluator_gives_the_live_priors_and_values(encoder, make_scope):
    policy = _policy(make_scope, encoder)
    _running_statistics(policy)
    planes, masks = _positions()
    live = policy.search_settings()["evaluate"](planes, masks)
    frozen = policy.search_settings(frozen=True)["evaluate"]
    assert frozen != policy.priors_and_values
    got = frozen(planes, masks)
    assert len(got) == len(live) == 2
    assert all(a.dtype == np.float64 for a in got)
    np.testing.assert_array_equal(got[0][~masks], 0.0)  # no prior on an illegal move
    np.testing.assert_allclose(got[0].sum(axis=1), 1.0, rtol=1e-6)  # float32 softmax
    np.testing.assert_allclose(got[0], live[0], atol=1e-6)
    np.testing.assert_allclose(got[1], live[1], atol=1e-6)


@pytest.mark.parametrize("name", list(CONVS))
def test_a_conv_trunks_copy_is_its_eval_forward(name, make_scope):
    """`ImageCNNEncoder.numpy_forward` on board planes [B, 2, 6, 7]: the eval-mode forward
    (batch norm from its running statistics, folded into the convolutions) to float32
    rounding, for every block kind: conv + ReLU at full resolution and strided, residual
    blocks with identity and 1x1 projection shortcuts, DCGAN's k4 s2 and LeakyReLU."""
    policy = _policy(make_scope, CONVS[name])
    enc = policy.encoder
    _running_statistics(enc)
    planes = _positions()[0].transpose(0, 3, 1, 2)  # [48, 2, 6, 7]
    enc.eval()
    want = enc.forward_all(paddle.to_tensor(planes))["pooled"].numpy()
    enc.train()  # the copy is the eval forward whatever the mode
    got = enc.numpy_forward()(planes)
    assert got.dtype == np.float32 and got.shape == want.shape == (48, enc.feature_dim)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (want > 0).mean() > 0.2  # the ReLUs pass values: not a trivial comparison
    distinct = len(np.unique(planes.reshape(48, -1), axis=0))  # random positions can repeat
    assert len(np.unique(want.round(4), axis=0)) == distinct > 40
    if name == "dcgan":  # LeakyReLU: negative features pass, scaled
        assert (want < 0).mean() > 0.2


@pytest.mark.parametrize("encoder", [LINES, CNN], ids=["lines", "cnn"])
def test_the_copy_keeps_the_weights_it_was_made_with(encoder):
    # a fixed name: a policy's initial weights follow its seed and name, and a scope from
    # make_scope is numbered by the tests that ran before in the same worker
    policy = _policy(lambda _: "frozen_copy_weights", encoder)
    planes, masks = _positions()
    frozen = policy.frozen_evaluator()
    before = frozen(planes, masks)
    _perturb(policy)
    after = policy.priors_and_values(planes, masks)
    assert np.abs(after[1] - before[1]).max() > 1e-2  # the live network did change
    for a, b in zip(frozen(planes, masks), before):
        np.testing.assert_array_equal(a, b)
    # a new copy: the new weights, to float32 rounding (the perturbed layers' larger
    # activations round at ~1e-6 absolute, so relative to the value as well)
    for a, b in zip(policy.frozen_evaluator()(planes, masks), after):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_what_has_no_numpy_copy_gets_the_live_evaluator(make_scope):
    # instance norm: statistics from each input, no copy
    instance = _policy(make_scope, {**CNN, "norm": "instance"})
    assert instance.encoder.numpy_forward() is None
    assert instance.frozen_evaluator() == instance.priors_and_values
    dilated = _policy(make_scope, CNN)  # a convolution this class does not make
    dilated.encoder.layers["conv_2"].conv = paddle.nn.Conv2D(4, 8, 3, padding=2, dilation=2)
    assert dilated.encoder.numpy_forward() is None
    assert dilated.frozen_evaluator() == dilated.priors_and_values
    on_gpu = _policy(make_scope, MLP)
    on_gpu.device = "gpu:0"  # a GPU policy keeps its network on the device
    assert on_gpu.frozen_evaluator() == on_gpu.priors_and_values
    adapted = _policy(make_scope, MLP)
    adapted.encoder.layers["hidden_layer_2"] = paddle.nn.Sequential(paddle.nn.Linear(32, 32))
    assert adapted.encoder.numpy_forward() is None  # not a plain Linear: no copy
    assert adapted.frozen_evaluator() == adapted.priors_and_values


def test_a_collection_and_a_cached_search_player_search_with_the_copy(make_scope):
    """The collection's controller and the evaluation's `SearchPlayer` (cached) search with
    the weights they were made with; an uncached player (human games in a live run, where
    the policy trains between replies) with the weights as they are."""
    policy = _policy(make_scope, LINES)
    game = ConnectFour(24)
    rng = np.random.default_rng(0)
    for _ in range(5):
        game.step(random_legal(game.legal_mask(), rng))
    cur, mask = game.cur, game.mask
    cfg = OmegaConf.structured(SearchConfig(simulations=24))
    act = search_controller(policy, ConnectFour, cfg, np.random.default_rng(0))
    cached = SearchPlayer(policy, "connect_four", 24)
    uncached = SearchPlayer(policy, "connect_four", 24, cache=False)
    planes, masks = _positions()
    values = policy.priors_and_values(planes, masks)[1]
    before = [p.search.search(cur, mask).visits for p in (cached, uncached)]
    _perturb(policy)
    np.testing.assert_array_equal(cached.search.search(cur, mask).visits, before[0])
    now = uncached.search.search(cur, mask).visits
    assert (now != before[1]).any()  # the changed weights search otherwise
    again = SearchPlayer(policy, "connect_four", 24)  # made now: a copy of the new weights
    assert (again.search.search(cur, mask).visits != before[0]).any()
    # the controller's network (inside its cache) still gives the values it was made with
    network = act.search.evaluator.inner.network
    np.testing.assert_allclose(network(planes, masks)[1], values, atol=1e-6)
    assert np.abs(policy.priors_and_values(planes, masks)[1] - values).max() > 1e-2


def test_the_arenas_evaluation_searches_with_the_copy(make_scope):
    """The evaluation's searching player, as the collections' searches, evaluates with a
    NumPy copy of the weights (not Paddle's forward)."""
    policy = Policy(make_scope("evalcopy"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _az_arena(policy)
    network = evaluation_searcher(policy, TicTacToe, arena.cfg).search.evaluator.inner.network
    assert network != policy.priors_and_values
