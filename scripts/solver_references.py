"""Reference points for the perfect-move rate: scripted and solver players judged on the
same seeded positions as a trained agent (extra ``solver``).

    python scripts/solver_references.py                 # 400 positions, seed 0
    python scripts/solver_references.py --players random solver_result solver8

``solver_result`` keeps every theoretical result but picks among the result-keeping moves
at random: its perfect-move rate is what keeping results alone earns; the rest of the
metric is about distance (the sooner win, the later loss).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning, cpu_model  # noqa: E402

apply_cpu_tuning()


def main() -> None:
    from paddlecraft.arenas.games import ConnectFour, make_baseline
    from paddlecraft.arenas.games.solver import perfect_move_rate, solver_positions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, default=400)
    ap.add_argument("--players", nargs="+", default=["random", "tactical", "solver_result",
                                                     "solver2", "solver4", "solver8", "solver"])  # fmt: skip
    args = ap.parse_args()
    pos = solver_positions(args.positions, seed=0)
    for name in args.players:
        r = perfect_move_rate(make_baseline(name, ConnectFour), pos)
        print(json.dumps({"player": name, **{k: round(v, 4) for k, v in r.items()}}), flush=True)
    print(json.dumps({"positions": args.positions, "cpu": cpu_model()}))


if __name__ == "__main__":
    main()
