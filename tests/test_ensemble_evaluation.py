"""Deep ensembles of self-play policies (`ensemble_averaged`, `SearchPlayer(partners=)`,
`PolicyPlayer(partners=)`, ``scripts/selfplay_targets.py --ensemble``): independently
trained networks searching and playing as one, their results averaged."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import targets_script

from paddlecraft.agents import Policy
from paddlecraft.arenas.games import ConnectFour
from paddlecraft.arenas.games.evaluators import ensemble_averaged
from paddlecraft.arenas.selfplay import PolicyPlayer, SearchPlayer

C4_MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 32}


def leaning(weights: list[float], value: float, plies: float | None = None):  # noqa: ANN201
    """A network with fixed priors (``weights`` on the legal moves), value and plies left."""

    def evaluate(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, ...]:
        p = np.where(masks, np.asarray(weights, np.float64), 0.0)  # [n, A]
        out = [p / p.sum(axis=1, keepdims=True), np.full(len(masks), value)]
        return tuple(out + ([] if plies is None else [np.full(len(masks), plies)]))

    return evaluate


def test_the_results_are_the_members_means():
    planes, masks = ConnectFour(2).observe()  # [2, 6, 7, 2], [2, 7]
    masks = masks.copy()
    masks[1, 0] = False  # a full column: still a distribution over the legal moves
    a = leaning([4, 1, 1, 1, 1, 1, 1], 0.5, 10.0)
    b = leaning([1, 1, 1, 1, 1, 1, 4], -0.1, 20.0)
    p, v, m = ensemble_averaged([a, b])(planes, masks)
    assert np.allclose(p[0], (np.array([4, 1, 1, 1, 1, 1, 1]) + [1, 1, 1, 1, 1, 1, 4]) / 20)
    assert p[1, 0] == 0 and np.allclose(p.sum(axis=1), 1)
    assert np.allclose(v, 0.2) and np.allclose(m, 15.0)
    assert ensemble_averaged([a]) is a  # one member: the network itself
    with pytest.raises(ValueError, match="no networks"):
        ensemble_averaged([])
    with pytest.raises(ValueError, match="moves-left head"):
        ensemble_averaged([a, leaning([1] * 7, 0.0)])(planes, masks)


def _policy(make_scope, name: str, seed: int, **kw) -> Policy:  # noqa: ANN001
    return Policy(make_scope(name), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7,
                  seed=seed, **kw)  # fmt: skip


def test_the_players_search_and_move_with_the_mean_of_the_members(make_scope):
    one, two = _policy(make_scope, "ens_a", 0), _policy(make_scope, "ens_b", 1)
    planes, masks = ConnectFour(3).observe()
    planes = planes.copy()
    planes[0, 5, 2, 0] = planes[1, 5, 5, 1] = planes[2, 5, 0, 0] = 1  # three positions
    cur, mask = ConnectFour.from_planes(planes)
    both = SearchPlayer(one, "connect_four", 16, partners=(two,)).search.search(cur, mask)
    alone = SearchPlayer(one, "connect_four", 16).search.search(cur, mask)
    p1, _ = one.priors_and_values(planes, masks)
    p2, _ = two.priors_and_values(planes, masks)
    assert np.allclose(both.priors, (p1 + p2) / 2, atol=1e-6)
    assert np.allclose(alone.priors, p1, atol=1e-6)
    assert np.abs(p1 - p2).max() > 1e-4  # two seeds: two networks to average
    assert both.visits.sum(axis=1).tolist() == [16, 16, 16]
    # the raw player: the most probable legal move of the mean priors
    moves = PolicyPlayer(one, partners=(two,)).act(planes, masks)
    assert moves.tolist() == np.where(masks, (p1 + p2) / 2, -1).argmax(axis=1).tolist()
    assert PolicyPlayer(one).act(planes, masks).tolist() == p1.argmax(axis=1).tolist()


def test_members_whose_values_mean_other_things_are_refused(make_scope):
    one = _policy(make_scope, "ens_c", 0)
    flatter = _policy(make_scope, "ens_d", 1, value_discount=0.97)
    with pytest.raises(ValueError, match="value_discount") as err:
        SearchPlayer(one, "connect_four", 8, partners=(flatter,))
    assert "ens_d" in str(err.value) and "same game and value settings" in str(err.value)
    with pytest.raises(ValueError, match="partners"):
        PolicyPlayer(one, partners=(flatter,))


def test_the_solver_judge_scores_the_ensemble_beside_the_run(make_scope, tmp_path):
    """``--ensemble``: keys ``ens<K>_*`` beside the run's own figures; an ensemble of a
    policy with a copy of itself plays exactly as the policy does."""
    script = targets_script()
    policy = _policy(make_scope, "ens_judged", 0)
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        policy.save(tmp_path / run / "policy")
    out = script.judge(tmp_path / "a", positions=12, simulations=8, games=2, reuse=True,
                       ensemble=(tmp_path / "b",))  # fmt: skip
    for key in ("raw_perfect_move_rate", "search8_perfect_move_rate",
                "search8_first_vs_solver_win_rate", "search8reuse_first_vs_solver_win_rate"):  # fmt: skip
        assert out[f"ens2_{key}"] == out[key]  # the same network twice: its own moves
    other = _policy(make_scope, "ens_other", 3)
    (tmp_path / "c").mkdir()
    other.save(tmp_path / "c" / "policy")
    three = script.judge(tmp_path / "a", positions=12, simulations=8, games=0,
                         ensemble=(tmp_path / "b", tmp_path / "c"))  # fmt: skip
    assert 0 <= three["ens3_search8_perfect_move_rate"] <= three["ens3_search8_good_move_rate"] <= 1
    assert not any(k.startswith("ens") for k in script.judge_policy(policy, 12, 8, 0))
