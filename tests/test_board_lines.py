"""BoardLineEncoder: the lines of a k-in-a-row board as inputs to an MLP."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from errors_kit import config_error
from selfplay_kit import replay_arena

from paddlecraft.agents import Policy
from paddlecraft.agents.export import export_layer
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine import build_agents
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games.connect_four import ConnectFour
from paddlecraft.encoders import BoardLineEncoder
from paddlecraft.encoders.board_lines import line_cells


def _reference(planes: np.ndarray, rows: int, cols: int, k: int) -> np.ndarray:
    """The features from their definition, one position at a time: planes [rows, cols, C]."""
    cells = planes.reshape(rows * cols, -1)  # [N, C]
    lines = line_cells(rows, cols, k)
    held, threats = [], []
    for c in range(cells.shape[1]):
        mine = cells[lines, c].sum(axis=1)  # [L]
        others = cells[lines].sum(axis=(1, 2)) - mine
        for j in range(1, k):
            held.append((mine == j) & (others == 0))
        near = np.zeros(rows * cols, bool)
        for line in lines[(mine == k - 1) & (others == 0)]:
            near[line] = True
        threats.append(near & (cells.sum(axis=1) == 0))
    return np.concatenate([cells.reshape(-1), *held, *threats]).astype(np.float32)


def _random_positions(rng: np.random.Generator, n: int) -> np.ndarray:
    """Planes [n, 6, 7, 2] of Connect Four positions after random legal moves."""
    out = []
    while len(out) < n:
        game = ConnectFour(1)
        for _ in range(int(rng.integers(0, 35))):
            legal = np.flatnonzero(game.legal_mask()[0])
            if game.done[0] or not len(legal):
                break
            game.step([rng.choice(legal)])
        if not game.done[0]:
            out.append(game.observe()[0][0])
    return np.stack(out).astype(np.float32)


def test_the_lines_of_connect_four_and_tictactoe():
    four = line_cells(6, 7, 4)
    # 24 horizontal, 21 vertical, 12 + 12 diagonal lines of four
    assert four.shape == (69, 4) and len({tuple(x) for x in four}) == 69
    three = line_cells(3, 3, 3)
    assert sorted(map(tuple, three)) == sorted(
        [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    )
    rows, cols = np.divmod(four, 7)
    steps = {(int(a), int(b)) for a, b in zip(np.diff(rows).ravel(), np.diff(cols).ravel())}
    assert steps == {(0, 1), (1, 0), (1, 1), (1, -1)}  # straight lines, no wrap


def test_features_match_their_definition_on_connect_four_positions(make_scope):
    enc = BoardLineEncoder(make_scope("lines"), image_size=[6, 7], in_channels=2)
    enc.build()
    assert enc.num_features == 84 + 2 * 3 * 69 + 2 * 42
    planes = _random_positions(np.random.default_rng(0), 64)
    got = enc.line_features(paddle.to_tensor(planes.reshape(64, -1))).numpy()
    want = np.stack([_reference(p, 6, 7, 4) for p in planes])
    np.testing.assert_array_equal(got, want)
    assert want[:, 84:].sum() > 0  # the positions do hold lines and threats


def test_threat_map_of_a_hand_made_position(make_scope):
    game = ConnectFour(1)
    for column in (3, 3, 2, 4, 1):  # X on c1..c3 of the bottom row, O on c3 and c4
        game.step([column])
    planes = game.observe()[0].astype(np.float32)  # O to move: [0] O's stones, [1] X's
    enc = BoardLineEncoder(make_scope("lines"), image_size=[6, 7], in_channels=2)
    enc.build()
    feats = enc.line_features(paddle.to_tensor(planes.reshape(1, -1))).numpy()[0]
    mover, opponent = feats[-84:-42].reshape(6, 7), feats[-42:].reshape(6, 7)
    assert mover.sum() == 0  # O completes nothing
    expect = np.zeros((6, 7))
    expect[5, 0] = 1  # X completes c0..c3 on the bottom row (c4 is O's)
    np.testing.assert_array_equal(opponent, expect)


def _gravity_reference(planes: np.ndarray) -> np.ndarray:
    """The gravity features from their definition, one Connect Four position at a time:
    planes [6, 7, 2] -> the playable cells, the even stone count, the lowest threats."""
    stones = planes.sum(axis=-1)  # [6, 7]
    playable = np.zeros((6, 7), bool)
    for c in range(7):
        empty = np.flatnonzero(stones[:, c] == 0)
        if len(empty):
            playable[empty.max(), c] = True  # row 0 on top: the deepest empty cell
    threats = _reference(planes, 6, 7, 4)[-84:].reshape(2, 6, 7)
    lowest = np.zeros_like(threats)
    for c in range(7):
        rows = np.flatnonzero(threats[:, :, c].any(axis=0))
        if len(rows):
            lowest[:, rows.max(), c] = threats[:, rows.max(), c]
    even = [stones.sum() % 2 == 0]
    return np.concatenate([playable.ravel(), even, lowest.ravel()]).astype(np.float32)


def test_gravity_features_match_their_definition_on_connect_four_positions(make_scope):
    enc = BoardLineEncoder(make_scope("lines"), image_size=[6, 7], in_channels=2, gravity=True)
    enc.build()
    assert enc.num_features == 84 + 2 * 3 * 69 + 2 * 42 + 42 + 1 + 2 * 42
    planes = _random_positions(np.random.default_rng(4), 200)
    got = enc.line_features(paddle.to_tensor(planes.reshape(200, -1))).numpy()
    lines = np.stack([_reference(p, 6, 7, 4) for p in planes])
    gravity = np.stack([_gravity_reference(p) for p in planes])
    np.testing.assert_array_equal(got, np.concatenate([lines, gravity], axis=1))
    # the sample holds what each feature tells apart: both parities, and threats shadowed
    # by a lower one in their column (so "lowest" is not the threat map again)
    assert 0 < gravity[:, 42].mean() < 1
    threats, lowest = lines[:, -84:].sum(), gravity[:, 43:].sum()
    assert 0 < lowest < threats


def test_gravity_features_of_a_hand_made_position(make_scope):
    game = ConnectFour(1)
    # X: c1, c2, c3 on the bottom two rows; O: c4 twice, c6 three times
    for column in (1, 4, 2, 4, 3, 6, 1, 6, 2, 6, 3):
        game.step([column])
    planes = game.observe()[0].astype(np.float32)  # O to move: [0] O's stones, [1] X's
    enc = BoardLineEncoder(make_scope("lines"), image_size=[6, 7], in_channels=2, gravity=True)
    enc.build()
    feats = enc.line_features(paddle.to_tensor(planes.reshape(1, -1))).numpy()[0]
    threats = feats[-211:-127].reshape(2, 6, 7)  # the threat maps: [0] O's, [1] X's
    playable, even = feats[-127:-85].reshape(6, 7), feats[-85]
    lowest = feats[-84:].reshape(2, 6, 7)
    want = np.zeros((6, 7))
    for c, height in enumerate([0, 2, 2, 2, 2, 0, 3]):  # stones per column
        want[5 - height, c] = 1
    np.testing.assert_array_equal(playable, want)
    assert even == 0  # 11 stones: the second player (O) to move
    # X threatens c0 on both bottom rows (c1..c3 each); O c6's fourth cell (row 2)
    want = np.zeros((2, 6, 7))
    want[1, 5, 0] = want[1, 4, 0] = want[0, 2, 6] = 1
    np.testing.assert_array_equal(threats, want)
    # the lowest: X's threat on the second row stands over X's own on the bottom row
    want[1, 4, 0] = 0
    np.testing.assert_array_equal(lowest, want)


def test_a_policy_with_board_lines_plays_trains_and_saves_only_its_layers(compose_config, tmp_path):
    paddle.seed(0)
    agents = build_agents(
        compose_config(
            "arena=selfplay",
            "game=tictactoe",
            "encoder@agents.policy.encoder=lines_256x3",
            "agents.policy.encoder.line_length=3",
            "agents.policy.encoder.hidden_size=16",
        )
    )
    policy = agents["policy"]
    enc = policy.encoder
    assert (enc.rows, enc.cols, enc.channels, enc.num_lines) == (3, 3, 2, 8)
    # the fixed matrices are not parameters: nothing to train, nothing in a checkpoint
    names = {p.name for p in policy.parameters()}
    assert {f"policy.hidden_layer_{i}.w_0" for i in (1, 2, 3)} <= names
    assert not any("held_code" in k or "short_cells" in k for k in policy.state_dict())
    rng = np.random.default_rng(0)
    cells = rng.integers(0, 3, (32, 3, 3))
    cells[:, 0, 0] = 0  # one empty square at least
    obs = np.stack([cells == 1, cells == 2], axis=-1).astype(np.float32)
    masks = (cells == 0).reshape(32, 9)
    actions = policy.act(obs, masks, greedy=True)
    assert masks[np.arange(32), actions].all()
    logp, _, value = policy.evaluate_actions(obs, masks, actions)
    loss = -logp.mean() + (value**2).mean()
    before = enc.layers["hidden_layer_1"].weight.numpy().copy()
    policy.update(loss)
    assert not np.array_equal(before, enc.layers["hidden_layer_1"].weight.numpy())
    policy.save(tmp_path / "policy")
    loaded = type(policy).load(tmp_path / "policy")
    for a, b in zip(policy(obs), loaded(obs)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def _ttt_lines_policy(name: str, **kw: object) -> Policy:
    """A small tic-tac-toe policy over the board's lines of three; ``kw``: Policy settings."""
    encoder = {"_target_": "paddlecraft.encoders.BoardLineEncoder", "line_length": 3,
               "hidden_size": 16}  # fmt: skip
    return Policy(name, encoder=encoder, obs_shape=[3, 3, 2], num_actions=9, seed=0, **kw)


def test_a_board_lines_policy_exports(make_scope, tmp_path):
    policy = _ttt_lines_policy(make_scope("policy"))
    record = export_layer(policy, tmp_path / "policy")
    assert record["checks"]["paddle_inference_max_abs_diff"] <= 1e-5


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("agents.policy.encoder.line_length=5", ["line_length=5", "no line", "3x3"]),
        ("agents.policy.encoder.input_size=20", ["input_size=20", "gives 18"]),
    ],
)
def test_a_line_length_or_size_the_board_lacks_is_named(override, words, compose_config):
    cfg = compose_config(
        "arena=selfplay", "game=tictactoe", "encoder@agents.policy.encoder=lines_256x3", override
    )
    e = config_error(build_agents, cfg)
    assert "agents.policy.encoder" in str(e)
    for w in words:
        assert w in str(e)


def test_a_board_of_another_size_is_refused_when_built_directly(make_scope):
    with pytest.raises(ValueError, match=r"input_size=20 but a 3x3 board with 2 planes has 18"):
        BoardLineEncoder(make_scope("lines"), image_size=3, in_channels=2, input_size=20)


def test_an_alphazero_run_with_board_lines_resumes_bit_identically():
    """The Connect Four default's head: a run with it stopped at a checkpoint and resumed
    ends on the uninterrupted run's weights (check_arena's resume check)."""
    seed_everything(0)
    policy = _ttt_lines_policy(
        "policy", value_discount=0.95, search_tactics=True, search_proofs=True
    )
    arena = replay_arena(policy, update={"average_duplicates": True})
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)
