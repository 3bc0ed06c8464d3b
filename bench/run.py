"""PaddleCraft benchmark suite: every figure a ratio against a peer measured in the same run.

    python bench/run.py            # full suite (~10 min on 2 cores), writes bench/results.json
    python bench/run.py --quick    # reduced sizes, under 2 minutes
    python bench/run.py --size tiny  # every section at a toy size: checks the benches run
    python bench/run.py --only overhead,decode

Sections: toolkit overhead vs a hand-written loop; training FLOP/s vs numpy sgemm (with and
without the CPU tuning); GAN steps/s vs PyTorch (when torch is installed: pip install -e
'.[bench]'); self-play collection vs the PettingZoo way; batched beam search vs one
sentence at a time; batched PUCT search vs one game at a time; peak RSS of each default arena run;
a live run (trainer.live) vs the same run without it, and its status latency.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def machine() -> dict:
    """What the figures came from."""
    from paddlecraft.encoders.cpu_tuning import cpu_model

    cpu = cpu_model()
    import numpy
    import paddle

    return {
        "cpu": cpu or platform.processor(),
        "date": time.strftime("%Y-%m-%d"),
        "cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "python": platform.python_version(),
        "paddle": paddle.__version__,
        "numpy": numpy.__version__,
        "load_avg_1m": os.getloadavg()[0],
        "cpu_tuning": os.environ.get("PADDLECRAFT_CPU_TUNING", "none"),
    }


_RSS_CHILD = r"""
import atexit, resource, runpy, sys
sys.path.insert(0, {root!r})
sys.argv = {argv!r}

def report():
    # VmHWM: the peak of this process image only. ru_maxrss would also count the
    # pages of the (large) benchmark process this one was forked from, since it
    # survives exec.
    try:
        with open("/proc/self/status") as f:
            kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
    except (OSError, StopIteration):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stderr.write(f"PEAK_RSS_KIB {{kib}}\n")

atexit.register(report)
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def peak_rss(size: str) -> dict:
    """Peak resident memory (MiB) of each default arena run, each in its own process."""
    arenas = [p.stem for p in sorted((ROOT / "conf" / "arena").glob("*.yaml"))]
    if size != "full":  # the conditional GAN's footprint is the GAN's
        arenas = [a for a in arenas if a != "gan_conditional"]
    if size == "tiny":  # the mechanism only, on the lightest arena; the arenas' own tests run each
        arenas = ["classify"]
    steps = {"full": "200", "quick": "5", "tiny": "1"}[size]
    out = {}
    for arena in arenas:
        run_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"pc_rss_{arena}_{os.getpid()}"
        argv = [str(ROOT / "run.py"), f"arena={arena}", f"trainer.max_steps={steps}",
                "trainer.progress=false", f"hydra.run.dir={run_dir}"]  # fmt: skip
        code = _RSS_CHILD.format(root=str(ROOT), argv=argv)
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True
        )
        peaks = [ln for ln in proc.stderr.splitlines() if ln.startswith("PEAK_RSS_KIB ")]
        out[arena] = {
            "peak_rss_mib": round(int(peaks[-1].split()[1]) / 1024, 1) if peaks else None,
            "ok": proc.returncode == 0,
            "steps": int(steps),
        }
        if not out[arena]["ok"]:
            tail = proc.stderr.strip().splitlines()[-3:]
            raise RuntimeError(f"arena={arena} failed: " + " | ".join(tail))
    return out


def selfplay_vs_pettingzoo(seconds: float, games: int | None = None) -> dict:
    """Moves/s: the arena's batched self-play collection (policy in the loop) vs the
    PettingZoo way, ``connect_four_v3.env()`` with one policy call per move (same policy)."""
    import numpy as np
    import selfplay_bench

    arena = selfplay_bench.bench_arena(
        seconds, games=games, mcts_simulations=100 if games is None else 4
    )
    from hydra import compose, initialize_config_dir
    from pettingzoo.classic import connect_four_v3  # the pettingzoo extra

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import build_agents

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arena=selfplay", "game=connect_four_ppo"])
    agents = build_agents(cfg)
    policy = agents["policy"]
    env = connect_four_v3.env()
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    moves, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        obs, _, term, trunc, _ = env.last()
        if term or trunc:
            env.reset()
            continue
        a = policy.act(
            obs["observation"][None].astype("float32"),
            obs["action_mask"][None],
            greedy=False,
            rng=rng,
        )
        env.step(int(a[0]))
        moves += 1
    pz = moves / (time.perf_counter() - t0)
    ours, mix = arena["selfplay_moves_per_s"], arena["collect_moves_per_s"]
    return {
        "arena_selfplay_moves_per_s": ours,
        "arena_training_mix_moves_per_s": mix,
        "games_per_step": arena["games_per_step"],
        "pettingzoo_policy_moves_per_s": pz,
        "ratio": ours / pz,
        "training_mix_ratio": mix / pz,
        "target": ">= 20",
        "summary": f"arena self-play collection ({arena['games_per_step']:.0f} games) {ours:,.0f} moves/s "
        f"vs PettingZoo loop, one policy call per move, {pz:,.0f} = {ours / pz:.0f}x (target >= 20); "
        f"training mix with scripted anchors {mix:,.0f} = {mix / pz:.0f}x",
    }


#: the benchmark sizes: ``full`` gives the figures, ``quick`` a rough look in under two
#: minutes, ``tiny`` only checks that every section still runs (tests/test_bench.py)
SIZES = ("full", "quick", "tiny")


def _sections(size: str) -> dict[str, Callable[[], dict]]:
    """Each section's measurement at ``size`` (one of :data:`SIZES`), by name."""
    import core_bench
    import decode_bench
    import gan_bench
    import live_bench
    import resnet_bench
    import search_bench
    import selfplay_bench

    def pick(full, quick, tiny):  # noqa: ANN001, ANN202
        return {"full": full, "quick": quick, "tiny": tiny}[size]

    return {
        "overhead": lambda: core_bench.bench_overhead(pick(600, 300, 3), pick(7, 3, 1)),
        "flops": lambda: core_bench.bench_flops(pick(60, 20, 1)),
        "decode": lambda: decode_bench.bench_decoding(
            pick(256, 128, 4), train_steps=pick(150, 150, 2)
        ),
        "gan_vs_torch": lambda: gan_bench.bench_gan_vs_torch(pick(300, 60, 2), pick(3, 2, 1)),
        "resnet": lambda: resnet_bench.bench_resnet(
            pick(30, 8, 1), pick(3, 1, 1), batch=pick(32, 32, 2), image=pick(64, 64, 32)
        ),
        "selfplay": lambda: selfplay_bench.bench_selfplay(size),
        "search": lambda: search_bench.bench_search(size),
        "selfplay_policy": lambda: selfplay_vs_pettingzoo(
            pick(4.0, 1.5, 0.05), games=pick(None, None, 16)
        ),
        "selfplay_workers": lambda: selfplay_bench.bench_workers(
            pick(6.0, 2.0, 0.05), games=pick(1024, 1024, 16), workers=pick((1, 2), (1, 2), (1,))
        ),
        "peak_rss": lambda: peak_rss(size),
        "live": lambda: live_bench.bench_live(pick(300, 150, 3), pick(12, 8, 1)),
    }


def _row(name: str, r: dict) -> str:
    """One human line per section."""
    if "error" in r:
        return f"{name:<14} ERROR {r['error']}"
    if name == "overhead":
        return f"{name:<14} toolkit/hand-written time per step = {r['ratio']:.3f}x (target <= 1.05)"
    if name == "flops":
        t, d = r["tuned"], r["paddle_default"]
        return (
            f"{name:<14} MLP training {t['train_gflops']:.0f} GFLOP/s = {t['fraction_of_numpy']:.2f}x numpy "
            f"sgemm ({t['numpy_sgemm_gflops']:.0f}); Paddle default {d['train_gflops']:.0f} GFLOP/s; "
            f"CPU tuning gain {r['tuning_gain']:.2f}x [{t['tuning']}]"
        )
    if name == "decode":
        return (
            f"{name:<14} batched beam-{r['beam']} {r['batched_sentences_per_s']:.0f} sent/s vs one at a "
            f"time {r['one_at_a_time_sentences_per_s']:.0f} = {r['speedup']:.1f}x (same output: {r['same_output']})"
        )
    if name == "peak_rss":
        runs = {a: v for a, v in r.items() if isinstance(v, dict)}
        return f"{name:<14} " + ", ".join(
            f"{a} {v['peak_rss_mib']:.0f} MiB" if v["ok"] and v["peak_rss_mib"] else f"{a} FAILED"
            for a, v in runs.items()
        )
    if "summary" in r:
        return f"{name:<14} {r['summary']}"
    return f"{name:<14} {json.dumps(r)[:160]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced sizes; under 2 minutes")
    parser.add_argument(
        "--size", choices=SIZES, default=None, help="full (default), quick (= --quick) or tiny"
    )
    parser.add_argument("--only", default="", help="comma-separated section names")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    args = parser.parse_args()
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    # before paddle, as run.py does, and before _sections(): some bench modules import
    # paddle, which would set OMP_NUM_THREADS=1 that every child process then inherits
    apply_cpu_tuning()
    size = args.size or ("quick" if args.quick else "full")
    sections = _sections(size)
    wanted = [s for s in args.only.split(",") if s] or list(sections)
    unknown = set(wanted) - set(sections)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; have {list(sections)}")

    results: dict = {"machine": machine(), "size": size, "sections": {}}
    t0 = time.time()
    for name in wanted:
        t = time.time()
        try:
            results["sections"][name] = sections[name]()
        except Exception as e:  # one broken section must not hide the others' figures
            results["sections"][name] = {"error": f"{type(e).__name__}: {e}"}
        results["sections"][name]["seconds"] = round(time.time() - t, 1)
        print(
            _row(name, results["sections"][name]),
            f"[{results['sections'][name]['seconds']} s]",
            flush=True,
        )
    results["seconds"] = round(time.time() - t0, 1)
    m = results["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, paddle {m['paddle']}, load {m['load_avg_1m']:.2f}; "
          f"{results['seconds']:.0f} s")  # fmt: skip
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    if any("error" in r for r in results["sections"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
