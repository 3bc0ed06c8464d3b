"""Connect Four search targets over several seeds: a seed sweep, its summary, and the solver.

    python scripts/selfplay_targets.py                      # seeds 0 1 2
    python scripts/selfplay_targets.py --seeds 0 --train "arena.search.updates=60"
    python scripts/selfplay_targets.py --tournament         # also a rated round robin per seed
    python scripts/selfplay_targets.py --solver 0           # without the solver's judgement
    python scripts/selfplay_targets.py --game connect_four_ppo --out runs/c4_ppo   # PPO recipe
    python scripts/selfplay_targets.py --train +experiment=connect_four_long --out runs/c4_long
    python scripts/selfplay_targets.py --out runs/c4 --average-last 2 4 6   # post-hoc averaging
    python scripts/selfplay_targets.py --seeds 0 --out runs/a --ensemble runs/b/seed1   # ensemble

Training is a plain seed sweep (``python run.py -m arena=selfplay game=connect_four
seed=0,1,2``, jobs one after another into ``runs/selfplay_targets/seedS``; seeds whose run
finished already are not rerun), and the per-seed table with its means, IQM and bootstrap
intervals is the sweep's own summary (``paddlecraft summary runs/selfplay_targets``, written
to ``<out>/summary.md``). This script adds only what a summary cannot: whether the issue's
targets hold on every seed (search score, win 1 draw 1/2, >= 0.9 vs rollout MCTS-100 and
>= 0.5 vs MCTS-1000; the raw policy's win rate vs MCTS-100 >= 0.5) and, with the ``solver``
extra (``--solver N``, default 400 positions), each trained policy judged by the perfect
solver: the perfect-move and good-move rates on N seeded positions from realistic play, raw
and with 200 simulations, split by the position's
result (won, drawn, lost), and 20 games as first player against the solver (its ties at
random; the games not won by the ply of the move that gave the win away): targets >= 0.86 searching on the mean with every seed >= 0.84, >= 0.72 raw, every
game won searching and half raw.

Each run's solver figures are also recorded in its folder (``seedS/judged.json``, the
positions where its solver games were given away under ``details``), so the sweep summary
groups and bootstraps them like the runs' own metrics:
``paddlecraft summary runs/a runs/b --metric search200_perfect_move_rate`` compares two
settings over their seeds with 95 % intervals. A judgement whose searching player is not
the policy's own (``--fpu``, ``--policy-temperature``, ``--c-puct``, ``--search-move``) is
recorded beside the plain one under its own names (``--fpu 0``:
``search200fpu0_perfect_move_rate``, ``search200fpu0reuse_first_vs_solver_win_rate``), so
judging a run again another way loses nothing; what it prints is named as always.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's paddlecraft, not an installed one

#: figure -> (results.json metric, target)
TARGETS = {
    "search_vs_mcts100": ("search_score_vs_mcts100", 0.9),
    "search_vs_mcts1000": ("search_score_vs_mcts1000", 0.5),
    "raw_vs_mcts100": ("win_rate_vs_mcts100", 0.5),
}
#: solver figures (computed here from the saved policy) -> (target of the mean, of every seed)
SOLVER_TARGETS = {
    "search200_perfect_move_rate": (0.86, 0.84),
    "raw_perfect_move_rate": (0.72, 0.0),
    "search200_first_vs_solver_win_rate": (1.0, 1.0),  # every game won on every seed
    "raw_first_vs_solver_win_rate": (0.5, 0.5),
}


def judge(
    run: Path,
    positions: int,
    simulations: int = 200,
    games: int = 20,
    deeper: tuple[int, ...] = (),
    move: str | None = None,
    reuse: bool = False,
    fpu: float | None = None,
    c_puct: float | None = None,
    ensemble: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """The saved policy of ``run`` judged by the perfect solver (extra ``solver``): move
    rates on ``positions`` positions, and ``games`` games as first player against it (also
    searching with each of ``deeper`` simulations: games only). ``move``:
    the searching player's move rule (`played_moves`; default: the policy's ``search_move``).
    ``reuse``: the games are also played with tree reuse, each move's search adding its
    simulations to the subtree the last one left (keys ``search<N>reuse_first_vs_solver_*``).
    ``fpu``: every search is judged with that
    first-play urgency (``agents.policy.search_fpu``) instead of the policy's own; ``c_puct``: the searching player's
    exploration constant (None: `SearchPlayer`'s own, whatever the run trained with).
    ``ensemble``: other runs whose saved policies join this one's as a deep ensemble (the
    raw move and every simulation's network results the members' mean, `ensemble_averaged`;
    the search's settings this run's): judged the same way (tree reuse too, with
    ``reuse``), keys ``ens<K>_*`` with K the members (this run included)."""
    from paddlecraft.arenas.selfplay import load_policy

    policy = load_policy(run / "policy", name=f"judged_{run.name}")
    if fpu is not None:
        policy.cfg.search_fpu = fpu
    out = judge_policy(policy, positions, simulations, games, deeper, move, reuse, c_puct)
    if ensemble:
        partners = tuple(
            load_policy(other / "policy", name=f"partner{i}_{other.name}_of_{run.name}")
            for i, other in enumerate(ensemble)
        )
        both = judge_policy(policy, positions, simulations, games, (), move, reuse,
                            c_puct=c_puct, partners=partners)  # fmt: skip
        out.update({f"ens{len(partners) + 1}_{k}": v for k, v in both.items()})
    return out


def judge_policy(
    policy: Any,
    positions: int,
    simulations: int = 200,
    games: int = 20,
    deeper: tuple[int, ...] = (),
    move: str | None = None,
    reuse: bool = False,
    c_puct: float | None = None,
    partners: tuple[Any, ...] = (),
) -> dict[str, Any]:
    """`judge` for one policy object (``partners``: an ensemble's other members)."""
    from paddlecraft.arenas.games.solver import (
        judged_moves,
        move_rates,
        move_rates_by_class,
        solver_positions,
    )
    from paddlecraft.arenas.selfplay import PolicyPlayer, SearchPlayer

    # None: the searching player's own exploration constant
    searcher_kw: dict[str, Any] = {"move": move, "partners": partners}
    searcher_kw |= {} if c_puct is None else {"c_puct": c_puct}

    def searcher(n: int, **kw: Any) -> Any:  # the searching player, as judged
        return SearchPlayer(policy, "connect_four", n, **searcher_kw, **kw)

    pos = solver_positions(positions, seed=0)
    out: dict[str, float] = {}
    players = [
        ("raw", PolicyPlayer(policy, partners=partners)),
        (f"search{simulations}", searcher(simulations)),
    ]
    for label, player in players:
        actions = judged_moves(player, pos)
        for k, v in move_rates(pos.values, actions).items():
            out[f"{label}_{k}"] = round(v, 4)
        # where they fall short: by the position's result, its ply, how far its result is
        for cls, r in move_rates_by_class(pos.values, actions, pos.plies).items():
            out[f"{label}_{cls.replace(' ', '_')}_perfect"] = round(r["perfect_move_rate"], 4)
        _games(out, label, player, games)
    for n in deeper:  # how much of the gap against the solver a deeper search closes
        _games(out, f"search{n}", searcher(n), games)
    for n in (simulations, *deeper) if reuse else ():  # the visits kept from move to move
        player = searcher(n, reuse=True)
        _games(out, f"search{n}reuse", player, games)
    return out


def variant_tag(
    fpu: float | None = None, c_puct: float | None = None, move: str | None = None
) -> str:
    """The name of a judgement whose searching player is not the policy's own (``--fpu``,
    ``--c-puct``, ``--search-move``): ``"fpu0"``, ``"cpuct2.5"``, ``"lcb"``, joined in that
    order; ``""`` for the policy's own player."""
    parts = [] if fpu is None else [f"fpu{fpu:g}"]
    parts += [] if c_puct is None else [f"cpuct{c_puct:g}"]
    return "".join([*parts, *([] if move is None else [move])])


def tagged(judged: dict[str, Any], tag: str) -> dict[str, Any]:
    """``judged``'s searching players' figures named for ``tag`` (`variant_tag`):
    ``search200_*`` becomes ``search200<tag>_*`` (``search200<tag>reuse_*``, and likewise
    under ``ens<K>_`` and ``avg<K>_``), so a run's ``judged.json`` keeps the plain judgement
    beside each variant's instead of losing it; the raw policy's figures, the same under
    any search setting, keep their names."""
    if not tag:
        return dict(judged)
    search = re.compile(r"^((?:ens|avg)\d+_)?(search\d+)")
    return {search.sub(lambda m: f"{m[1] or ''}{m[2]}{tag}", k): v for k, v in judged.items()}


def _games(out: dict[str, Any], label: str, player: Any, games: int) -> None:
    """``games`` games of ``player`` as first player against the solver (its ties at
    random, seeded), into ``out`` as ``<label>_first_vs_solver_*``: the share won, the mean
    length, and where the games not won were decided (the median ply of the move that gave
    the win away, the share given away by ply 10, and the positions: columns before, move)."""
    from paddlecraft.arenas.games.solver import versus_solver

    if games <= 0:  # --solver-games 0: the positions only
        return
    first = versus_solver(player, games=games)
    for k in ("win_rate", "plies", "win_given_away_at", "given_away_by_ply_10"):
        out[f"{label}_first_vs_solver_{k}"] = first[k]
    out[f"{label}_first_vs_solver_given_away_lines"] = first["win_given_away_lines"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--game", default="connect_four", help="the game config (conf/game/)")
    ap.add_argument("--out", default=str(ROOT / "runs" / "selfplay_targets"))
    ap.add_argument("--train", nargs="*", default=[], help="extra run.py overrides")
    ap.add_argument("--tournament", action="store_true", help="also a rated round robin")
    ap.add_argument("--games", type=int, default=100, help="games per pair (--tournament)")
    ap.add_argument("--solver", type=int, default=400, help="solver-judged positions (0: off)")
    ap.add_argument("--solver-games", type=int, default=20,
                    help="games as first player against the solver, per policy (0: none, "
                    "the positions only)")  # fmt: skip
    ap.add_argument("--deeper", type=int, nargs="*", default=[],
                    help="also play those games searching with these simulations")  # fmt: skip
    ap.add_argument("--reuse", action="store_true",
                    help="also play those games with tree reuse (search<N>reuse_*)")  # fmt: skip
    ap.add_argument("--fpu", type=float, default=None,
                    help="judge every search with this first-play urgency reduction "
                    "(agents.policy.search_fpu; default: each policy's own)")  # fmt: skip
    ap.add_argument("--c-puct", type=float, default=None,
                    help="judge every search with this exploration constant (default: the "
                    "searching player's, 1.5; training's arena.search.c_puct is not read)")  # fmt: skip
    ap.add_argument("--search-move", choices=["visits", "lcb"], default=None,
                    help="the searching player's move rule (default: each policy's search_move)")  # fmt: skip
    ap.add_argument("--ensemble", type=Path, nargs="*", default=[],
                    help="finished runs (folders with policy/) whose policies join each seed's "
                    "as a deep ensemble, judged too (ens<K>_*)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS of each run (default: the machine's cores)")  # fmt: skip
    args = ap.parse_args()
    if args.fpu is not None and not args.fpu >= 0:
        ap.error(f"--fpu {args.fpu}: the reduction must be >= 0 (0: the node's mean value)")
    if args.c_puct is not None and not args.c_puct > 0:
        ap.error(f"--c-puct {args.c_puct}: the exploration constant must be > 0 (default 1.5)")
    for other in args.ensemble:  # before any training: a typo costs nothing
        if not (other / "policy").is_dir():
            ap.error(f"--ensemble {other}: no saved policy there; give finished run folders "
                     "with a policy/ inside, e.g. runs/b/seed1")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if args.threads:  # e.g. two scripts side by side on 2 cores, one thread each
        env["OMP_NUM_THREADS"] = str(args.threads)
    out = Path(args.out)
    todo = [s for s in args.seeds if not (out / f"seed{s}" / "results.json").exists()]
    if todo:  # a seed sweep; its summary lands in <out>/summary.md
        cmd = [sys.executable, str(ROOT / "run.py"), "-m", "arena=selfplay", f"game={args.game}",
               f"seed={','.join(map(str, todo))}", "trainer.progress=false", "hydra/launcher=basic",
               f"hydra.sweep.dir={out}", "hydra.sweep.subdir=seed${seed}", *args.train]  # fmt: skip
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    from paddlecraft.arenas.engine.summary import record_judgement, update_summary

    update_summary(out)
    print((out / "summary.md").read_text(), flush=True)
    rows = []
    for seed in args.seeds:
        run = out / f"seed{seed}"
        results = json.loads((run / "results.json").read_text())
        m = results["metrics"]
        # seconds of the run (of its last segment when it was resumed)
        row = {"seed": seed, "run_s": round(results["elapsed_s"])}
        row.update({k: m.get(metric, float("nan")) for k, (metric, _) in TARGETS.items()})
        row["raw_score_vs_mcts100"] = m.get("score_vs_mcts100", float("nan"))
        if args.solver:
            judged = judge(run, args.solver, games=args.solver_games, deeper=tuple(args.deeper),
                           move=args.search_move, reuse=args.reuse, fpu=args.fpu, c_puct=args.c_puct, ensemble=tuple(args.ensemble))  # fmt: skip
            row.update(judged)
            # its numbers for the sweep summary; the position lists (where the solver
            # games were given away) beside them, as details
            numbers = {k: v for k, v in judged.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}  # fmt: skip
            lines = {k: v for k, v in judged.items() if k.endswith("_given_away_lines")}
            by = " ".join(["scripts/selfplay_targets.py", *sys.argv[1:]])
            tag = variant_tag(args.fpu, args.c_puct, args.search_move)
            record_judgement(run, tagged(numbers, tag), by, details=tagged(lines, tag))
        if args.tournament:
            cmd = [sys.executable, "-m", "paddlecraft.arenas.selfplay.tournament", "--game", "connect_four",
                   "--games", str(args.games), "--seed", str(seed), "--out",
                   str(run / "tournament"), "--focus", "search", "raw", "--players",
                   f"search={run}:search200", f"raw={run}", "random", "tactical", "mcts100",
                   "mcts1000", *(["solver", "solver8"] if args.solver else [])]  # fmt: skip
            subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
            row["tournament"] = str(run / "tournament" / "tournament.md")
        rows.append(row)
        print(json.dumps(row), flush=True)
    means = {k: sum(r[k] for r in rows) / len(rows) for k in TARGETS}
    print("mean", json.dumps({k: round(v, 4) for k, v in means.items()}))
    for k, (_, target) in TARGETS.items():
        if any(r[k] != r[k] for r in rows):  # NaN: those games were left out (--train ~...)
            print(f"{k} >= {target}: not measured on every seed")
            continue
        low = [r["seed"] for r in rows if r[k] < target]
        print(f"{k} >= {target}: mean {'met' if means[k] >= target else 'NOT met'}, "
              f"seeds below: {low or 'none'}")  # fmt: skip
    if args.solver:
        for k, (target, floor) in SOLVER_TARGETS.items():
            if k not in rows[0]:  # the games' figures, with --solver-games 0
                print(f"{k} >= {target}: not measured (--solver-games 0)")
                continue
            mean = sum(r[k] for r in rows) / len(rows)
            low = [r["seed"] for r in rows if r[k] < floor]
            met = mean >= target and not low
            print(f"{k} >= {target} (every seed >= {floor}): mean {mean:.3f}, "
                  f"{'met' if met else 'NOT met'}, seeds below: {low or 'none'}")  # fmt: skip


if __name__ == "__main__":
    main()
