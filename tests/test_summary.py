"""Sweep summaries (issue 34): every multirun ends in summary.csv/json/md and a plot, seed
groups with n, mean, std, IQM and 95 % bootstrap intervals; ``paddlecraft summary``.

Every number in a summary is checked against the jobs' own ``results.json``, and every
interval against the exact bootstrap distribution (all n^n resamples), computed here
without scipy."""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from paddlecraft.arenas.engine.summary import (
    SweepSummary,
    build_summary,
    find_runs,
    group_stats,
    update_summary,
)
from paddlecraft.arenas.engine.summary.runs import FAILED
from paddlecraft.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
TINY = ["trainer.progress=false", "trainer.max_steps=2"]
LR, WIDTH = "agents.classifier.lr", "agents.classifier.encoder.hidden_size"


# ---------------------------------------------------------------- the statistics, by hand
def exact_bootstrap(values: list[float], stat) -> tuple[np.ndarray, np.ndarray]:
    """Every resample of ``values`` (n^n, equally likely) and its statistic, sorted."""
    n = len(values)
    out = sorted(stat([values[i] for i in idx]) for idx in itertools.product(range(n), repeat=n))
    return np.asarray(out), np.full(len(out), 1 / len(out))


def quantile(dist: np.ndarray, q: float) -> float:
    """The ``q`` quantile of an exact (sorted, equally weighted) bootstrap distribution."""
    cdf = np.arange(1, len(dist) + 1) / len(dist)
    return float(dist[np.searchsorted(cdf, q - 1e-12)])


def iqm_by_hand(values: list[float]) -> float:
    """Mean of what is left after dropping floor(n/4) values at each end."""
    x, k = sorted(values), len(values) // 4
    kept = x[k : len(x) - k]
    return sum(kept) / len(kept)


def check_interval(values: list[float], low: float, high: float, stat) -> None:
    """``[low, high]`` is the 2.5 % / 97.5 % quantiles of the exact bootstrap distribution
    (exactly for two runs, within one notch of it for more: the sample is 10,000 draws)."""
    dist, _ = exact_bootstrap(values, stat)
    if len(values) == 2:  # each end has mass 1/4: both quantiles are the data's min and max
        assert (low, high) == (min(values), max(values))
        return
    assert quantile(dist, 0.02) - 1e-12 <= low <= quantile(dist, 0.03) + 1e-12
    assert quantile(dist, 0.97) - 1e-12 <= high <= quantile(dist, 0.98) + 1e-12


@pytest.mark.parametrize(
    "values",
    [[0.5, 0.7], [0.2, 0.9, 0.4], [0.1, 0.2, 0.6, 0.9], [3.0, 1.0, 4.0, 1.0, 5.0]],
)
def test_group_statistics_against_the_exact_bootstrap(values):
    s = group_stats(values)
    assert s.n == len(values)
    assert s.mean == pytest.approx(sum(values) / len(values))
    var = sum((v - s.mean) ** 2 for v in values) / (len(values) - 1)
    assert s.std == pytest.approx(math.sqrt(var))
    assert s.iqm == pytest.approx(iqm_by_hand(values))
    assert (s.min, s.max) == (min(values), max(values))
    check_interval(values, s.ci_low, s.ci_high, lambda x: sum(x) / len(x))
    check_interval(values, s.iqm_ci_low, s.iqm_ci_high, iqm_by_hand)


def test_one_run_has_no_spread_and_equal_runs_a_point_interval():
    one = group_stats([0.4])
    assert (one.n, one.mean, one.iqm, one.std, one.ci_low, one.ci_high) == (
        1, 0.4, 0.4, None, None, None)  # fmt: skip
    same = group_stats([0.5, 0.5, 0.5])
    assert (same.ci_low, same.ci_high, same.std) == (0.5, 0.5, 0.0)
    assert group_stats([None, float("nan")]).n == 0


# ---------------------------------------------------------------- checking a summary
def read_csv(path: Path) -> tuple[list[dict], list[dict]]:
    rows = list(csv.DictReader(path.open()))
    return [r for r in rows if r["kind"] == "group"], [r for r in rows if r["kind"] == "run"]


def num(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def check_against_results(sweep: Path, keys: list[str]) -> tuple[list[dict], list[dict]]:
    """Every number of ``sweep/summary.csv`` from the jobs' own results.json."""
    groups, runs = read_csv(sweep / "summary.csv")
    jobs = {}
    for res in sweep.glob("*/results.json"):
        r = json.loads(res.read_text())
        jobs[res.parent.name] = r
    assert {row["name"] for row in runs} == set(jobs)
    for row in runs:
        r = jobs[row["name"]]
        over = dict(o.split("=", 1) for o in r["overrides"])
        assert row["status"] == r["status"]
        assert num(row["value"]) == r["headline_value"]
        for k, v in r["metrics"].items():
            assert num(row[k]) == v, k
        assert num(row["elapsed_s"]) == r["elapsed_s"]
        assert row["seed"] == over["seed"]
        for k in keys:
            assert float(row[k]) == float(over[k])
    for g in groups:
        members = [r for r in runs if all(r[k] == g[k] for k in keys)]
        values = [jobs[m["name"]]["headline_value"] for m in members]
        assert int(g["n"]) == len(values)
        assert g["seed"].split() == [m["seed"] for m in members]
        assert num(g["mean"]) == pytest.approx(np.mean(values), abs=1e-12)
        assert num(g["std"]) == pytest.approx(np.std(values, ddof=1), abs=1e-12)
        assert num(g["iqm"]) == pytest.approx(iqm_by_hand(values), abs=1e-12)
        assert (num(g["min"]), num(g["max"])) == (min(values), max(values))
        check_interval(values, num(g["ci_low"]), num(g["ci_high"]), np.mean)
        check_interval(values, num(g["iqm_ci_low"]), num(g["iqm_ci_high"]), iqm_by_hand)
    best = max(groups, key=lambda g: num(g["mean"]))
    assert [g["best"] for g in groups].count("True") == 1 and best["best"] == "True"
    return groups, runs


@pytest.fixture
def in_process(monkeypatch):
    """The command in this process: its argv, one thread, and Hydra's logging set-up
    (handlers on the root logger) put back afterwards."""
    import logging

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield cli_main
    for h in root.handlers[:]:
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


def sweep_cmd(sweep: Path, *args: str) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), "-m", f"hydra.sweep.dir={sweep}", *TINY, *args]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


# ---------------------------------------------------------------- a real sweep
GRID = [f"{LR}=1e-3,3e-3", f"{WIDTH}=32,64", "seed=0,1"]


def check_two_by_two(sweep: Path) -> None:
    groups, runs = check_against_results(sweep, [LR, WIDTH])
    assert len(runs) == 8 and len(groups) == 4
    assert {(float(g[LR]), int(g[WIDTH])) for g in groups} == {
        (1e-3, 32), (1e-3, 64), (3e-3, 32), (3e-3, 64)}  # fmt: skip
    assert all(g["n"] == "2" and g["status"] == "finished:2" for g in groups)
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["metric"] == "test_accuracy" and summary["mode"] == "max"
    assert summary["group_by"] == [LR, WIDTH]
    md = (sweep / "summary.md").read_text()
    assert md.count("\n| ") == 1 + 4 + 1 + 8  # two tables: header rows + 4 groups + 8 runs
    png = (sweep / "summary.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_by_two_sweep_with_two_seeds_in_process(tmp_path, in_process):
    """The command's own entry point in this process (Hydra's basic launcher runs the jobs
    here): 8 jobs, 4 groups of 2 seeds, every number checked."""
    sweep = tmp_path / "sweep"
    argv = ["-m", f"hydra.sweep.dir={sweep}", "hydra/launcher=basic", *TINY, *GRID]
    assert cli_main(argv) == 0
    check_two_by_two(sweep)
    # the same table from the command, from the folder alone
    again = tmp_path / "again"
    assert cli_main(["summary", str(sweep), "--out", str(again)]) == 0
    assert (again / "summary.csv").read_text() == (sweep / "summary.csv").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "local"])  # local: joblib, the default
def test_two_by_two_sweep_with_two_seeds_through_the_command_line(tmp_path, launcher):
    """python run.py -m <lr>=a,b <width>=c,d seed=0,1 in a new process."""
    sweep = tmp_path / "sweep"
    cmd = sweep_cmd(sweep, f"hydra/launcher={launcher}", *GRID)
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env())
    assert r.returncode == 0, r.stderr[-3000:]
    check_two_by_two(sweep)


def test_a_killed_sweep_has_a_correct_partial_summary(tmp_path):
    """Kill the sweep once two jobs are in its summary: the summary holds exactly jobs that
    finished, each number from its results.json; the job that was running is absent."""
    sweep = tmp_path / "sweep"
    cmd = sweep_cmd(sweep, "hydra/launcher=basic", f"{LR}=1e-3,3e-3", "seed=0,1,2")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            path = sweep / "summary.json"
            if path.is_file() and len(json.loads(path.read_text())["runs"]) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the sweep ended before it could be killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    summary = json.loads((sweep / "summary.json").read_text())
    assert 2 <= len(summary["runs"]) < 6
    names = {r["name"] for r in summary["runs"]}
    finished = {p.parent.name for p in sweep.glob("*/results.json")}
    assert names <= finished  # a job killed before its end is simply absent
    groups, runs = read_csv(sweep / "summary.csv")
    for row in runs:
        r = json.loads((sweep / row["name"] / "results.json").read_text())
        assert num(row["value"]) == r["headline_value"] and row["status"] == "finished"
    assert sum(int(g["n"]) for g in groups) == len(runs)
    # rebuilt now, the summary lists every job that did write its results, and no other
    update_summary(sweep)
    rebuilt = json.loads((sweep / "summary.json").read_text())["runs"]
    assert {r["name"] for r in rebuilt} == finished
    started = {p.name for p in sweep.iterdir() if (p / ".hydra").is_dir()}
    assert len(started) < 6  # the sweep really was cut short


# ---------------------------------------------------------------- failed and diverged jobs
def fake_job(sweep: Path, num: int, seed: int, status: str, value: float | None) -> Path:
    """A job folder as a sweep leaves it (results.json as ResultsWriter writes it)."""
    d = sweep / f"{num}_seed={seed}"
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n- arena.n=2\n")
    if status == "failed-before-results":
        return d
    results = {
        "status": status, "headline": "acc", "headline_mode": "max", "headline_value": value,
        "metrics": {} if value is None else {"acc": value, "loss": 1 - value},
        "overrides": [f"seed={seed}", "arena.n=2"], "elapsed_s": 1.5 + num,
    }  # fmt: skip
    (d / "results.json").write_text(json.dumps(results))
    return d


class FakeReturn:
    """What Hydra hands on_job_end for a job that raised."""

    def __init__(self, error: Exception, overrides: list[str]) -> None:
        from hydra.core.utils import JobStatus

        self.status, self._return_value, self.overrides = JobStatus.FAILED, error, overrides


def job_config(sweep: Path, job: Path):
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {"hydra": {"mode": RunMode.MULTIRUN, "runtime": {"output_dir": str(job)},
                   "sweep": {"dir": str(sweep), "subdir": job.name}}})  # fmt: skip


def test_failed_and_diverged_jobs_keep_their_status_and_leave_the_statistics(tmp_path):
    sweep = tmp_path / "sweep"
    fake_job(sweep, 0, 0, "finished", 0.75)
    fake_job(sweep, 1, 1, "diverged", None)
    fake_job(sweep, 2, 2, "finished", 0.25)
    crashed = fake_job(sweep, 3, 3, "failed-before-results", None)
    # Hydra calls the callback in the crashed job's process with its exception
    SweepSummary().on_job_end(
        job_config(sweep, crashed),
        FakeReturn(RuntimeError("out of\nmemory"), ["seed=3", "arena.n=2"]),
    )
    assert json.loads((crashed / FAILED).read_text())["error"] == "RuntimeError: out of memory"
    summary = json.loads((sweep / "summary.json").read_text())
    assert [(r["job"], r["status"], r["value"]) for r in summary["runs"]] == [
        (0, "finished", 0.75), (1, "diverged", None), (2, "finished", 0.25),
        (3, "failed", None)]  # fmt: skip
    (group,) = summary["groups"]
    assert (group["n"], group["mean"], group["min"], group["max"]) == (2, 0.5, 0.25, 0.75)
    assert group["status"] == "finished:2 diverged:1 failed:1"
    assert summary["best_run"] == "0_seed=0"
    md = (sweep / "summary.md").read_text()
    assert "| 1 | 1 | diverged | - |" in md and "| 3 | 3 | failed | - |" in md


def test_a_single_run_writes_no_sweep_summary(tmp_path):
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    job = fake_job(tmp_path, 0, 0, "finished", 0.5)
    cfg = OmegaConf.create({"hydra": {"mode": RunMode.RUN, "runtime": {"output_dir": str(job)}}})
    SweepSummary().on_job_end(cfg, None)
    assert not list(tmp_path.rglob("summary.*"))


# ---------------------------------------------------------------- paddlecraft summary
def test_summary_command_on_runs_made_at_different_times(tmp_path, compose_config, capsys):
    """Three single runs in their own time-stamped folders (two seeds of one setting, one
    of another) and a resumed run: grouped by the setting, the resumed run with its seed."""
    from paddlecraft.arenas.engine.app import run_config

    runs = tmp_path / "runs" / "classify"
    made = {}
    for stamp, lr, seed in [("2026-11-01_09-00-00", "1e-3", 0), ("2026-11-02_18-30-00", "1e-3", 1),
                            ("2026-11-03_07-15-00", "3e-3", 0)]:  # fmt: skip
        overrides = [*TINY, f"{LR}={lr}", f"seed={seed}"]
        made[stamp] = run_config(compose_config(*overrides), runs / stamp, overrides)
    # a run resumed later with more steps: its results.json carries only the resume's overrides
    first = [*TINY, f"{LR}=3e-3", "seed=1"]
    run_config(compose_config(*first), runs / "2026-11-04_10-00-00", first)
    resume = [f"resume={runs / '2026-11-04_10-00-00'}", "trainer.max_steps=3"]
    made["resumed"] = run_config(compose_config(*resume), runs / "x", resume)
    assert made["resumed"]["step"] == 3

    code = cli_main(["summary", str(runs), "--by", LR, "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    assert f"(by {LR})" in out
    groups, rows = read_csv(tmp_path / "out" / "summary.csv")
    assert [(float(g[LR]), g["seed"]) for g in groups] == [(1e-3, "0 1"), (3e-3, "0 1")]
    vals = {1e-3: [made[s]["headline_value"] for s in ("2026-11-01_09-00-00",
                                                       "2026-11-02_18-30-00")],
            3e-3: [made["2026-11-03_07-15-00"]["headline_value"],
                   made["resumed"]["headline_value"]]}  # fmt: skip
    for g in groups:
        assert num(g["mean"]) == pytest.approx(np.mean(vals[float(g[LR])]), abs=1e-12)
    # the default grouping (what varies, seed aside) sees that the resumed run trained longer
    summary = build_summary(find_runs([runs]))
    assert summary.by == ["trainer.max_steps", LR]
    assert [(g.key, g.stats.n) for g in summary.groups] == [
        ((2, 1e-3), 2), ((2, 3e-3), 1), ((3, 3e-3), 1)]  # fmt: skip
    # another metric
    assert cli_main(["summary", str(runs), "--metric", "test_loss"]) == 0
    assert "Metric: `test_loss`" in capsys.readouterr().out


def test_summary_command_mistakes_are_one_line(tmp_path, capsys):
    fake_job(tmp_path / "sweep", 0, 0, "finished", 0.5)
    assert cli_main(["summary", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: summary: ") and "is not a folder" in err and err.count("\n") == 1
    assert cli_main(["summary", str(tmp_path / "sweep"), "--metric", "bleu"]) == 2
    err = capsys.readouterr().err
    assert "--metric 'bleu'" in err and "acc, loss" in err and err.count("\n") == 1
    assert cli_main(["summary", str(tmp_path / "sweep"), "--by", "arena.nn"]) == 2
    err = capsys.readouterr().err
    assert "--by 'arena.nn' is not a setting" in err and err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    assert cli_main(["summary", str(tmp_path / "empty")]) == 2
    assert "no runs found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli_main(["summary"])
    assert e.value.code == 2 and capsys.readouterr().err.startswith("error: paddlecraft summary")


# ---------------------------------------------------------------- MLflow: one store per sweep
@pytest.mark.slow
def test_mlflow_sweep_logs_every_job_into_the_sweeps_experiment(tmp_path, in_process):
    """trainer.mlflow=true in a sweep: both jobs in <sweep>/mlflow/mlflow.db, experiment named
    after the sweep folder, read back through MLflow's client."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    sweep = tmp_path / "sweep"
    argv = ["-m", f"hydra.sweep.dir={sweep}", "hydra/launcher=basic", *TINY,
            "trainer.mlflow=true", f"{LR}=1e-3,3e-3"]  # fmt: skip
    assert cli_main(argv) == 0
    client = MlflowClient(tracking_uri=f"sqlite:///{sweep / 'mlflow' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(str(sweep))
    assert experiment is not None
    found = client.search_runs([experiment.experiment_id])
    assert len(found) == 2
    jobs = {p.parent.resolve(): json.loads(p.read_text()) for p in sweep.glob("*/results.json")}
    assert {Path(r.data.tags["paddlecraft.run_dir"]) for r in found} == set(jobs)
    for r in found:
        results = jobs[Path(r.data.tags["paddlecraft.run_dir"])]
        assert r.data.metrics["test_accuracy"] == pytest.approx(results["headline_value"])
        assert r.info.status == "FINISHED" and r.data.tags["paddlecraft.status"] == "finished"
        assert r.data.params[LR] == dict(o.split("=") for o in results["overrides"])[LR]
    assert not list(sweep.glob("*/mlflow"))  # no store of their own in the job folders


def test_runs_started_differently_group_by_what_they_ran(tmp_path):
    """Seeds 0-2 of one config launched three ways: resumed (their results.json written
    before resumed runs kept their first command line), naming a setting's default
    (``arena.epochs=10``), naming the config group's default; seed 3 with another encoder;
    seed 4 started from Python (no Hydra record: its encoder is unknown, None). The first
    three form one group; a None among the keys sorts last."""
    runs = ((0, [], True), (1, ["arena.epochs=10"], False),
            (2, ["encoder@agents.policy.encoder=lines"], True),
            (3, ["encoder@agents.policy.encoder=mlp"], False), (4, None, False))  # fmt: skip
    for seed, extra, resumed in runs:
        d = tmp_path / f"s{seed}" / f"seed{seed}"
        d.mkdir(parents=True)
        first = [f"seed={seed}", *(extra or [])]
        if extra is not None:  # Hydra's record of how the run started
            (d / ".hydra").mkdir()
            (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in first))
            encoder = "mlp" if seed == 3 else "lines"
            choices = {"game": "connect_four", "encoder@agents.policy.encoder": encoder,
                       "hydra/launcher": "basic"}  # fmt: skip
            hydra = {"hydra": {"runtime": {"choices": choices}, "job": {"num": 0}}}
            (d / ".hydra" / "hydra.yaml").write_text(json.dumps(hydra))
        overrides = [f"resume={d}", "trainer.progress=false"] if resumed else first
        (d / "config.yaml").write_text("arena:\n  epochs: 10\n")
        (d / "results.json").write_text(json.dumps({
            "status": "finished", "headline": "acc", "headline_mode": "max",
            "headline_value": 0.5 + seed / 10, "metrics": {"acc": 0.5 + seed / 10},
            "overrides": overrides, "elapsed_s": 10.0}))  # fmt: skip
    summary = build_summary(find_runs([tmp_path / f"s{s}" for s, *_ in runs]))
    # arena.epochs is 10 in every run: only the encoder varies
    assert summary.by == ["encoder@agents.policy.encoder"]
    got = [(g.key, sorted(r.seed for r in g.runs)) for g in summary.groups]
    assert got == [(("lines",), [0, 1, 2]), (("mlp",), [3]), ((None,), [4])]
    assert summary.groups[0].stats.mean == pytest.approx(0.6)
    # runs of several sweeps (each a job 0) are named by their folders, not by "0" each
    runs_table = summary.markdown().split("\nRuns")[1].splitlines()[2:]
    assert runs_table[0].split("|")[1].strip() == "run"
    firsts = [row.split("|")[1].replace("**best**", "").strip() for row in runs_table[2:]]
    assert sorted(firsts) == sorted(r.name for r in summary.runs) and len(set(firsts)) == 5


def test_which_way_is_better_by_headline_name_or_flag(tmp_path, capsys):
    """A loss, a mistake rate, an error or an FID is better lower: the summary says so and
    marks the group with the lowest mean best, unless the runs call it their headline with
    another word or ``--mode`` says otherwise; any other metric is better higher."""
    from paddlecraft.arenas.engine.summary import better_way
    from paddlecraft.arenas.engine.summary.runs import SummaryError

    for n, acc in ((2, 0.7), (2, 0.8), (3, 0.9), (3, 0.95)):
        job = fake_job(tmp_path / f"n{n}", int(acc * 100), int(acc * 100), "finished", acc)
        (job / ".hydra" / "overrides.yaml").write_text(f"- seed={int(acc * 100)}\n- arena.n={n}\n")
        results = json.loads((job / "results.json").read_text())
        results["overrides"] = [f"seed={int(acc * 100)}", f"arena.n={n}"]
        (job / "results.json").write_text(json.dumps(results))
    runs = find_runs([tmp_path])

    def best(**kw):  # the best group's arena.n, and which way the summary calls better
        summary = build_summary(runs, **kw)
        return [g.key[0] for g in summary.groups if g.best], summary.mode

    assert best(metric="acc") == ([3], "max")  # the runs' own word for their headline
    assert best(metric="loss") == ([3], "min")  # loss = 1 - acc: the n=3 runs' is lower
    assert best(metric="loss", mode="max") == ([2], "max")
    assert cli_main(["summary", str(tmp_path), "--metric", "loss"]) == 0
    assert "Metric: `loss` (lower is better)" in capsys.readouterr().out
    assert cli_main(["summary", str(tmp_path), "--metric", "loss", "--mode", "max"]) == 0
    assert "Metric: `loss` (higher is better)" in capsys.readouterr().out
    with pytest.raises(SummaryError, match="--mode 'up' must be max or min"):
        build_summary(runs, metric="loss", mode="up")
    lower = ["test_loss", "loss_rate_vs_mcts100", "pons_beginning-hard_search200_mistake_rate",
             "classifier.fid", "caption_wer", "error_rate", "frechet_distance", "val_mse"]  # fmt: skip
    higher = ["no_loss_rate_vs_random", "search200_perfect_move_rate", "topsim", "bleu",
              "lossless", "distinct_messages"]  # fmt: skip
    assert {m: better_way(m) for m in lower + higher} == {
        **dict.fromkeys(lower, "min"), **dict.fromkeys(higher, "max")}  # fmt: skip


def test_judgements_made_after_the_runs_are_grouped_and_bootstrapped(tmp_path, capsys):
    """A judge outside the run (``scripts/selfplay_targets.py``'s solver) records its figures
    with `record_judgement`; the summary reads them as metrics: grouped by setting, over the
    seeds, with the run's own metric winning a name clash and later judgements replacing
    only the names they give."""
    from paddlecraft.arenas.engine.summary.runs import JUDGED, SummaryError, record_judgement

    perfect = {(0, 0): 0.80, (0, 1): 0.84, (0, 2): 0.82, (1, 0): 0.86, (1, 1): 0.88, (1, 2): 0.90}
    for (arm, seed), value in perfect.items():
        job = fake_job(tmp_path / f"arm{arm}", seed, seed, "finished", 0.9)
        (job / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n- arena.n={arm + 2}\n")
        results = json.loads((job / "results.json").read_text())
        results["overrides"] = [f"seed={seed}", f"arena.n={arm + 2}"]
        (job / "results.json").write_text(json.dumps(results))
        record_judgement(job, {"perfect": 0.0, "acc": 0.1, "lines": 3}, by="first judge",
                         details={"given_away": {"3333:2": 2}, "kept": ["x"]})  # fmt: skip
        record_judgement(job, {"perfect": value}, by="python scripts/judge.py",
                         details={"given_away": {}})  # fmt: skip
    judged = json.loads((tmp_path / "arm0" / "0_seed=0" / JUDGED).read_text())
    assert judged["metrics"] == {"perfect": 0.80, "acc": 0.1, "lines": 3}
    assert judged["by"]["perfect"] == "python scripts/judge.py"
    assert judged["by"]["acc"] == "first judge"
    # details are kept beside the figures and merged by name, but never read as metrics
    assert judged["details"] == {"given_away": {}, "kept": ["x"]}
    assert judged["by"]["given_away"] == "python scripts/judge.py"
    assert judged["by"]["kept"] == "first judge"
    runs = find_runs([tmp_path / "arm0", tmp_path / "arm1"])
    assert {r.metrics["acc"] for r in runs} == {0.9}  # the run's own figure, not the judge's
    assert not any({"given_away", "kept"} & set(r.metrics) for r in runs)
    summary = build_summary(runs, metric="perfect")
    assert summary.by == ["arena.n"]
    means = {g.key: g.stats.mean for g in summary.groups}
    assert means == {(2,): pytest.approx(0.82), (3,): pytest.approx(0.88)}
    check_interval([0.86, 0.88, 0.90], summary.groups[1].stats.ci_low,
                   summary.groups[1].stats.ci_high, np.mean)  # fmt: skip
    assert cli_main(["summary", str(tmp_path), "--metric", "perfect"]) == 0
    assert "Metric: `perfect`" in capsys.readouterr().out
    with pytest.raises(SummaryError, match="holds no finished run"):
        record_judgement(tmp_path / "arm0", {"perfect": 1.0}, by="x")


def test_the_targets_script_records_its_solver_figures_for_the_summary(
    tmp_path, monkeypatch, capsys
):
    """``scripts/selfplay_targets.py`` on finished runs judges without retraining and records
    each run's numeric figures (not its seed, time, position lists or flags) in
    ``judged.json``, the position lists beside them as details; the summary then groups the
    seeds' judgements."""
    from selfplay_kit import targets_script

    script = targets_script()
    rates = {0: 0.84, 1: 0.88}
    for seed in rates:
        job = fake_job(tmp_path / "out", seed, seed, "finished", 0.9)
        job.rename(tmp_path / "out" / f"seed{seed}")
    row = lambda run, *a, **k: {  # noqa: E731
        "search200_perfect_move_rate": rates[int(run.name[-1])], "raw_good_move_rate": 0.9,
        "search200_first_vs_solver_given_away_lines": {"3333:2": 1}, "flag": True,
    }  # fmt: skip
    monkeypatch.setattr(script, "judge", row)
    argv = ["selfplay_targets.py", "--out", str(tmp_path / "out"), "--seeds", "0", "1",
            "--solver-games", "0"]  # fmt: skip
    monkeypatch.setattr("sys.argv", argv)
    script.main()
    judged = json.loads((tmp_path / "out" / "seed1" / "judged.json").read_text())
    assert judged["metrics"] == {"search200_perfect_move_rate": 0.88, "raw_good_move_rate": 0.9}
    # the positions the solver games were given away in are kept as details, not figures
    assert judged["details"] == {"search200_first_vs_solver_given_away_lines": {"3333:2": 1}}
    assert judged["by"]["raw_good_move_rate"].startswith("scripts/selfplay_targets.py --out")
    out = capsys.readouterr().out
    assert "search200_first_vs_solver_win_rate >= 1.0: not measured (--solver-games 0)" in out
    assert "search200_perfect_move_rate >= 0.86 (every seed >= 0.84): mean 0.860, met" in out
    summary = build_summary(find_runs([tmp_path / "out"]), metric="search200_perfect_move_rate")
    assert summary.groups[0].stats.mean == pytest.approx(0.86)
