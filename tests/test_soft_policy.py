"""KataGo's auxiliary soft policy target (``agents.policy.soft_policy``): its target (the
visits to a power, renormalised), training toward it while the main head keeps its own,
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


def _batch(n: int = 4) -> dict[str, np.ndarray]:
    """``n`` boards whose visits put 0.81 on one move, 0.16 on a second, 0.03 on a third
    and nothing on the rest (square 8 illegal everywhere)."""
    pi = np.zeros((n, 9), np.float32)
    for i in range(n):
        pi[i, [i, i + 1, i + 2]] = [0.81, 0.16, 0.03]
    mask = np.ones((n, 9), bool)
    mask[:, 8] = False
    return {"obs": ttt_boards(n), "mask": mask, "pi": pi, "z": np.zeros(n, np.float32)}


def test_the_head_learns_the_flattened_visits_and_the_main_head_the_visits(make_scope):
    policy = ttt_policy(make_scope("soft"), soft_policy=True, lr=0.01)
    batch = _batch()
    u = UpdateConfig(soft_policy_coef=1.0)
    first = alphazero_step(policy, batch, u)
    # a near-uniform head over the 8 legal moves: the cross-entropy is about log 8
    assert first["soft_policy_loss"] == pytest.approx(np.log(8), rel=0.05)
    for _ in range(400):
        alphazero_step(policy, batch, u)
    out = policy.heads(batch["obs"])
    soft = np.exp(policy.masked_log_probs(out["soft_logits"], batch["mask"]).numpy())  # [4, 9]
    want = np.array([0.81, 0.16, 0.03]) ** 0.25
    want /= want.sum()  # 0.458, 0.307, 0.201 (the 0.03 move: 7x its visit share)
    for i in range(4):
        assert soft[i, [i, i + 1, i + 2]] == pytest.approx(want, abs=0.03)
        assert soft[i, 8] < 1e-6  # illegal: masked as the main head's
    priors = policy.priors_and_values(batch["obs"], batch["mask"])[0]  # [4, 9]
    for i in range(4):  # the main head learnt the visits themselves, not the soft target
        assert priors[i, [i, i + 1, i + 2]] == pytest.approx([0.81, 0.16, 0.03], abs=0.03)


def test_the_power_is_the_setting_and_one_is_the_main_target(make_scope):
    policy = ttt_policy(make_scope("soft1"), soft_policy=True)
    batch = _batch()
    out = policy.heads(batch["obs"])
    logp = policy.masked_log_probs(out["soft_logits"], batch["mask"]).numpy()
    for power in (1.0, 0.5):
        target = batch["pi"] ** power
        target /= target.sum(-1, keepdims=True)
        want = -(target * logp).sum(-1).mean()
        # a step reports the loss before its own update: the head's outputs above
        got = alphazero_step(
            policy, batch, UpdateConfig(soft_policy_power=power, soft_policy_coef=0)
        )
        assert got["soft_policy_loss"] == pytest.approx(want, rel=1e-4)
        logp = policy.masked_log_probs(
            policy.heads(batch["obs"])["soft_logits"], batch["mask"]
        ).numpy()


def test_off_leaves_the_policy_and_its_searches_as_they_were(make_scope, tmp_path):
    check_head_off(make_scope, tmp_path, "soft_policy", "soft_logits")


def test_search_updates_train_the_head_and_resume_bit_identically():
    seed_everything(0)
    policy = ttt_policy("policy", soft_policy=True)
    m = _arena(policy).train_step(0)
    assert 0 < m["soft_policy_loss"] < np.log(9) + 0.1
    passed = check_arena(_arena(policy), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed
