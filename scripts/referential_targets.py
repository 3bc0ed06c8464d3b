"""Measure the referential-game targets (issue 24) with the shipped configs and print them.

    python scripts/referential_targets.py                     # all three, seeds 0 1 2
    python scripts/referential_targets.py --only attributes --seeds 0 1 2
    python scripts/referential_targets.py --only shapes population

Each game is ``python run.py ...`` into ``runs/referential_targets/<game>_seed<S>`` (skipped
when that run finished already); the figures come from its ``results.json``:

- attributes: ``arena=referential`` (2 attributes x 10 values, max_len 2, 10% of the
  combinations held out): train accuracy >= 0.99 on every seed; held-out accuracy (aim: mean
  >= 0.8), topsim, posdis and bosdis per seed;
- shapes: ``arena=referential_shapes`` (K=4 candidate images): test accuracy >= 0.95;
- population: ``arena=referential arena.speakers=3 arena.listeners=3`` with a newcomer
  listener: every off-diagonal cross-play accuracy (training and held-out objects) within
  0.05 of the diagonal mean (``crossplay_gap <= 0.05``; the held-out objects alone,
  ``crossplay_test_gap``, are shown too), and the newcomer's steps to 90% against the first
  generation's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GAMES: dict[str, list[str]] = {
    "attributes": ["arena=referential"],
    "shapes": ["arena=referential_shapes"],
    "population": [
        "arena=referential",
        "arena.speakers=3",
        "arena.listeners=3",
        "arena.epochs=40",
        "arena.newcomer_steps=1500",
    ],
}
#: per game: (metric, comparison, target) that must hold on every seed
TARGETS: dict[str, list[tuple[str, str, float]]] = {
    "attributes": [("train_accuracy", ">=", 0.99)],
    "shapes": [("test_accuracy", ">=", 0.95)],
    "population": [("crossplay_gap", "<=", 0.05)],
}
SHOWN = {
    "attributes": [
        "train_accuracy",
        "test_accuracy",
        "topsim",
        "posdis",
        "bosdis",
        "message_entropy",
        "vocab_used",
    ],
    "shapes": ["train_accuracy", "test_accuracy", "topsim", "posdis", "bosdis"],
    "population": [
        "train_accuracy",
        "test_accuracy",
        "crossplay_diagonal",
        "crossplay_off_diagonal",
        "crossplay_gap",
        "crossplay_test_gap",
        "newcomer_steps_to_goal",
        "first_generation_steps_to_goal",
        "ease_of_teaching",
        "topsim",
    ],
}


def run(game: str, seed: int, out: Path) -> dict:
    """Run one game (unless it finished before) and return its results.json."""
    d = out / f"{game}_seed{seed}"
    results = d / "results.json"
    if results.is_file() and json.loads(results.read_text()).get("status") == "finished":
        return json.loads(results.read_text())
    cmd = [
        sys.executable,
        str(ROOT / "run.py"),
        *GAMES[game],
        f"seed={seed}",
        "trainer.progress=false",
        f"hydra.run.dir={d}",
    ]
    t = time.time()
    subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ), capture_output=True)
    r = json.loads(results.read_text())
    r["wall_s"] = round(time.time() - t, 1)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(GAMES), default=sorted(GAMES))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default=str(ROOT / "runs" / "referential_targets"))
    args = ap.parse_args()
    out = Path(args.out)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in cpu.splitlines()
            if line.startswith("Model name")
        ),
        "unknown CPU",
    )
    print(f"CPU: {model}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    summary: dict = {}
    ok = True
    for game in args.only:
        rows = []
        for seed in args.seeds:
            r = run(game, seed, out)
            m = r["metrics"]
            rows.append(
                {
                    "seed": seed,
                    **{k: m.get(k) for k in SHOWN[game]},
                    "elapsed_s": r.get("elapsed_s"),
                }
            )
        print(f"\n{game}: python run.py {' '.join(GAMES[game])} seed=S")
        keys = ["seed", *SHOWN[game], "elapsed_s"]
        print("  " + "  ".join(f"{k:>12.12}" for k in keys))
        for row in rows:
            print("  " + "  ".join(_cell(row[k]) for k in keys))
        means = {
            k: sum(r[k] for r in rows) / len(rows)
            for k in SHOWN[game]
            if all(isinstance(r[k], float) for r in rows)
        }
        print("  " + "  ".join(_cell(means.get(k, "mean" if k == "seed" else "")) for k in keys))
        for metric, op, target in TARGETS[game]:
            held = all((r[metric] >= target) if op == ">=" else (r[metric] <= target) for r in rows)
            ok &= held
            print(f"  target {metric} {op} {target} on every seed: {'MET' if held else 'NOT MET'}")
        if game == "attributes":
            print(f"  held-out accuracy mean {means['test_accuracy']:.3f} (aim >= 0.8)")
        summary[game] = {"rows": rows, "means": means}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"cpu": model, **summary}, indent=2))
    print(f"\nall targets met: {ok}  ({out / 'summary.json'})")


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:>12.4f}"
    return f"{v!s:>12.12}"


if __name__ == "__main__":
    main()
