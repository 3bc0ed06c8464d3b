"""The policy a self-play run ends with: the mean of its last epochs' weights
(``arena.eval.average_last``), its state in checkpoints, and the refusals."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from selfplay_kit import merged

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import SelfPlayArena, run_arena
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay.final import EpochAverage, average_of_run

TTT_MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": 18,
    "hidden_size": 16,
    "num_classes": 16,
    "hidden_layers": 1,
}


def _policy() -> Policy:
    return Policy("policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)


def _arena(policy: Policy, **kw: object) -> SelfPlayArena:
    base = {
        "data": "tictactoe",
        "epochs": 3,
        "steps_per_epoch": 1,
        "games_per_step": 16,
        "update": {"minibatch_size": 32, "epochs": 1},
        "league": {"snapshot_every": 1},  # the pool holds every update's weights
        "eval": {"games": {"random": 4}, "average_last": 2},
    }
    return SelfPlayArena({"policy": policy}, **merged(base, kw))


def _shift(policy: Policy, by: float) -> None:
    with paddle.no_grad():
        for p in policy.parameters():
            p.set_value(p + by)


def test_epoch_average_keeps_the_last_epochs_and_averages_them():
    policy = _policy()
    start = {k: v.numpy().copy() for k, v in policy.state_dict().items()}
    avg = EpochAverage(2)
    avg.record(policy, 10)
    _shift(policy, 1.0)
    avg.record(policy, 20)
    _shift(policy, 2.0)
    avg.record(policy, 30)  # weights start + 3; the one of update 10 leaves
    avg.record(policy, 30)  # the same epoch end again: still one copy
    assert [s.step for s in avg.kept] == [20, 30]
    mean = avg.average()
    assert mean.step == 30 and mean.name == "average_20_30"
    for key, w in start.items():  # (start + 1 + start + 3) / 2
        np.testing.assert_allclose(mean.weights[key], w + 2.0, rtol=0, atol=1e-6)
        assert mean.weights[key].dtype == w.dtype
    # the kept arrays are copies: training on does not move them
    _shift(policy, 5.0)
    np.testing.assert_allclose(
        avg.average().weights[next(iter(start))], mean.weights[next(iter(start))]
    )


def test_epoch_average_state_round_trip_and_old_checkpoints():
    policy = _policy()
    avg = EpochAverage(3)
    for step in (1, 2):
        _shift(policy, 0.5)
        avg.record(policy, step)
    back = EpochAverage(3)
    back.load_state(avg.state())
    assert [s.step for s in back.kept] == [1, 2]
    for key, w in avg.average().weights.items():
        assert np.array_equal(back.average().weights[key], w)
    shorter = EpochAverage(1)  # resumed with a shorter window: the newest epoch end only
    shorter.load_state(avg.state())
    assert [s.step for s in shorter.kept] == [2]
    old = EpochAverage(3)
    old.load_state(None)  # a checkpoint from before averaging
    assert old.kept == []
    with pytest.raises(RuntimeError, match="no epoch end"):
        old.average()


def test_a_run_ends_with_the_mean_of_its_last_epochs_and_saves_it(tmp_path):
    seed_everything(0)
    policy = _policy()
    arena = _arena(policy)
    cbs = standard_callbacks(checkpoint_every=1, progress=False, eval_every=1)
    out = run_arena(arena, tmp_path, cbs)
    assert out["status"] == "finished" and out["step"] == 3
    snaps = {s.step: s.weights for s in arena.pool.snapshots}  # updates 0..3
    m = out["metrics"]
    assert m["averaged_epochs"] == 2.0
    assert "last_win_rate_vs_random" in m and "win_rate_vs_random" in m
    saved = Agent.load(tmp_path / "policy")
    for key, value in policy.state_dict().items():
        expected = (snaps[2][key].astype(np.float64) + snaps[3][key]) / 2
        np.testing.assert_allclose(value.numpy(), expected, rtol=0, atol=1e-6)
        assert not np.allclose(value.numpy(), snaps[3][key])  # not simply the last one
        assert np.array_equal(saved.state_dict()[key].numpy(), value.numpy())
    # rebuilt after the fact from the run's pool: the same weights, bit for bit (the
    # epoch length comes from the config.yaml that run.py writes)
    (tmp_path / "config.yaml").write_text("arena:\n  steps_per_epoch: 1\n")
    rebuilt = average_of_run(tmp_path, 2)
    assert rebuilt.name == "average_2_3"
    for key, value in policy.state_dict().items():
        assert np.array_equal(rebuilt.weights[key], value.numpy()), key
    with pytest.raises(ValueError, match="it has 3 epochs; average at most that many"):
        average_of_run(tmp_path, 4)


def test_averaging_a_run_after_the_fact_needs_a_snapshot_at_every_epoch_end(tmp_path):
    seed_everything(0)
    arena = _arena(_policy(), epochs=4, league={"snapshot_every": 2}, eval={"average_last": 0})
    run_arena(arena, tmp_path, standard_callbacks(checkpoint_every=1, progress=False))
    (tmp_path / "config.yaml").write_text("arena:\n  steps_per_epoch: 1\n")
    assert average_of_run(tmp_path, 1).step == 4  # the pool holds updates 0, 2 and 4
    with pytest.raises(ValueError, match=r"no snapshot of updates \[3\].*snapshot_every dividing"):
        average_of_run(tmp_path, 2)
    with pytest.raises(ValueError, match="epochs must be >= 1, got 0"):
        average_of_run(tmp_path, 0)


def test_an_evaluation_between_epoch_ends_stays_out_of_the_average():
    seed_everything(0)
    arena = _arena(_policy(), epochs=2, steps_per_epoch=2)
    arena.train_step(0)
    arena.evaluate()  # mid-epoch, as a live run's "evaluate" command
    assert arena.average.kept == []
    arena.train_step(1)
    arena.evaluate()  # the epoch end
    arena.evaluate()  # again at the same update: still one copy
    assert [s.step for s in arena.average.kept] == [2]


def test_a_resumed_run_averages_the_epochs_before_its_checkpoint_too(tmp_path):
    def cbs():
        return standard_callbacks(checkpoint_every=1, progress=False, eval_every=1)

    seed_everything(0)
    full = _policy()
    run_arena(_arena(full), tmp_path / "full", cbs())
    seed_everything(0)
    run_arena(_arena(_policy()), tmp_path / "part", cbs(), max_steps=2)  # stops after epoch 2
    seed_everything(123)
    resumed = _policy()  # a fresh process: the epoch end of update 2 comes from the checkpoint
    out = run_arena(_arena(resumed), tmp_path / "part", cbs(), resume=True)
    assert out["step"] == 3 and out["metrics"]["averaged_epochs"] == 2.0
    for key, value in full.state_dict().items():
        assert np.array_equal(resumed.state_dict()[key].numpy(), value.numpy()), key


@pytest.mark.parametrize(
    ("eval_cfg", "match"),
    [
        ({"average_last": -1}, r"arena.eval.average_last=-1: must be >= 0"),
        (
            {"average_last": 2, "keep_best": "win_rate_vs_random"},
            r"keep_best and arena.eval.average_last each choose.*average_last=0",
        ),
    ],
)
def test_bad_averaging_settings_are_refused_before_training(eval_cfg, match):
    with pytest.raises(ConfigError, match=match):
        _arena(_policy(), eval=eval_cfg)
