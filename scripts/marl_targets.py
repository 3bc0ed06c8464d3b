"""arena=marl's targets: the mean episode return summed over agents, per task and seed.

    python scripts/marl_targets.py                          # simple_spread and simple_speaker_listener, seed 0
    python scripts/marl_targets.py --envs simple_spread --seeds 0 1 2
    python scripts/marl_targets.py --read runs/marl_targets  # print what finished runs reached

Training is a plain seed sweep per task (``python run.py -m arena=marl env=<task>
seed=0,1,2``, into ``<out>/<task>``; its summary is the sweep's own, ``paddlecraft summary
<out>/<task>``). This script prints each run's final ``episode_return`` (the evaluation's
mean over 32 episodes of 25 steps, greedy actions) against the task's target, the mean
over seeds, and whether the target holds on the mean.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: the issue's targets: mean episode return summed over agents, 25-step episodes
TARGETS = {"simple_spread": -40.0, "simple_speaker_listener": -20.0}


def finished(folder: Path) -> list[tuple[str, float]]:
    """``(run folder, final episode_return)`` of every finished run under ``folder``."""
    out = []
    for res in sorted(folder.rglob("results.json")):
        r = json.loads(res.read_text())
        if r.get("status") == "finished" and r.get("headline") == "episode_return":
            out.append((str(res.parent), float(r["headline_value"])))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=list(TARGETS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--out", default="runs/marl_targets")
    p.add_argument("--train", nargs="*", default=[], help="extra overrides for every run")
    p.add_argument("--read", default=None, help="only print what the runs under it reached")
    a = p.parse_args()
    out = Path(a.read or a.out)
    ok = True
    for env in a.envs:
        folder = out / env
        if not a.read:
            seeds = ",".join(str(s) for s in a.seeds)
            cmd = [sys.executable, str(ROOT / "run.py"), "-m", "arena=marl", f"env={env}",
                   f"seed={seeds}", f"hydra.sweep.dir={folder}", "hydra.sweep.subdir=seed${seed}",
                   *a.train]  # fmt: skip
            subprocess.run(cmd, cwd=ROOT, check=True)
        runs = finished(folder)
        target = TARGETS.get(env)
        for run, value in runs:
            print(f"{env}  {run}  episode_return {value:.2f}")
        if runs:
            mean = float(np.mean([v for _, v in runs]))
            hit = target is None or mean >= target
            ok &= hit
            print(f"{env}: mean episode_return {mean:.2f} over {len(runs)} run(s); target "
                  f">= {target}: {'met' if hit else 'NOT met'}")  # fmt: skip
        else:
            ok = False
            print(f"{env}: no finished run under {folder}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
