"""How often a Connect Four run's training openings change the game's result: its own
training searches play a batch of self-play games, and the perfect solver judges every
move of the sampled opening (the first ``arena.search.temperature_moves`` plies) by
whether it keeps the position's result (win, draw or loss for the mover).

    python scripts/selfplay_openings.py runs/c4/seed0
    python scripts/selfplay_openings.py runs/c4/seed0 --games 256 --cutoff 0.1

``--cutoff`` sets ``arena.search.temperature_value_cutoff`` (Leela Chess Zero's
temperature value cutoff: sampled moves only within that much ``Q`` of the most
visited); without it the run's own setting. The run's ``config.yaml`` gives the training
searches, its ``policy/`` the network; the solver extra (bitbully) judges. Evaluation
only: nothing here trains.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's paddlecraft, not an installed one


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a Connect Four self-play run folder (config.yaml, policy/)")
    ap.add_argument("--games", type=int, default=256)
    ap.add_argument("--cutoff", type=float, default=None, help="temperature_value_cutoff")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    run = Path(args.run)
    if not (run / "config.yaml").is_file() or not (run / "policy").is_dir():
        ap.error(f"{run}: not a self-play run folder (config.yaml and policy/ expected)")
    if args.games < 1:
        ap.error(f"--games {args.games}: need at least 1")
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    apply_cpu_tuning()
    import numpy as np

    from paddlecraft.agents.settings import ConfigError
    from paddlecraft.arenas.games.solver import solve_planes
    from paddlecraft.arenas.selfplay.player import load_policy
    from paddlecraft.arenas.selfplay.playing import own_games, run_search

    spec, search = run_search(run)
    if spec.name != "connect_four":
        ap.error(f"{run}: a {spec.name} run; the solver judges Connect Four only")
    if args.cutoff is not None:
        search.temperature_value_cutoff = args.cutoff
    try:
        search.check(total=1)  # a bad --cutoff is refused naming the setting
    except ConfigError as e:
        ap.error(str(e))
    # the learner's training searches on both sides
    records = own_games(load_policy(run), spec, search, args.games, args.seed)
    plies = search.temperature_moves
    rows, changed_by_game = [], np.zeros(args.games, np.int64)
    for rec in records:
        ply = int(rec["ply"][0])  # games move in lockstep: one ply per record
        if ply >= plies:
            continue
        values = solve_planes(rec["obs"])  # [n, 7] exact scores for the mover (NaN: full)
        best = np.nanmax(values, axis=1)
        played = values[np.arange(len(values)), rec["action"]]
        changed = np.sign(played) != np.sign(best)  # [n] the move changes the result
        np.add.at(changed_by_game, rec["game"], changed)
        explored = np.asarray(rec["explored"], bool)  # [n] sampled below the most visited
        rows.append(
            {"ply": ply, "moves": len(changed), "below_most_visited": float(explored.mean()),
             "result_changing": float(changed.mean()),
             "result_changing_most_visited": float((changed & ~explored).mean())}
        )  # fmt: skip
    summary = {
        "cutoff": search.temperature_value_cutoff,
        "result_changing_per_game": float(changed_by_game.mean()),
        "games_without_one": float((changed_by_game == 0).mean()),
        "rows": rows,
    }
    print(f"{run}: {args.games} games, the first {plies} plies sampled from the visits, "
          f"temperature_value_cutoff {summary['cutoff']}")  # fmt: skip
    print(
        "| ply | moves | sampled below the most visited | change the result | of them the most visited |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['ply']} | {r['moves']} | {r['below_most_visited']:.3f} | "
              f"{r['result_changing']:.3f} | {r['result_changing_most_visited']:.3f} |")  # fmt: skip
    print(f"result-changing moves per game in the sampled opening: "
          f"{summary['result_changing_per_game']:.3f}; games without one: "
          f"{summary['games_without_one']:.3f}")  # fmt: skip
    return summary


if __name__ == "__main__":
    main()
