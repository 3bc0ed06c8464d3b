"""KataGo's auxiliary opponent-policy target (``agents.policy.opponent_policy``): its
targets from self-play records, training toward them, mirror images and position means,
a policy without it unchanged, searches that never read it, and a bit-identical resume."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import check_head_off, ttt_boards, ttt_policy
from selfplay_kit import replay_arena as _arena

from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay.alphazero import alphazero_step
from paddlecraft.arenas.selfplay.config import UpdateConfig
from paddlecraft.arenas.selfplay.ppo import mirror_samples
from paddlecraft.arenas.selfplay.replay import average_duplicates
from paddlecraft.arenas.selfplay.targets import opponent_policy_targets


def _records(moves: dict[int, list[int]]) -> list[dict[str, np.ndarray]]:
    """One record per ply as play_games writes them; each row's ``pi`` is one-hot on
    ``(10 * game + ply) % 9`` so that a target names the row it came from."""
    out = []
    for ply in range(10):
        games = [g for g, plies in moves.items() if ply in plies]
        if games:
            pi = np.zeros((len(games), 9), np.float32)
            pi[np.arange(len(games)), [(10 * g + ply) % 9 for g in games]] = 1
            out.append({"ply": np.full(len(games), ply), "game": np.array(games), "pi": pi})
    return out


def test_each_target_is_the_same_games_next_search():
    recs = _records({
        0: [0, 1, 2, 3, 4],  # self-play: every reply recorded; the game ends with ply 4
        1: [1, 3],  # the learner sits second: the opponent's replies are not recorded
        2: [0, 1, 2, 5, 6],  # plies 3 and 4 missing (another worker's records, say)
    })  # fmt: skip
    got = opponent_policy_targets(recs)
    game = np.concatenate([r["game"] for r in recs])
    ply = np.concatenate([r["ply"] for r in recs])
    assert got.shape == (len(game), 9) and got.dtype == np.float32
    for row, (g, p) in enumerate(zip(game.tolist(), ply.tolist())):
        has_reply = (g == 0 and p < 4) or (g == 2 and p in (0, 1, 5))
        want = np.zeros(9, np.float32)
        if has_reply:
            want[(10 * g + p + 1) % 9] = 1
        assert np.array_equal(got[row], want), (g, p)


def test_mirror_images_and_position_means_carry_the_target():
    obs = np.zeros((3, 3, 3, 2), np.float32)
    obs[0, 0, 0, 0] = obs[1, 0, 0, 0] = 1  # rows 0 and 1: the same position
    opp = np.zeros((3, 9), np.float32)
    opp[0, 2] = 1  # row 1's reply unknown (zeros): the mean halves row 0's weight
    opp[2, 5] = 1
    data = {"obs": obs, "mask": np.ones((3, 9), bool), "pi": np.full((3, 9), 1 / 9, np.float32),
            "z": np.zeros(3, np.float32), "opponent_pi": opp}  # fmt: skip
    mirrored = mirror_samples(data, (3, 3, 2))
    assert mirrored["opponent_pi"][0, 0] == 1 and mirrored["opponent_pi"][2, 3] == 1  # c -> 2 - c
    means = average_duplicates(data)["opponent_pi"]
    assert means[0, 2] == means[1, 2] == 0.5 and np.array_equal(means[2], opp[2])


def test_the_head_trains_toward_the_replies_and_rows_without_one_add_nothing(make_scope):
    policy = ttt_policy(make_scope("op"), opponent_policy=True, lr=0.01)
    obs = ttt_boards(6)  # six boards with i stones each
    opp = np.zeros((6, 9), np.float32)
    opp[np.arange(5), [4, 0, 8, 2, 6]] = 1  # the last board's game ended: no reply
    batch = {"obs": obs, "mask": np.ones((6, 9), bool), "pi": np.full((6, 9), 1 / 9, np.float32),
             "z": np.zeros(6, np.float32), "opponent_pi": opp}  # fmt: skip
    u = UpdateConfig()
    first = alphazero_step(policy, batch, u)
    assert first["opponent_policy_loss"] == pytest.approx(5 / 6 * np.log(9), rel=0.05)
    for _ in range(300):
        last = alphazero_step(policy, batch, u)
    assert last["opponent_policy_loss"] < first["opponent_policy_loss"] / 20
    logits = policy.heads(obs)["opponent_logits"].numpy()  # [6, 9]
    assert (logits[:5].argmax(1) == [4, 0, 8, 2, 6]).all()
    # the main policy head learnt the uniform visits, not the replies
    assert np.allclose(policy.priors_and_values(obs, batch["mask"])[0], 1 / 9, atol=0.02)


def test_off_leaves_the_policy_and_its_searches_as_they_were(make_scope, tmp_path):
    check_head_off(make_scope, tmp_path, "opponent_policy", "opponent_logits")


def test_search_updates_train_the_head_and_resume_bit_identically():
    seed_everything(0)
    policy = ttt_policy("policy", opponent_policy=True)
    arena = _arena(policy, update={"opponent_policy_coef": 0.5})
    m = arena.train_step(0)
    assert m["opponent_policy_loss"] > 0
    opp = arena.replay.arrays["opponent_pi"][: len(arena.replay)]  # [rows, 9]
    sums = opp.sum(axis=1)
    # a distribution where the game went on, zeros after each game's last move (the
    # mirror images too: one of 8 games' worth of rows at least)
    assert np.allclose(sums[sums > 0], 1, atol=1e-5) and 0 < (sums == 0).mean() < 0.5
    passed = check_arena(_arena(policy, update={"opponent_policy_coef": 0.5}), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed
