"""arena=marl's team league (simple_tag): snapshots on schedule, frozen opponents that only
act, the judging rule and the ratings it moves, the run's ratings files and live picture,
resume bit-identity with the league on, and the one-group mistake."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import run_arena, standard_callbacks
from paddlecraft.arenas.engine.checkpoint import list_checkpoints
from paddlecraft.arenas.engine.league import weights_of
from paddlecraft.arenas.marl import GroupPolicy, MarlArena
from paddlecraft.arenas.marl.league import ANCHOR, PastOrPresent, TeamLeague, judge
from paddlecraft.arenas.marl.rollout import collect, copy_streams

ROOT = Path(__file__).resolve().parents[1]
MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 16, "hidden_layers": 1}
TAG = {"name": "simple_tag_v3", "kwargs": {"max_cycles": 5}}
TINY = {"num_envs": 2, "rollout_steps": 5, "ppo_epochs": 2, "minibatches": 2, "eval_episodes": 2,
        "steps_per_epoch": 2, "animation": False}  # fmt: skip
GROUPS = ("adversary", "agent")


def arena(every=2, past=0.5, env=TAG, groups=GROUPS, **settings) -> MarlArena:
    agents = {g: GroupPolicy(g, encoder=MLP, lr=1e-2, seed=5) for g in groups}
    league = {"snapshot_every": every, "past_fraction": past}
    return MarlArena(agents, seed=3, env=env, league=league, **{**TINY, **settings})


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------- snapshots
def test_snapshots_are_taken_on_schedule_and_never_change():
    a = arena(every=2, past=1.0)
    taken = {}
    for u in range(5):
        if u % 2 == 0:
            taken[u] = {g: weights_of(p) for g, p in a.policies.items()}
        a.train_step(u)
    assert a.updates == 5
    for g in GROUPS:
        pool = a.league.pools[g].snapshots
        assert [s.step for s in pool] == [0, 2, 4]
        for s in pool:  # the weights the policy had then, still
            assert same(s.weights, taken[s.step][g])
        assert not same(weights_of(a.policies[g]), taken[0][g])  # the learner moved on
    assert a.league.table.rating("adversary@0") == ANCHOR  # the first snapshot is pinned
    assert a.league.table.players["agent@2"]["kind"] == "snapshot"


def test_frozen_opponents_only_act_and_are_never_trained(monkeypatch):
    a = arena(every=1, past=1.0)  # every copy: one group learns, the others are snapshots
    for u in range(3):
        a.train_step(u)
    league = a.league
    actors, frozen = league.lineup(np.random.default_rng(0), 2)
    assert (frozen["adversary"] ^ frozen["agent"]).all()  # one group learns in each copy
    for g in GROUPS:  # where it is frozen, a group's twin holds one of its snapshots
        if frozen[g].any():
            twin = weights_of(league.twins[g])
            assert any(same(twin, s.weights) for s in league.pools[g].snapshots)
            assert not same(twin, weights_of(a.policies[g]))
    data = collect(a.venv, actors, a.norms, 5, copy_streams([1], range(2)),
                   copy_streams([7], range(2)), a.central, greedy=True)  # fmt: skip
    TeamLeague.drop_frozen(data, frozen)
    for g in GROUPS:
        alive, obs, acts = data[g]["alive"], data[g]["obs"], data[g]["actions"]  # [T, N, Ag..]
        assert (alive[:, frozen[g]] == 0).all() and (alive[:, ~frozen[g]] == 1).all()
        for i in range(2):  # the snapshot chose the frozen copies' actions, the learner the rest
            who = league.twins[g] if frozen[g][i] else a.policies[g]
            assert np.array_equal(who.act(obs[:, i].reshape(-1, obs.shape[-1])),
                                  acts[:, i].reshape(-1))  # fmt: skip
    # a group that is a snapshot in every copy of a rollout is not updated; the other is
    all_past = {"adversary": np.zeros(2, bool), "agent": np.ones(2, bool)}
    twin_agent = PastOrPresent(a.policies["agent"], league.twins["agent"], all_past["agent"])
    fixed = {"adversary": a.policies["adversary"], "agent": twin_agent}
    monkeypatch.setattr(league, "lineup", lambda rng, n: (fixed, all_past))
    before = {g: weights_of(p) for g, p in a.policies.items()}
    twin = weights_of(league.twins["agent"])
    metrics = a.train_step(3)
    assert same(weights_of(a.policies["agent"]), before["agent"])
    assert not same(weights_of(a.policies["adversary"]), before["adversary"])
    assert same(weights_of(league.twins["agent"]), twin) and "agent_policy_loss" not in metrics


# ----------------------------------------------------------------------------- ratings
def test_judging_standardises_each_groups_return_over_the_round():
    # simple_tag-like: the adversaries gain 10 per touch each (3 of them), the agent loses 10
    # per touch and more for leaving the field: the raw difference always favours them
    touches = [np.array([3, 0, 1]), np.array([1, 1, 2])]
    rounds = [{"adversary": 30.0 * t, "agent": -10.0 * t - 2.0} for t in touches]
    out = judge(rounds)
    # mean touches 4/3: an episode with more is the adversaries' win, with fewer the agent's
    assert out[0][("adversary", "agent")].tolist() == [1, -1, -1]
    assert out[1][("adversary", "agent")].tolist() == [-1, -1, 1]
    shifted = [{"adversary": r["adversary"] * 0.1 + 7, "agent": r["agent"] - 100} for r in rounds]
    assert all(np.array_equal(x[k], y[k]) for x, y in zip(out, judge(shifted)) for k in x)
    shared = judge([{"speaker": np.array([-3.0, -1.0]), "listener": np.array([-3.0, -1.0])}])
    assert shared[0][("speaker", "listener")].tolist() == [0, 0]  # one reward: draws


def test_ratings_move_towards_the_team_that_wins(caplog):
    a = arena(every=1)
    for u in range(3):
        a.train_step(u)
    league = a.league
    start = {n: league.table.rating(n)[0] for n in league.table.players}

    def play(actors):  # the adversaries' learner catches every agent; old adversaries none
        touches = np.full(4, 3.0 if actors["adversary"] is a.policies["adversary"] else 0.0)
        return {"adversary": 30.0 * touches, "agent": -10.0 * touches - 1.0}

    metrics = league.rate(play, a.updates)
    t = league.table
    assert metrics["rating_adversary"] > start["adversary"]  # beat the agent's learner and past
    assert t.rating("agent@1")[0] < start["agent@1"] and t.rating("agent@2")[0] < start["agent@2"]
    assert t.rating("adversary@1")[0] < start["adversary@1"]  # lost to the agent's learner
    assert t.rating("adversary@0") == t.rating("agent@0") == ANCHOR  # pinned zero points
    assert t.head_to_head("adversary", "agent") == (4, 0, 0)
    assert t.head_to_head("adversary", "agent@2") == (4, 0, 0)
    assert t.history[-1]["step"] == 3 and "agent@2" in t.history[-1]["mu"]
    league.rate(lambda actors: {"adversary": np.ones(4), "agent": np.ones(4)}, a.updates)
    assert "every rated episode was a draw" in caplog.text  # one shared reward: no contest


# ----------------------------------------------------------------------------- a run
def test_a_run_writes_the_ratings_and_the_live_page_draws_them(tmp_path):
    b = arena(every=1, epochs=2)
    run_arena(b, tmp_path / "run", standard_callbacks(progress=False))
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    players = {r["player"] for r in res["ratings"]}
    assert {"adversary", "agent", "adversary@0", "agent@3"} <= players
    assert {"rating_adversary", "rating_agent"} <= res["metrics"].keys()
    report = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert [h["step"] for h in report["history"]] == [2, 4]  # one rating round per evaluation
    assert len(report["history"][-1]["mu"]) == 10  # 2 learners, 2 x 4 snapshots (0 .. 3)
    assert "standardised" in report["judge"]
    for f in ("ratings.png", "returns.png"):
        assert (tmp_path / "run" / f).stat().st_size > 0
    panel = b.live_view()["panels"][-1]
    assert panel["kind"] == "image" and panel["src"].startswith("data:image/png;base64,")
    assert "ratings" in panel["label"] and b.live_view()["panels"][-1] is panel


def test_resume_with_the_league_on_is_bit_identical(tmp_path):
    full = arena(every=1, epochs=2)
    run_arena(full, tmp_path / "full", standard_callbacks(progress=False))
    part = arena(every=1, epochs=2)
    run_arena(part, tmp_path / "part", standard_callbacks(checkpoint_every=1, progress=False),
              max_steps=3)  # fmt: skip
    assert list_checkpoints(tmp_path / "part")[0].name == "step_00000003"
    resumed = arena(every=1, epochs=2)  # a fresh process rebuilds the same arena
    run_arena(resumed, tmp_path / "part", standard_callbacks(progress=False), resume=True)
    for g in GROUPS:
        assert same(weights_of(resumed.policies[g]), weights_of(full.policies[g]))
        assert [s.step for s in resumed.league.pools[g].snapshots] == [0, 1, 2, 3]
        for x, y in zip(resumed.league.pools[g].snapshots, full.league.pools[g].snapshots):
            assert same(x.weights, y.weights)
    assert resumed.league.table.state() == full.league.table.state()
    assert resumed.history == full.history


# ----------------------------------------------------------------------------- mistakes
def test_a_league_on_one_group_is_refused_in_one_line():
    spread = {"name": "simple_spread_v3", "kwargs": {"N": 3, "max_cycles": 5}}
    with pytest.raises(ConfigError) as e:
        arena(every=5, env=spread, groups=("agent",))
    msg = str(e.value)
    assert "\n" not in msg and "arena.league.snapshot_every=5" in msg and "one group" in msg
    with pytest.raises(ConfigError, match="past_fraction"):
        arena(past=1.5)


def test_the_command_line_refuses_a_one_group_league_before_any_folder(tmp_path):
    from tests.mistake_driver import run_case

    run = tmp_path / "run"
    args = ["arena=marl", "debug=smoke", "arena.league.snapshot_every=5", f"hydra.run.dir={run}"]
    r = run_case(args, str(ROOT))
    lines = [ln for ln in r["stderr"].splitlines() if ln.startswith("error:")]
    assert r["rc"] == 2 and len(lines) == 1 and "arena.league.snapshot_every=5" in lines[0]
    assert not (run / "checkpoints").exists()
