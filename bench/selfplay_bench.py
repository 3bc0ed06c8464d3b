"""Self-play throughput: batched games, a one-game-at-a-time loop, and the arena's loop.

    python bench/selfplay_bench.py            # ~1 minute; prints a table
    python bench/selfplay_bench.py --quick    # shorter timings

Measures, on this machine:

1. random legal moves on 1024 batched Connect Four games: through the gymnasium vector
   env (observations, masks, same-step autoreset) and through the bare game arrays;
2. the same random play one game at a time, the way a PettingZoo AEC loop steps
   (``env.last()`` -> mask -> action -> ``env.step``): PettingZoo's own
   ``connect_four_v3`` when it is installed, and the native game with one environment;
3. the arena with the policy in the loop: self-play collection (positions the learner
   moved on per second, with the Connect Four network and the PPO recipe's batch and
   training mix, ``game=connect_four_ppo``), the PPO update, and a batched MCTS-100 move.

Writes ``bench/results_selfplay.json`` beside this file.

    python bench/selfplay_bench.py --update-split game=connect_four
    python bench/selfplay_bench.py --update-split game=connect_four arena.search.simulations=30

print one JSON line each: the seconds an update spends collecting its games and training
on them, and an epoch-end evaluation, for that config (updates 2-6 of seed 0).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paddlecraft.arenas.games import ConnectFour, ConnectFourVectorEnv, MCTSPlayer, random_legal  # noqa: E402
from paddlecraft.encoders.cpu_tuning import cpu_model  # noqa: E402


def _timed(fn, seconds: float) -> tuple[int, float]:
    """Call ``fn`` (returns moves made) until ``seconds`` pass; return (moves, elapsed)."""
    moves, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        moves += fn()
    return moves, time.perf_counter() - t0


def bench_vector_env(n: int, seconds: float) -> float:
    env = ConnectFourVectorEnv(n)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    state = {"obs": obs}

    def step() -> int:
        a = random_legal(state["obs"]["action_mask"].astype(bool), rng)
        state["obs"], *_ = env.step(a)
        return n

    moves, dt = _timed(step, seconds)
    return moves / dt


def bench_core(n: int, seconds: float) -> float:
    g = ConnectFour(n)
    rng = np.random.default_rng(0)

    def step() -> int:
        g.step(random_legal(g.legal_mask(), rng))
        g.reset(g.done)
        return n

    moves, dt = _timed(step, seconds)
    return moves / dt


def bench_one_at_a_time_native(seconds: float) -> float:
    env = ConnectFourVectorEnv(1)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    state = {"obs": obs}

    def step() -> int:
        mask = state["obs"]["action_mask"][0]
        a = rng.choice(np.flatnonzero(mask))
        state["obs"], *_ = env.step(np.array([a]))
        return 1

    moves, dt = _timed(step, seconds)
    return moves / dt


def bench_pettingzoo(seconds: float) -> float | None:
    try:
        from pettingzoo.classic import connect_four_v3
    except ImportError:
        return None
    env = connect_four_v3.env()
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def step() -> int:
        obs, reward, term, trunc, info = env.last()
        if term or trunc:
            env.reset()
            return 0
        env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        return 1

    moves, dt = _timed(step, seconds)
    return moves / dt


def bench_arena(
    seconds: float, games: int | None = None, mcts_simulations: int = 100
) -> dict[str, float]:
    """The arena's own loop on Connect Four: collection, update and pure self-play rates
    (``games`` per step; default: the game config's)."""
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import build_agents, build_arena
    from paddlecraft.arenas.engine.rng import seed_everything
    from paddlecraft.arenas.selfplay.playing import play_games

    register_configs()
    overrides = ["arena=selfplay", "game=connect_four_ppo"]  # the PPO training mix
    if games is not None:
        overrides.append(f"arena.games_per_step={games}")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    seed_everything(0)
    agents = build_agents(cfg)
    arena = build_arena(cfg, agents)
    arena._take_snapshot()
    n = arena.games_now()
    out: dict[str, float] = {"games_per_step": float(n)}
    t_col = t_upd = 0.0
    positions = moves = 0.0
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or steps < 2:
        t = time.perf_counter()
        rollout = arena._collect()
        t_col += time.perf_counter() - t
        t = time.perf_counter()
        arena._update(rollout)
        t_upd += time.perf_counter() - t
        positions += rollout["metrics"]["positions"]
        moves += rollout["metrics"]["moves_per_game"] * rollout["n"]
        steps += 1
    out["collect_positions_per_s"] = positions / t_col
    out["collect_moves_per_s"] = moves / t_col
    # pure self-play: the learner on both seats of every game (sampling, recording its
    # moves), as the PettingZoo loop it is compared with plays the policy against itself
    seats = np.zeros((n, 2), np.int64)
    learner = arena.collector._controller(0, ("learner", None), np.random.default_rng(0))
    sp_moves, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds / 2 or sp_moves == 0:
        sp_moves += play_games(arena.spec, n, seats, [learner], record=0)[2]
    out["selfplay_moves_per_s"] = sp_moves / (time.perf_counter() - t)
    out["update_positions_per_s"] = positions / t_upd
    out["seconds_per_update"] = (t_col + t_upd) / steps
    # MCTS-k (k = 100; fewer at toy sizes): one move for 100 positions at once
    g = ConnectFour(100)
    rng = np.random.default_rng(0)
    for _ in range(8):
        g.step(random_legal(g.legal_mask(), rng))
        g.reset(g.done)
    obs, mask = g.observe()
    t = time.perf_counter()
    MCTSPlayer(ConnectFour, mcts_simulations).act(obs, mask, rng=rng)
    out["mcts100_s_per_move_100_games"] = time.perf_counter() - t
    return out


def bench_workers(
    seconds: float,
    games: int = 1024,
    workers: tuple[int, ...] = (1, 2, 4),
    game: str = "connect_four_ppo",
) -> dict:
    """Training-mix collection moves/s (latest self, pool, anchors) in this process and
    with ``arena.workers.count`` Ray workers, on ``games`` games per step, and the bytes
    moved per update (pickled plan and slices out, pickled results back). ``game``: the
    game config whose collection is timed: ``connect_four_ppo`` (the PPO recipe: network
    moves, one network call per move) or ``connect_four`` (the default: every move a
    search, 30 new simulations on the previous move's subtree).

    Ray binds to the machine's address; where only loopback is allowed, run it in a
    fresh network namespace: ``unshare -rn sh -c 'ip link set lo up && python
    bench/selfplay_bench.py --workers'``; called outside such a namespace, this function
    re-launches itself inside one when ``unshare`` is available."""
    import psutil

    if set(psutil.net_if_addrs()) != {"lo"} and shutil.which("unshare"):
        counts = ",".join(str(w) for w in workers)
        cmd = (f"ip link set lo up && {sys.executable} {Path(__file__)} --workers --json "
               f"--seconds {seconds} --games {games} --counts {counts} --game {game}")  # fmt: skip
        # a local, single-user cluster: no token to set up (as tests/test_selfplay_ray.py)
        # RAY_TMPDIR: a short path (a long TMPDIR makes Ray's AF_UNIX sockets exceed 107 bytes)
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": "/tmp"}
        proc = subprocess.run(["unshare", "-rn", "sh", "-c", cmd], capture_output=True,
                              text=True, cwd=ROOT, env=env)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"the loopback-only Ray bench failed:\n{proc.stderr[-4000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import build_agents, build_arena
    from paddlecraft.arenas.engine.rng import seed_everything

    register_configs()
    out: dict = {"game": game, "games_per_step": games, "cores": os.cpu_count(),
                 "moves_per_s": {}, "mib_per_update": {}}  # fmt: skip
    for w in (0, *workers):
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(
                "config",
                overrides=[
                    "arena=selfplay",
                    f"game={game}",
                    f"arena.games_per_step={games}",
                    f"arena.workers.count={w}",
                ],
            )
        seed_everything(0)
        agents = build_agents(cfg)
        with build_arena(cfg, agents) as arena:
            arena._take_snapshot()
            arena._collect()  # starts the workers; warm-up
            moves, steps, t = 0.0, 0, time.perf_counter()
            while time.perf_counter() - t < seconds or steps < 2:
                r = arena._collect()
                moves += r["metrics"]["moves_per_game"] * r["n"]
                steps += 1
            out["moves_per_s"][str(w)] = moves / (time.perf_counter() - t)
            if w:  # traffic of one update, all workers together
                sent = arena.collector._pool_workers.bytes_sent
                got = len(pickle.dumps((r["winner"], r["records"])))
                out["mib_per_update"][str(w)] = {"sent": sent / 2**20, "returned": got / 2**20}
    base = out["moves_per_s"]["0"]
    out["speedup"] = {k: v / base for k, v in out["moves_per_s"].items() if k != "0"}
    best = max(out["speedup"], key=out["speedup"].get)
    out["summary"] = (
        f"{game} collection on {games} games: in-process {base:,.0f} moves/s; "
        + ", ".join(
            f"{k} worker{'s' if k != '1' else ''} {out['moves_per_s'][k]:,.0f} ({v:.2f}x)"
            for k, v in out["speedup"].items()
        )
        + f" on {out['cores']} cores (best {best}); per update "
        + ", ".join(
            f"{k} workers {v['sent']:.2f} MiB out / {v['returned']:.2f} MiB back"
            for k, v in out["mib_per_update"].items()
        )
    )
    return out


def bench_update_split(overrides: list[str], updates: int = 6) -> dict:
    """Where an update's time goes: seconds in collection (``SelfPlayArena._collect``) and
    in the gradient update (``_update``), the means over updates 2..``updates`` (the first
    warms up), and one epoch-end evaluation, for ``arena=selfplay`` with ``overrides``
    (e.g. ``game=connect_four arena.search.simulations=30``)."""
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import build_agents, build_arena
    from paddlecraft.arenas.engine.rng import seed_everything

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arena=selfplay", *overrides])
    seed_everything(0)
    collect, update = [], []
    with build_arena(cfg, build_agents(cfg)) as arena:
        arena._take_snapshot()
        for _ in range(updates):
            t = time.perf_counter()
            rollout = arena._collect()
            t2 = time.perf_counter()
            arena._update(rollout)
            collect.append(t2 - t)
            update.append(time.perf_counter() - t2)
        t = time.perf_counter()
        arena.evaluate()
        evaluation = time.perf_counter() - t
    c, u = float(np.mean(collect[1:])), float(np.mean(update[1:]))
    return {
        "overrides": overrides,
        "collect_s": round(c, 2),
        "update_s": round(u, 2),
        "per_update_s": round(c + u, 2),
        "evaluation_s": round(evaluation, 2),
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "cpu": cpu_model(),
        "summary": f"{' '.join(overrides)}: collection {c:.2f} s + update {u:.2f} s = "
        f"{c + u:.2f} s per update (updates 2-{updates}); an evaluation {evaluation:.2f} s",
    }


def bench_selfplay(size: str = "full") -> dict:
    """Every figure of this benchmark as a dict (``bench/run.py`` calls this with its size:
    full, quick or tiny)."""
    sec = {"full": 3.0, "quick": 1.0, "tiny": 0.02}[size]
    tiny = size == "tiny"
    n = 16 if tiny else 1024
    res: dict = {
        "machine": {
            "cpu": cpu_model(),
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "load_avg_1min_before": os.getloadavg()[0],
            "python": platform.python_version(),
            "numpy": np.__version__,
        }
    }
    vec = bench_vector_env(n, sec)
    core = bench_core(n, sec)
    one = bench_one_at_a_time_native(sec)
    pz = bench_pettingzoo(sec)
    arena = bench_arena(3 * sec, games=16 if tiny else None, mcts_simulations=4 if tiny else 100)
    res["random_moves_per_s"] = {
        "vector_env_1024": vec,
        "core_arrays_1024": core,
        "one_game_at_a_time_native": one,
        "one_game_at_a_time_pettingzoo": pz,
        "vector_env_vs_pettingzoo_x": vec / pz if pz else None,
    }
    res["arena_connect_four"] = arena
    res["machine"]["load_avg_1min_after"] = os.getloadavg()[0]
    res["summary"] = (
        f"random moves/s on {n} Connect Four games {vec:,.0f} (vector env) = "
        + (f"{vec / pz:,.0f}x PettingZoo one game at a time ({pz:,.0f}); " if pz else "; ")
        + f"arena collects {arena['collect_positions_per_s']:,.0f} learner positions/s"
    )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timings")
    ap.add_argument("--workers", action="store_true", help="only Ray collection (1, 2, 4)")
    ap.add_argument("--json", action="store_true", help="--workers: one JSON line")
    ap.add_argument("--seconds", type=float, default=None, help="--workers: seconds per count")
    ap.add_argument("--games", type=int, default=1024, help="--workers: games per step")
    ap.add_argument("--counts", default="1,2,4", help="--workers: worker counts, e.g. 1,2")
    ap.add_argument("--game", default="connect_four_ppo",
                    help="--workers: game config (connect_four: search collection)")  # fmt: skip
    ap.add_argument("--update-split", nargs="*", metavar="OVERRIDE", default=None,
                    help="only where an update's time goes, for arena=selfplay with these "
                    "overrides (e.g. game=connect_four arena.search.simulations=30)")  # fmt: skip
    args = ap.parse_args()
    if args.update_split is not None:
        res = bench_update_split(args.update_split)
        sys.stdout.write(json.dumps(res) + "\n")
        return
    if args.workers:
        counts = tuple(int(w) for w in args.counts.split(","))
        res = bench_workers(
            args.seconds or (2.0 if args.quick else 6.0), args.games, counts, args.game
        )
        res["cpu"] = cpu_model()
        if args.json:
            sys.stdout.write(json.dumps(res) + "\n")
        else:
            sys.stdout.write(json.dumps(res, indent=2) + "\n" + res["summary"] + "\n")
        return
    res = bench_selfplay("quick" if args.quick else "full")
    r, arena, m = res["random_moves_per_s"], res["arena_connect_four"], res["machine"]
    vec, core, one, pz = (
        r["vector_env_1024"],
        r["core_arrays_1024"],
        r["one_game_at_a_time_native"],
        r["one_game_at_a_time_pettingzoo"],
    )
    rows = [
        ("random moves/s, vector env, 1024 Connect Four games", f"{vec:,.0f}"),
        ("random moves/s, bare game arrays, 1024 games", f"{core:,.0f}"),
        ("random moves/s, one game at a time (native env)", f"{one:,.0f}"),
        (
            "random moves/s, one game at a time (PettingZoo connect_four_v3)",
            f"{pz:,.0f}" if pz else "not installed",
        ),
        ("vector env / PettingZoo loop", f"{vec / pz:,.0f}x" if pz else "-"),
        (
            "arena: learner positions/s collected (policy in the loop)",
            f"{arena['collect_positions_per_s']:,.0f}",
        ),
        ("arena: all moves/s while collecting", f"{arena['collect_moves_per_s']:,.0f}"),
        (
            "arena: PPO update, collected positions/s (x2 with the mirror)",
            f"{arena['update_positions_per_s']:,.0f}",
        ),
        ("arena: seconds per update (256 games)", f"{arena['seconds_per_update']:.2f}"),
        (
            "MCTS-100: seconds per move, 100 games at once",
            f"{arena['mcts100_s_per_move_100_games']:.2f}",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    print(
        f"(cpus {m['cpus']}, 1-min load {m['load_avg_1min_before']:.2f} before, "
        f"{m['load_avg_1min_after']:.2f} after)"
    )
    out = Path(__file__).with_name("results_selfplay.json")
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
