"""KataGo's policy surprise weighting (``arena.update.surprise_weight``): the surprise of a
target, each game's frequencies, the rows written out, and the arena's use of them."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import replay_arena, ttt_policy

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay.surprise import (
    policy_surprise,
    repeat_by_frequency,
    surprise_frequency,
)
from paddlecraft.arenas.selfplay.updates import UPDATES, apply_update


def test_surprise_is_the_kl_divergence_from_the_prior_to_the_target():
    prior = np.array([[0.5, 0.25, 0.25, 0.0], [0.5, 0.25, 0.25, 0.0], [0.7, 0.1, 0.1, 0.1]])
    pi = np.array([[0.5, 0.25, 0.25, 0.0], [0.0, 1.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    kl = policy_surprise(pi, prior)
    expected = [0.0, np.log(4.0), 0.5 * np.log(0.5 / 0.7) + 0.5 * np.log(0.5 / 0.1)]
    np.testing.assert_allclose(kl, expected, rtol=1e-12)
    # a target on a move the prior gave nothing: large, finite (the prior's floor 1e-12)
    assert np.isclose(policy_surprise(np.array([[0.0, 0.0, 0.0, 1.0]]), prior[:1])[0],
                      np.log(1e12))  # fmt: skip


def _records(kl_rows: list[tuple[int, float]]) -> list[dict[str, np.ndarray]]:
    """One record per ``(game, surprise)``: a two-move target against a prior chosen so
    that ``KL(pi || prior)`` is the given surprise (pi = [1, 0], prior = [e^-s, 1 - e^-s])."""
    out = []
    for game, s in kl_rows:
        p = np.exp(-s)
        out.append({"game": np.array([game]), "pi": np.array([[1.0, 0.0]], np.float32),
                    "prior": np.array([[p, 1.0 - p]])})  # fmt: skip
    return out


def test_each_game_shares_out_its_frequency_by_surprise():
    """Within a game, ``1 - w`` uniformly and ``w`` by surprise: the frequencies average 1
    per game; a game whose targets all agree with the prior keeps 1 each; rows outside
    ``keep`` get 0 and take no share."""
    rows = [(0, 0.1), (0, 0.3), (0, 0.0), (0, 0.8), (1, 0.0), (1, 0.0), (2, 0.5), (2, 2.0)]
    recs = _records(rows)
    kl = np.array([s for _, s in rows])
    f = surprise_frequency(recs, 0.5)
    np.testing.assert_allclose(f[:4], 0.5 + 0.5 * kl[:4] / kl[:4].mean(), rtol=1e-6)
    np.testing.assert_allclose(f[4:6], [1.0, 1.0])
    for g in range(3):
        assert np.isclose(f[[i for i, (gg, _) in enumerate(rows) if gg == g]].mean(), 1.0)
    assert f[3] > f[1] > f[0] > f[2] == 0.5  # the most surprising target written most
    np.testing.assert_allclose(surprise_frequency(recs, 0.0), np.ones(len(rows)))
    keep = np.array([True, True, False, True, True, True, False, True])
    fk = surprise_frequency(recs, 1.0, keep)
    assert fk[2] == fk[6] == 0.0 and fk[7] == pytest.approx(1.0)  # game 2's one kept row
    np.testing.assert_allclose(fk[[0, 1, 3]], kl[[0, 1, 3]] / kl[[0, 1, 3]].mean(), rtol=1e-6)
    with pytest.raises(ValueError, match="no root 'prior'"):
        surprise_frequency([{"game": np.array([0]), "pi": np.ones((1, 2))}], 0.5)


def test_rows_are_written_floor_f_times_and_once_more_with_the_rest():
    data = {"obs": np.arange(4)[:, None], "z": np.array([0.1, 0.2, 0.3, 0.4])}
    f = np.array([0.0, 1.0, 2.0, 2.25])
    out = repeat_by_frequency(data, f, np.random.default_rng(0))
    assert np.all(np.diff(out["obs"][:, 0]) >= 0)  # in the original order
    np.testing.assert_allclose(out["z"], 0.1 + 0.1 * out["obs"][:, 0])  # rows kept whole
    counts = np.zeros(4)
    rng = np.random.default_rng(1)
    for _ in range(2000):
        counts += np.bincount(repeat_by_frequency(data, f, rng)["obs"][:, 0], minlength=4)
    assert counts[0] == 0 and counts[1] == 2000 and counts[2] == 4000
    assert 2.2 < counts[3] / 2000 < 2.3  # 2 always, a third 1 time in 4


def test_the_update_writes_surprising_positions_more_often(make_scope):
    """In the arena: the records carry the network's root prior (before noise: a
    probability over the legal moves), and the update's samples hold each position its
    drawn number of times, the most surprising ones the most; a resume stays
    bit-identical."""
    seed_everything(0)
    arena = replay_arena(ttt_policy(make_scope("sw")), update={"surprise_weight": 0.5})
    arena._take_snapshot()
    rollout = arena._collect()
    prior = np.concatenate([r["prior"] for r in rollout["records"]])
    mask = np.concatenate([r["mask"] for r in rollout["records"]])
    np.testing.assert_allclose(prior.sum(1), 1.0, rtol=1e-5)
    assert np.all(prior[~mask] == 0)
    samples = UPDATES["alphazero"].samples(rollout, arena.spec, arena.cfg.update, arena.policy)
    f = samples.pop("frequency")
    kl = policy_surprise(samples["pi"], prior)
    game = np.concatenate([r["game"] for r in rollout["records"]])
    mean = (np.bincount(game, kl) / np.bincount(game))[game]  # each game's mean surprise
    np.testing.assert_allclose(f, 0.5 + 0.5 * kl / mean, rtol=1e-5)
    assert f.max() > 2 * f.min()
    cfg = arena.cfg
    cfg.augment_mirror = False
    apply_update("alphazero", arena.policy, rollout, arena.spec, cfg, np.random.default_rng(3),
                 arena.replay)  # fmt: skip
    held = arena.replay.arrays["pi"][: arena.replay.size]
    times = repeat_by_frequency({"i": np.arange(len(f))}, f, np.random.default_rng(3))["i"]
    np.testing.assert_array_equal(held, samples["pi"][times])  # the same draw, row by row
    written = np.bincount(times, minlength=len(f))
    assert written[np.argmax(f)] >= np.floor(f.max()) >= 1 and written[f < 1].min() == 0
    assert abs(len(times) - len(f)) < 0.25 * len(f)  # as many samples on average
    passed = check_arena(
        replay_arena(ttt_policy("policy"), update={"surprise_weight": 0.5}), steps=2
    )
    assert "resume from a checkpoint is bit-identical" in passed


def test_a_weight_outside_0_1_is_refused_naming_the_setting(make_scope):
    with pytest.raises(ConfigError, match=r"arena.update.surprise_weight=1.5.*in \[0, 1\]"):
        replay_arena(ttt_policy(make_scope("swbad")), update={"surprise_weight": 1.5})


def test_the_script_tells_where_the_frequency_goes_by_ply(make_scope, tmp_path, capsys):
    """``scripts/selfplay_surprise.py``: a run's own training searches play, and the bands
    of plies hold every sample once, with the frequencies averaging 1 over them all."""
    import importlib.util
    from pathlib import Path

    import yaml

    run = tmp_path / "run"
    ttt_policy(make_scope("swscript")).save(run / "policy")
    config = {"data": {"loader": {"name": "tictactoe"}}, "arena": {"search": {"simulations": 6}}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    path = Path(__file__).resolve().parents[1] / "scripts" / "selfplay_surprise.py"
    spec = importlib.util.spec_from_file_location("selfplay_surprise", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = script.main([str(run), "--games", "8", "--plies", "0", "3", "6"])
    assert [r["plies"] for r in rows] == ["0-2", "3-5", "6-"]
    assert rows[0]["samples"] == 24  # 8 games, 3 plies each (a game can end from ply 4)
    assert rows[1]["samples"] + rows[2]["samples"] >= 8 * 2
    total = sum(r["samples"] * r["frequency"] for r in rows)
    assert total == pytest.approx(sum(r["samples"] for r in rows))
    out = capsys.readouterr().out
    assert "| 0-2 | 24 |" in out and "mean frequency" in out
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "nowhere")])
    assert "not a self-play run folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main([str(run), "--weight", "1.5"])
    assert "--weight 1.5: need games >= 1, weight in [0, 1]" in capsys.readouterr().err
