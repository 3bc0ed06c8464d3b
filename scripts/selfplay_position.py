"""What trained policies make of one board position: the network's prior and value of each
move, the visits and values their own searches give it, and the solver's exact score.

    python scripts/selfplay_position.py runs/c4/seed0 33333321:1
    python scripts/selfplay_position.py runs/c4/seed0 runs/c4/seed1 33333321 --simulations 200 800 3200
    python scripts/selfplay_position.py RUN 0412 --game tictactoe --json

The position is the moves from the empty board, one digit each (Connect Four: columns
0-6), as ``*_first_vs_solver_given_away_lines`` names the games lost to the solver (the
move after ``:`` is marked as played). Evaluation only: nothing here trains.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's paddlecraft, not an installed one


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="run or saved policy folders")
    ap.add_argument("line", help="the moves to the position, e.g. 33333321 or 33333321:1")
    ap.add_argument("--simulations", type=int, nargs="*", default=[200, 800])
    ap.add_argument("--game", default="connect_four")
    ap.add_argument("--json", action="store_true", help="print the reports as JSON")
    args = ap.parse_args(argv)
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    apply_cpu_tuning()
    from paddlecraft.arenas.selfplay.explain import (
        explain_position,
        format_report,
        position_after,
    )

    try:
        position_after(args.game, args.line)  # a bad line: one message before any loading
    except ValueError as e:
        ap.error(str(e))
    if any(n < 1 for n in args.simulations):
        ap.error(f"--simulations {args.simulations}: each must be >= 1, e.g. --simulations 200 800")
    missing = [r for r in args.runs if not Path(r).is_dir()]
    if missing:
        ap.error(f"no run or saved policy folder at {', '.join(missing)}")
    reports = {}
    for run in args.runs:
        reports[run] = explain_position(run, args.line, args.game, args.simulations)
        if not args.json:
            print(f"{run}\n{format_report(reports[run])}\n")
    if args.json:
        print(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
