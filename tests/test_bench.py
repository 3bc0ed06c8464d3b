"""Every section of ``bench/run.py`` runs at its tiny size, so a benchmark that breaks
(a renamed setting, a moved helper) fails here instead of in the next person's bench run.

The figures at this size mean nothing; the tests check that each section measures what its
report line names: finite positive rates and ratios, and the promised equalities
(batched and one-at-a-time decoding and search agree)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = (
    "overhead",
    "flops",
    "decode",
    "gan_vs_torch",
    "resnet",
    "selfplay",
    "search",
    "selfplay_policy",
    "selfplay_workers",
    "peak_rss",
    "live",
)


@pytest.fixture(scope="module")
def bench_run() -> ModuleType:
    """``bench/run.py`` imported as a module (it puts bench/ on sys.path itself)."""
    spec = importlib.util.spec_from_file_location(
        "paddlecraft_bench_run", ROOT / "bench" / "run.py"
    )
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    spec.loader.exec_module(module)
    yield module
    sys.path[:] = saved


def _positive(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_sections_are_the_listed_ones(bench_run: ModuleType) -> None:
    """A new section gets a tiny size and a test here; none is dropped silently."""
    assert tuple(bench_run._sections("tiny")) == SECTIONS
    assert set(bench_run._sections("full")) == set(SECTIONS)


#: sections whose tiny run is in the slow tier: a peer framework (PyTorch), Ray workers or
#: fresh processes start there, which costs more than the fast tier's share; the others
#: check the report form
SLOW_SECTIONS = {"gan_vs_torch", "resnet", "selfplay_workers", "peak_rss", "flops"}


@pytest.mark.parametrize(
    "name", [pytest.param(s, marks=pytest.mark.slow) if s in SLOW_SECTIONS else s for s in SECTIONS]
)
def test_section_runs_at_tiny_size(bench_run: ModuleType, name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # run folders of the timed runs
    r = bench_run._sections("tiny")[name]()
    assert "error" not in r
    line = bench_run._row(name, r)  # the report line formats
    assert line.startswith(name) and "ERROR" not in line
    if name == "overhead":
        assert _positive(r["ratio"]) and r["steps"] == 3
        assert r["ratio"] == pytest.approx(r["toolkit_s_per_step"] / r["hand_written_s_per_step"])
    elif name == "flops":
        for side in ("tuned", "paddle_default"):
            assert _positive(r[side]["train_gflops"]) and _positive(r[side]["numpy_sgemm_gflops"])
        assert r["paddle_default"]["tuning"] == "0"  # the peer really ran without the tuning
    elif name == "decode":
        assert r["same_output"] is True and _positive(r["speedup"])
    elif name == "gan_vs_torch":
        assert all(_positive(r[k]) for k in ("ratio", "toolkit_vs_hand_written_paddle"))
    elif name == "resnet":
        assert _positive(r["agent_time_vs_paddle_vision"]) and _positive(r["agent_vs_torch_speed"])
    elif name == "selfplay":
        arena = r["arena_connect_four"]
        assert arena["games_per_step"] == 16
        assert _positive(arena["collect_positions_per_s"]) and _positive(
            arena["selfplay_moves_per_s"]
        )
        assert _positive(r["random_moves_per_s"]["vector_env_vs_pettingzoo_x"])
    elif name == "search":
        assert r["same_best_move"] == "1/1" and _positive(r["speedup"])
        assert _positive(r["exact_cost"]) and _positive(r["exact_simulations_per_s"])
    elif name == "selfplay_policy":
        assert r["games_per_step"] == 16 and _positive(r["ratio"])
    elif name == "selfplay_workers":
        assert set(r["moves_per_s"]) == {"0", "1"} and _positive(r["speedup"]["1"])
        assert _positive(r["mib_per_update"]["1"]["sent"])
    elif name == "peak_rss":
        runs = {k: v for k, v in r.items() if isinstance(v, dict)}
        assert len(runs) == 1
        assert all(v["ok"] and _positive(v["peak_rss_mib"]) for v in runs.values())
    elif name == "live":
        assert r["steps"] == 3 and r["pairs"] == 1 and _positive(r["ratio"])
        assert r["ratio"] == pytest.approx(r["pair_ratios"][0], rel=1e-3)  # one pair: its own
        q1, q3 = r["ratio_quartiles"]  # rounded to 4 decimals
        assert q1 - 1e-4 <= r["ratio"] <= q3 + 1e-4 and r["ratio_range"][0] <= q1
        assert r["ratio_of_medians"] == pytest.approx(r["live_s_per_step"] / r["plain_s_per_step"])


def test_the_conv_trunks_copy_bench_measures_both_forwards(bench_run: ModuleType) -> None:
    """``python bench/search_bench.py``'s last figures (not a ``bench/run.py`` section):
    the trunk's training games over its NumPy copy and over Paddle's forward, each timed."""
    import search_bench  # bench/ is on sys.path while bench_run is imported

    r = search_bench.bench_conv("tiny")
    assert r["conv_games"] == 4 and r["conv_paddle_moves"] >= 4 * 7  # whole games: 7+ plies
    rates = ("conv_paddle_moves_per_s", "conv_frozen_moves_per_s", "conv_lines_moves_per_s")
    assert all(_positive(r[k]) for k in rates)
    assert r["cnn_frozen_speedup"] == pytest.approx(
        r["conv_frozen_moves_per_s"] / r["conv_paddle_moves_per_s"], rel=0.02
    )
    assert r["cnn_cost"] == pytest.approx(
        r["conv_lines_moves_per_s"] / r["conv_frozen_moves_per_s"], rel=0.02
    )


def test_the_zugzwang_features_bench_times_each_network(bench_run: ModuleType) -> None:
    """``python bench/search_bench.py``'s gravity figures: the line-feature network's copy
    with and without its zugzwang features, on the same training games, each timed."""
    import search_bench

    r = search_bench.bench_gravity("tiny")
    assert r["gravity_games"] == 4
    assert _positive(r["gravity_moves_per_s"]) and _positive(r["gravity_plain_moves_per_s"])
    assert r["gravity_cost"] == pytest.approx(
        r["gravity_plain_moves_per_s"] / r["gravity_moves_per_s"], rel=0.02
    )


@pytest.fixture(scope="module")
def marl_vs_benchmarl() -> ModuleType:
    """``bench/marl_vs_benchmarl.py`` as a module: it imports neither benchmarl nor torch
    until a side trains, so these tests run without the bench extra."""
    spec = importlib.util.spec_from_file_location(
        "paddlecraft_marl_vs_benchmarl", ROOT / "bench" / "marl_vs_benchmarl.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_marl_vs_benchmarl_parses_and_refuses_a_partial_update(
    marl_vs_benchmarl: ModuleType, capsys
) -> None:
    a = marl_vs_benchmarl.parse_args(["--steps", "1600", "--seeds", "1"])
    assert (a.steps, a.seeds, a.side) == (1600, 1, None)
    default = marl_vs_benchmarl.parse_args([])
    assert default.steps % 800 == 0 and default.seeds >= 2  # whole updates, a spread
    with pytest.raises(SystemExit):
        marl_vs_benchmarl.parse_args(["--steps", "1000"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--steps=1000" in err and "multiple of 800" in err


def test_marl_vs_benchmarl_names_the_bench_extra_when_missing(
    marl_vs_benchmarl: ModuleType, monkeypatch
) -> None:
    """No benchmarl: one ``error:`` line naming it and the extra, before any training."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("benchmarl", "torchrl") else real(name, *a),
    )  # what a machine with the test extra only lacks (torch and mpe2 are there)
    assert marl_vs_benchmarl.missing_extras() == ["benchmarl", "torchrl"]
    monkeypatch.setattr(marl_vs_benchmarl, "compare", lambda a: pytest.fail("trained anyway"))
    with pytest.raises(SystemExit) as e:
        marl_vs_benchmarl.main(["--steps", "800"])
    msg = str(e.value.code)
    assert msg.startswith("error:") and "benchmarl" in msg and "'.[bench,mpe]'" in msg
    assert "\n" not in msg and "benchmarl" not in sys.modules  # checked, never imported


def test_marl_vs_benchmarl_evaluates_both_sides_on_the_same_episodes(
    marl_vs_benchmarl: ModuleType,
) -> None:
    """The one evaluator: episode i is mpe2's simple_spread_v3 seeded 10000 + i, its return
    the sum of every agent's reward over the 25 steps."""
    from mpe2 import simple_spread_v3

    def still(obs: dict) -> dict:
        return {a: 0 for a in obs}  # action 0: no move

    returns = marl_vs_benchmarl.evaluate(still, 3)
    assert returns == marl_vs_benchmarl.evaluate(still, 3)  # the same episodes every time
    env = simple_spread_v3.parallel_env(**marl_vs_benchmarl.TASK)
    for i, got in enumerate(returns):
        obs, _ = env.reset(seed=10_000 + i)
        total, steps = 0.0, 0
        while env.agents:
            obs, rewards, *_ = env.step(still(obs))
            total, steps = total + sum(rewards.values()), steps + 1
        assert steps == 25 and got == pytest.approx(total)
    assert len(set(returns)) == 3 and all(r < 0 for r in returns)  # three different episodes
