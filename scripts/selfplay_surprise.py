"""Where policy surprise weighting (``arena.update.surprise_weight``) puts a run's samples:
its own training searches play a batch of self-play games and the table gives, by band of
plies, the samples, their mean surprise (KL divergence from the network's root prior to
the search's target) and the mean number of times each would be written.

    python scripts/selfplay_surprise.py runs/c4/seed0
    python scripts/selfplay_surprise.py runs/c4/seed0 --games 256 --weight 0.25 --plies 0 8 20 30

The run's ``config.yaml`` gives the game and the training searches (``arena.search``);
its ``policy/`` the network. Evaluation only: nothing here trains.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's paddlecraft, not an installed one


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a self-play run folder (config.yaml and policy/)")
    ap.add_argument("--games", type=int, default=128)
    ap.add_argument("--weight", type=float, default=0.5, help="arena.update.surprise_weight")
    ap.add_argument("--plies", type=int, nargs="+", default=[0, 8, 14, 20, 30])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    run = Path(args.run)
    if not (run / "config.yaml").is_file() or not (run / "policy").is_dir():
        ap.error(f"{run}: not a self-play run folder (config.yaml and policy/ expected)")
    if args.games < 1 or not 0 <= args.weight <= 1:
        ap.error(f"--games {args.games} --weight {args.weight}: need games >= 1, weight in [0, 1]")
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    apply_cpu_tuning()
    from paddlecraft.arenas.selfplay.player import load_policy
    from paddlecraft.arenas.selfplay.playing import own_games, run_search
    from paddlecraft.arenas.selfplay.surprise import frequency_by_ply

    spec, search = run_search(run)
    records = own_games(load_policy(run), spec, search, args.games, args.seed)
    rows = frequency_by_ply(records, args.weight, sorted(set(args.plies)))
    print(f"{run}: {args.games} games, surprise_weight {args.weight}")
    print("| plies | samples | mean surprise (KL) | mean frequency |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['plies']} | {r['samples']} | {r['surprise']:.3f} | {r['frequency']:.2f} |")
    return rows


if __name__ == "__main__":
    main()
