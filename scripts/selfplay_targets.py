"""Measure the self-play search targets over several seeds: train, then a tournament.

    python scripts/selfplay_targets.py                      # seeds 0 1 2, 100 games per pair
    python scripts/selfplay_targets.py --seeds 0 --games 40 --train "arena.epochs=4"

For each seed: ``python run.py arena=selfplay game=connect_four seed=S`` into
``runs/selfplay_targets/seedS`` (skipped when that run finished already), then
``python -m arenas.selfplay.tournament`` with the trained network alone (``raw``) and
with PUCT search (``search``, ``--simulations`` per move) against random, tactical,
MCTS-100 and MCTS-1000, both seats, ``--games`` per pair. Prints each seed's scores
(win 1, draw 1/2) and whether the targets hold: search >= 0.9 vs MCTS-100 and >= 0.5 vs
MCTS-1000, raw >= 0.5 vs MCTS-100.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--simulations", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "runs" / "selfplay_targets"))
    ap.add_argument("--train", nargs="*", default=[], help="extra run.py overrides")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    rows = []
    for seed in args.seeds:
        run = Path(args.out) / f"seed{seed}"
        t = time.time()
        if not (run / "results.json").exists():
            cmd = [sys.executable, str(ROOT / "run.py"), "arena=selfplay", "game=connect_four",
                   f"seed={seed}", "trainer.progress=false", f"hydra.run.dir={run}", *args.train]  # fmt: skip
            subprocess.run(cmd, cwd=ROOT, env=env, check=True)
        train_s = time.time() - t
        cmd = [sys.executable, "-m", "arenas.selfplay.tournament", "--game", "connect_four",
               "--games", str(args.games), "--seed", str(seed), "--out", str(run / "tournament"),
               "--focus", "search", "raw", "--players", f"search={run}:search{args.simulations}",
               f"raw={run}", "random", "tactical", "mcts100", "mcts1000"]  # fmt: skip
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        report = json.loads((run / "tournament" / "tournament.json").read_text())
        score = {(p["a"], p["b"]): p["score"] for p in report["pairs"]}
        rows.append({
            "seed": seed, "train_s": round(train_s),
            "search_vs_mcts100": score[("search", "mcts100")],
            "search_vs_mcts1000": score[("search", "mcts1000")],
            "raw_vs_mcts100": score[("raw", "mcts100")],
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    ok = all(
        r["search_vs_mcts100"] >= 0.9
        and r["search_vs_mcts1000"] >= 0.5
        and r["raw_vs_mcts100"] >= 0.5
        for r in rows
    )
    print(
        f"targets {'met' if ok else 'NOT met'} on seeds {args.seeds} ({args.games} games per pair)"
    )


if __name__ == "__main__":
    main()
