"""The solver judge's searching player (``scripts/selfplay_targets.py``): the settings it
judges a saved policy with, without retraining."""

from __future__ import annotations

from selfplay_kit import refused_by_targets_script, targets_script

import paddlecraft.arenas.selfplay as selfplay
from paddlecraft.agents import Policy
from paddlecraft.arenas.selfplay import SearchPlayer

C4_MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 32}


def test_the_solver_judge_searches_with_the_exploration_constant_asked(
    make_scope, monkeypatch, tmp_path, capsys
):
    """``scripts/selfplay_targets.py --c-puct C``: every searching player judged (positions,
    deeper games, tree reuse) searches with ``C``, 1.5 by default; ``C <= 0`` is refused
    before any work."""
    script = targets_script()
    policy = Policy(make_scope("judged"), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7,
                    seed=0)  # fmt: skip
    made = []

    def recording(*args, **kwargs):
        player = SearchPlayer(*args, **kwargs)
        made.append(player.search.c_puct)
        return player

    monkeypatch.setattr(selfplay, "SearchPlayer", recording)
    wide = script.judge_policy(policy, positions=12, simulations=8, games=0, deeper=(16,),
                               reuse=True, c_puct=4.0)  # fmt: skip
    assert made == [4.0, 4.0, 4.0, 4.0]  # search8, search16, search8reuse, search16reuse
    made.clear()
    script.judge_policy(policy, positions=12, simulations=8, games=0)
    assert made == [1.5]
    assert 0 <= wide["search8_perfect_move_rate"] <= wide["search8_good_move_rate"] <= 1
    policy.save(tmp_path / "run" / "policy")  # a saved run, judged through `judge`
    asked = []  # judge_policy's last positional argument: c_puct
    monkeypatch.setattr(script, "judge_policy", lambda *a, **kw: asked.append(a[-1]) or {})
    script.judge(tmp_path / "run", 4, c_puct=3.0)
    script.judge(tmp_path / "run", 4)
    assert asked == [3.0, None]  # None: the searching player's own
    err = refused_by_targets_script(monkeypatch, capsys, tmp_path, "--c-puct", "0")
    assert "--c-puct 0.0: the exploration constant must be > 0" in err


def test_a_judgement_another_way_is_recorded_beside_the_plain_one(monkeypatch, tmp_path):
    """``--fpu``, ``--policy-temperature``, ``--c-puct`` and ``--search-move`` judge a
    searching player that is not the policy's own: its figures land in ``judged.json`` under
    their own names (``search200fpu0_*``), and the plain judgement made before is kept."""
    import json

    script = targets_script()
    run = tmp_path / "out" / "seed0"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"metrics": {}, "elapsed_s": 5.0}))
    value = {"raw_perfect_move_rate": 0.8, "search200_perfect_move_rate": 0.9,
             "search200reuse_first_vs_solver_win_rate": 1.0,
             "search200_first_vs_solver_given_away_lines": {"3333:4": 1}}  # fmt: skip
    monkeypatch.setattr(script, "judge", lambda *a, **kw: dict(value))
    # no sweep summary over this stand-in run: only what the judge records is asked about
    monkeypatch.setattr("paddlecraft.arenas.engine.summary.update_summary",
                        lambda out: (out / "summary.md").write_text(""))  # fmt: skip
    for flags in ([], ["--fpu", "0"], ["--c-puct", "2.5", "--search-move", "lcb"]):
        monkeypatch.setattr("sys.argv", ["selfplay_targets.py", "--seeds", "0", "--out",
                                         str(tmp_path / "out"), *flags])  # fmt: skip
        script.main()
        value = {k: (v / 2 if isinstance(v, float) else v) for k, v in value.items()}
    judged = json.loads((run / "judged.json").read_text())
    m = judged["metrics"]
    assert m["search200_perfect_move_rate"] == 0.9  # the plain judgement, kept
    assert m["search200fpu0_perfect_move_rate"] == 0.45
    assert m["search200fpu0reuse_first_vs_solver_win_rate"] == 0.5
    assert m["search200cpuct2.5lcb_perfect_move_rate"] == 0.225
    assert m["raw_perfect_move_rate"] == 0.2  # the raw policy's: the same under any search
    assert judged["details"]["search200fpu0_first_vs_solver_given_away_lines"] == {"3333:4": 1}
    assert "--fpu 0" in judged["by"]["search200fpu0_perfect_move_rate"]
    assert "--fpu" not in judged["by"]["search200_perfect_move_rate"]
