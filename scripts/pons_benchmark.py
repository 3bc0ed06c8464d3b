"""Pascal Pons' Connect Four benchmark: mistake rates measured as AlphaZero.jl measures them.

    python scripts/pons_benchmark.py PONS_DIR --players runs/c4/seed0 runs/c4/seed0:search200
    python scripts/pons_benchmark.py PONS_DIR --players tactical solver4 --limit 200

``PONS_DIR`` holds the benchmark's test files ``Test_L<stage>_R<difficulty>`` (1,000
positions each, ``<columns 1-7> <score>`` per line): from Pons' blog
(http://blog.gamesolver.org/solving-connect-four/02-test-protocol/) or the copy in
AlphaZero.jl's repository (``games/connect-four/benchmark/``). Nothing is downloaded;
every position is replayed and solved here (extra ``solver``), and a file whose scores the
solver does not confirm is refused (`pons_positions`). As AlphaZero.jl's tutorial labels
them: stage L1 *beginning* (at most 14 moves played), L2 *middle*, L3 *end* (more than 28);
difficulty R1 *easy* (under 14 moves from the end with perfect play), R2 *medium*, R3
*hard* (more than 28).

A move is a **mistake**, as in AlphaZero.jl's ``pons_benchmark.jl``, when another move has
a strictly better theoretical result (win > draw > loss): the mistake rate is one minus
the good-move rate of `move_rates`. The perfect-move rate (the soonest win, the longest
defence, the stricter figure this project's targets use) is printed beside it, and the
share of positions where no move can be a mistake (every move keeps the same result).

Players are given as to the tournament (`make_entrant`): a run folder (its greedy
policy), ``folder:search<N>`` (PUCT search with N simulations, the policy's own search
settings), or a baseline name (``tactical``, ``solver<d>``, ``solver_result``...). One JSON
line per (file, player), then a table; ``--out FILE`` also writes the rows as JSON.

A player that is a run folder also has its figures recorded in the run
(``judged.json``, `record_judgement`; not with ``--limit``), named
``pons_<set>_<raw|searchN>_mistake_rate`` and ``..._perfect_move_rate``, so the sweep
summary compares settings over their seeds:
``paddlecraft summary runs/a runs/b --metric pons_beginning-hard_search200_mistake_rate``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's paddlecraft

from paddlecraft.encoders.cpu_tuning import (  # noqa: E402
    apply_cpu_tuning,
    cpu_model,
    import_paddle_quietly,
)

STAGES = {"1": "beginning", "2": "middle", "3": "end"}
DIFFICULTIES = {"1": "easy", "2": "medium", "3": "hard"}


def set_label(path: Path) -> str:
    """``Test_L1_R2`` -> ``beginning-medium``; any other file name as it is."""
    m = re.fullmatch(r"Test_L(\d)_R(\d)", path.name)
    if m and m[1] in STAGES and m[2] in DIFFICULTIES:
        return f"{STAGES[m[1]]}-{DIFFICULTIES[m[2]]}"
    return path.name


def pons_files(where: Path) -> list[Path]:
    """The test files in ``where`` (a folder of ``Test_L*_R*`` files, or one file), by
    difficulty, then stage (AlphaZero.jl's order)."""
    if where.is_file():
        return [where]
    files = sorted(where.glob("Test_L*_R*"), key=lambda p: (p.name[-1], p.name))
    if not files:
        raise SystemExit(
            f"pons_benchmark: no Test_L<stage>_R<difficulty> files in {str(where)!r}; expected "
            "Pons' test sets (games/connect-four/benchmark/ in AlphaZero.jl's repository)"
        )
    return files


def benchmark(
    files: list[Path], specs: list[str], limit: int | None = None
) -> list[dict[str, Any]]:
    """Each player of ``specs`` on each test file: its mistake and perfect-move rates."""
    from paddlecraft.arenas.games.solver import judged_moves, move_rates, pons_positions
    from paddlecraft.arenas.selfplay.tournament import make_entrant

    players = [make_entrant(s, "connect_four", i) for i, s in enumerate(specs)]
    rows = []
    for f in files:
        pos = pons_positions(f, limit)
        # positions where every legal move has the same theoretical result: no mistake there
        signs = np.sign(pos.values)
        same = np.nanmax(signs, axis=1) == np.nanmin(signs, axis=1)
        for spec, e in zip(specs, players):
            r = move_rates(pos.values, judged_moves(e.player, pos))
            row = {
                "set": set_label(f),
                "file": f.name,
                "player": e.label,
                "spec": spec,
                "positions": len(pos),
                "mistake_rate": round(1.0 - r["good_move_rate"], 4),
                "perfect_move_rate": round(r["perfect_move_rate"], 4),
                "no_mistake_possible": round(float(same.mean()), 4),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def record(rows: list[dict[str, Any]], specs: list[str], by: str) -> list[Path]:
    """Record each run folder's rows in the run (`record_judgement`); the folders written."""
    from paddlecraft.arenas.engine.summary import record_judgement

    written = []
    for spec in dict.fromkeys(specs):
        folder, _, how = spec.partition(":")
        if not (Path(folder) / "results.json").is_file():
            continue  # a baseline, or a saved policy outside a run
        kind = how or "raw"
        figures = {f"pons_{r['set']}_{kind}_{key}": r[key] for r in rows if r["spec"] == spec
                   for key in ("mistake_rate", "perfect_move_rate")}  # fmt: skip
        written.append(record_judgement(folder, figures, by))
    return written


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: a row per test set, a column per player, ``mistakes % (perfect %)``."""
    players = list(dict.fromkeys(r["player"] for r in rows))
    sets = list(dict.fromkeys(r["set"] for r in rows))
    cell = {(r["set"], r["player"]): r for r in rows}
    out = [
        "| test set (positions) | " + " | ".join(players) + " |",
        "|---|" + "---|" * len(players),
    ]
    for s in sets:
        n = next(r["positions"] for r in rows if r["set"] == s)
        vals = [
            f"{100 * cell[s, p]['mistake_rate']:.1f} ({100 * cell[s, p]['perfect_move_rate']:.1f})"
            for p in players
        ]
        out.append(f"| {s} ({n}) | " + " | ".join(vals) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("where", type=Path, help="a folder of Test_L*_R* files, or one such file")
    ap.add_argument("--players", nargs="+", required=True,
                    help="run folders, folder:search<N>, baseline names")  # fmt: skip
    ap.add_argument("--limit", type=int, default=None, help="the first N positions of each file")
    ap.add_argument("--out", type=Path, default=None, help="also write the rows here (JSON)")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit {args.limit}: expected a number of positions >= 1")
    apply_cpu_tuning()
    import_paddle_quietly()
    rows = benchmark(pons_files(args.where), args.players, args.limit)
    print("\nmistake rate % (perfect-move rate %), AlphaZero.jl's definition of a mistake\n")
    print(table(rows))
    print(json.dumps({"cpu": cpu_model(), "limit": args.limit}))
    if args.out:
        args.out.write_text(json.dumps({"cpu": cpu_model(), "rows": rows}, indent=1) + "\n")
    if args.limit is None:  # whole test sets only: a run's figures under one name each
        record(rows, args.players, " ".join(["scripts/pons_benchmark.py", *sys.argv[1:]]))
    return rows


if __name__ == "__main__":
    main()
