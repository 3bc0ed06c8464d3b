"""Language measures on hand-worked languages, and the discrete channels' gradients."""

from __future__ import annotations

import itertools
import math

import numpy as np
import paddle
import pytest

from paddlecraft.agents.channel import (
    RunningBaseline,
    categorical_sample,
    gumbel_softmax_st,
    temperature_at,
)
from paddlecraft.arenas.referential.metrics import (
    analyse,
    bosdis,
    edit_distance,
    message_entropy,
    mutual_information,
    posdis,
    topsim,
    vocab_used,
)

#: the 9 objects of 2 attributes x 3 values
MEANINGS = np.array(list(itertools.product(range(3), repeat=2)), np.int64)
#: perfectly compositional: position 0 names attribute 0 with symbols 1-3, position 1
#: names attribute 1 with its own symbols 4-6
COMPOSITIONAL = np.stack([MEANINGS[:, 0] + 1, MEANINGS[:, 1] + 4], axis=1)
#: holistic: every object its own message, but no position tells about one attribute alone
#: (each position mixes both attributes modulo 3; the map is invertible)
HOLISTIC = np.stack(
    [(MEANINGS[:, 0] + MEANINGS[:, 1]) % 3 + 1, (MEANINGS[:, 0] + 2 * MEANINGS[:, 1]) % 3 + 1],
    axis=1,
)
CONSTANT = np.ones((9, 2), np.int64)


def test_edit_distance_worked_examples():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([1, 2], [1, 2]) == 0
    assert edit_distance([1, 2, 3], [2, 3]) == 1  # one deletion
    assert edit_distance([], [4, 4]) == 2


def test_entropy_and_mutual_information_in_bits():
    assert message_entropy(COMPOSITIONAL, eos=None) == pytest.approx(math.log2(9))
    assert message_entropy(CONSTANT, eos=None) == 0.0
    # a symbol that copies a fair 3-valued attribute carries log2(3) bits about it
    assert mutual_information(MEANINGS[:, 0].tolist(), COMPOSITIONAL[:, 0].tolist()) == (
        pytest.approx(math.log2(3))
    )
    assert mutual_information(MEANINGS[:, 1].tolist(), COMPOSITIONAL[:, 0].tolist()) == (
        pytest.approx(0.0, abs=1e-12)
    )


def test_compositional_language_scores_one_everywhere():
    assert topsim(MEANINGS, COMPOSITIONAL, eos=None) == pytest.approx(1.0)
    assert posdis(MEANINGS, COMPOSITIONAL) == pytest.approx(1.0)
    assert bosdis(MEANINGS, COMPOSITIONAL, vocab_size=7, eos=None) == pytest.approx(1.0)
    assert vocab_used(COMPOSITIONAL, eos=None) == 6


def test_holistic_language_is_unique_but_not_disentangled():
    assert message_entropy(HOLISTIC, eos=None) == pytest.approx(math.log2(9))  # all differ
    assert posdis(MEANINGS, HOLISTIC) == pytest.approx(0.0, abs=1e-12)
    # neighbours in meaning (1 attribute apart) always differ in both symbols, objects 2
    # attributes apart sometimes in one: the correlation is negative
    assert topsim(MEANINGS, HOLISTIC, eos=None) < 0.0


def test_constant_language_scores_zero():
    m = analyse(MEANINGS, CONSTANT, vocab_size=4, eos=None)
    assert m == {
        "message_entropy": 0.0,
        "vocab_used": 1.0,
        "distinct_messages": 1.0,
        "topsim": 0.0,
        "posdis": 0.0,
        "bosdis": 0.0,
    }


def test_end_symbol_cuts_messages():
    msgs = np.array([[3, 0, 5], [3, 0, 6]])  # the same message once trimmed at symbol 0
    assert message_entropy(msgs, eos=0) == 0.0
    assert message_entropy(msgs, eos=None) == 1.0
    assert vocab_used(msgs, eos=0) == 2


# ----------------------------------------------------------------------------- channels
def test_straight_through_is_one_hot_forward_with_the_soft_gradient():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 5)).astype(np.float32)
    w = paddle.to_tensor(rng.normal(size=(6, 5)).astype(np.float32))

    def grad(hard: bool) -> tuple[np.ndarray, np.ndarray]:
        logits = paddle.to_tensor(base, stop_gradient=False)
        paddle.seed(7)  # the same Gumbel noise for both
        y = gumbel_softmax_st(logits, temperature=0.7, hard=hard)
        (y * w).sum().backward()
        return y.numpy(), logits.grad.numpy()

    y_hard, g_hard = grad(True)
    y_soft, g_soft = grad(False)
    assert set(np.unique(y_hard)) <= {0.0, 1.0} and np.allclose(y_hard.sum(1), 1.0)
    assert np.array_equal(y_hard.argmax(1), y_soft.argmax(1))  # the sample is the soft argmax
    assert np.abs(g_hard).max() > 1e-3  # Paddle's own hard=True passes zero here
    np.testing.assert_allclose(g_hard, g_soft, rtol=1e-5, atol=1e-7)


def test_gumbel_samples_follow_the_softmax():
    paddle.seed(0)
    logits = paddle.to_tensor(np.tile(np.log([[0.6, 0.3, 0.1]]), (20000, 1)).astype(np.float32))
    freq = gumbel_softmax_st(logits, 1.0).numpy().mean(0)
    np.testing.assert_allclose(freq, [0.6, 0.3, 0.1], atol=0.015)
    greedy = gumbel_softmax_st(logits[:3], 1.0, noise=False).numpy()
    assert (greedy.argmax(1) == 0).all()


def test_categorical_sample_log_prob_and_entropy():
    paddle.seed(1)
    logits = paddle.to_tensor([[0.0, math.log(3.0)]] * 4000)  # p = (0.25, 0.75)
    sym, logp, ent = categorical_sample(logits)
    s = sym.numpy()
    assert abs(s.mean() - 0.75) < 0.03
    np.testing.assert_allclose(logp.numpy(), np.where(s == 1, math.log(0.75), math.log(0.25)), 1e-5)
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    np.testing.assert_allclose(ent.numpy(), h, rtol=1e-5)
    g, _, _ = categorical_sample(logits[:2], greedy=True)
    assert g.numpy().tolist() == [1, 1]


def test_running_baseline_is_the_mean_reward_and_round_trips():
    b = RunningBaseline()
    rewards = [-2.0, -1.0, 0.5, 3.0]
    for r in rewards:
        b.update(r)
    assert b.value == pytest.approx(np.mean(rewards)) and b.count == 4
    c = RunningBaseline()
    c.load(b.state())
    assert c == b


def test_temperature_schedule_is_geometric():
    assert temperature_at(0, 2.0, 0.5, 100) == 2.0
    assert temperature_at(50, 2.0, 0.5, 100) == pytest.approx(1.0)
    assert temperature_at(500, 2.0, 0.5, 100) == pytest.approx(0.5)
    assert temperature_at(500, 2.0, 0.5, 0) == 2.0
