"""A live run's cost: the same digits run with and without ``trainer.live``, and how fast
the status endpoint answers while the run trains.

    python bench/run.py --only live

Both runs use the engine's loop with the same callbacks; the live one adds the live control
(server thread, event publishing, a boundary check per step) with no client connected. Runs
alternate in ABBA order (plain, live, live, plain...) so a busy machine slows both alike;
the figure is the ratio of the medians. Then one more live run is polled on ``GET /api/status`` from
another thread over a kept-alive connection: latency median and 95th percentile.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from pathlib import Path


def bench_live(steps: int = 600, pairs: int = 5, poll_s: float = 0.02) -> dict:
    """Seconds per step with and without the live endpoint; status latency while training."""
    import httpx

    from paddlecraft.agents import Classifier
    from paddlecraft.arenas import ClassifyArena, Loop
    from paddlecraft.arenas.engine.callbacks import JsonlLogger, NanGuard, Progress
    from paddlecraft.arenas.engine.live.config import LiveConfig
    from paddlecraft.arenas.engine.live.control import LiveControl

    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 64, "hidden_size": 784}
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"pc_live_bench_{os.getpid()}"

    def one(name: str, live: bool, watch: bool = False) -> tuple[float, list[float]]:
        agent = Classifier(f"live_bench_{name}", encoder=enc, seed=0)
        arena = ClassifyArena(
            {"classifier": agent},
            data={"_target_": "paddlecraft.craftdata.load_digits"},
            epochs=10**6,
            batch_size=64,
        )
        arena.evaluate = lambda: {}  # no evaluation in the timed region
        cbs = [Progress(False), JsonlLogger(10), NanGuard()]
        if live:
            cbs.insert(0, LiveControl(LiveConfig(enabled=True)))
        run_dir = root / name
        loop = Loop(arena, cbs, run_dir, max_steps=steps, handle_signals=False)
        latencies: list[float] = []
        done = threading.Event()

        def poll() -> None:
            while not (run_dir / "live.json").exists() and not done.is_set():
                time.sleep(0.005)
            if done.is_set():
                return
            info = json.loads((run_dir / "live.json").read_text())
            url = f"http://{info['host']}:{info['port']}/api/status"
            headers = {"Authorization": f"Bearer {info['token']}"}
            with httpx.Client(timeout=10) as client:
                while not done.is_set():
                    t = time.perf_counter()
                    try:
                        r = client.get(url, headers=headers)
                    except httpx.HTTPError:  # the run ended between the check and the call
                        return
                    if r.status_code == 200 and r.json()["state"] == "running":
                        latencies.append(1000 * (time.perf_counter() - t))
                    time.sleep(poll_s)

        watcher = threading.Thread(target=poll, daemon=True) if watch else None
        if watcher is not None:
            watcher.start()
        t = time.perf_counter()
        loop.run()
        dt = (time.perf_counter() - t) / steps
        done.set()
        if watcher is not None:
            watcher.join(10)
        return dt, latencies

    one("warm", False)  # first-run costs (imports, allocator) out of the timed pairs
    plain, live = [], []
    for i in range(pairs):  # ABBA: a drift in the machine's load favours neither side
        order = (False, True) if i % 2 == 0 else (True, False)
        for is_live in order:
            (live if is_live else plain).append(
                one(f"{'live' if is_live else 'plain'}{i}", is_live)[0]
            )
    _, lat = one("watched", True, watch=True)
    lat.sort()
    ratio = statistics.median(live) / statistics.median(plain)
    out = {
        "steps": steps,
        "pairs": pairs,
        "plain_s_per_step": statistics.median(plain),
        "live_s_per_step": statistics.median(live),
        "ratio": ratio,
        "pair_ratios": [round(b / a, 4) for a, b in zip(plain, live)],
        "status_requests": len(lat),
        "status_ms_median": statistics.median(lat) if lat else None,
        "status_ms_p95": lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else None,
    }
    p95 = out["status_ms_p95"]
    out["summary"] = (
        f"live run (no client) / plain = {ratio:.3f}x (target <= 1.02); GET /api/status while "
        f"training: median {out['status_ms_median'] or float('nan'):.1f} ms, p95 "
        f"{p95 or float('nan'):.1f} ms over {len(lat)} requests (target < 50 ms)"
    )
    return out
