"""A live run's cost: the same digits run with and without ``trainer.live``, and how fast
the status endpoint answers while the run trains.

    python bench/run.py --only live

Both runs use the engine's loop with the same callbacks; the live one adds the live control
(server thread, event publishing, a boundary check per step) with no client connected. A
run's time per step is taken between step ends, after its first tenth (start-up, the
server's start and the first steps' allocations are left out). Runs come in adjacent pairs
in ABBA order (plain, live, live, plain...), many short pairs rather than a few long ones,
so a change in the machine's load mostly falls between pairs, not inside one; the figure is
the median of the pairs' ratios, with their quartiles and range as its spread. Then one
more live run is polled on ``GET /api/status`` from another thread over a kept-alive
connection: latency median and 95th percentile.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time
from pathlib import Path


def bench_live(steps: int = 300, pairs: int = 12, poll_s: float = 0.02) -> dict:
    """Seconds per step with and without the live endpoint; status latency while training."""
    import httpx

    from paddlecraft.agents import Classifier
    from paddlecraft.arenas import Callback, ClassifyArena, Loop
    from paddlecraft.arenas.engine.callbacks import JsonlLogger, NanGuard, Progress
    from paddlecraft.arenas.engine.live.config import LiveConfig
    from paddlecraft.arenas.engine.live.control import LiveControl

    logging.getLogger("httpx").setLevel(logging.WARNING)  # not one log line per status poll
    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 64, "hidden_size": 784}
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"pc_live_bench_{os.getpid()}"

    class StepClock(Callback):
        """When each step ended (``time.perf_counter``)."""

        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
            self.ends.append(time.perf_counter())

        def s_per_step(self) -> float:
            """Mean step time after the first tenth of the run (at least one step)."""
            skip = min(len(self.ends) // 10, len(self.ends) - 2)
            return (self.ends[-1] - self.ends[skip]) / (len(self.ends) - 1 - skip)

    def one(name: str, live: bool, watch: bool = False) -> tuple[float, list[float]]:
        agent = Classifier(f"live_bench_{name}", encoder=enc, seed=0)
        arena = ClassifyArena(
            {"classifier": agent},
            data={"_target_": "paddlecraft.craftdata.load_digits"},
            epochs=10**6,
            batch_size=64,
        )
        arena.evaluate = lambda: {}  # no evaluation in the timed region
        clock = StepClock()
        cbs = [Progress(False), JsonlLogger(10), NanGuard(), clock]
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
        loop.run()
        done.set()
        if watcher is not None:
            watcher.join(10)
        return clock.s_per_step(), latencies

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
    ratios = sorted(b / a for a, b in zip(plain, live))
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    out = {
        "steps": steps,
        "pairs": pairs,
        "plain_s_per_step": statistics.median(plain),
        "live_s_per_step": statistics.median(live),
        "ratio": statistics.median(ratios),
        "ratio_of_medians": statistics.median(live) / statistics.median(plain),
        "ratio_quartiles": [round(quartiles[0], 4), round(quartiles[2], 4)],
        "ratio_range": [round(ratios[0], 4), round(ratios[-1], 4)],
        "pair_ratios": [round(b / a, 4) for a, b in zip(plain, live)],
        "status_requests": len(lat),
        "status_ms_median": statistics.median(lat) if lat else None,
        "status_ms_p95": lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else None,
    }
    p95 = out["status_ms_p95"]
    q1, q3 = out["ratio_quartiles"]
    lo, hi = out["ratio_range"]
    out["summary"] = (
        f"live run (no client) / plain = {out['ratio']:.3f}x, median of {pairs} pair ratios "
        f"(quartiles {q1:.3f}-{q3:.3f}, range {lo:.3f}-{hi:.3f}; target <= 1.02); "
        f"GET /api/status while "
        f"training: median {out['status_ms_median'] or float('nan'):.1f} ms, p95 "
        f"{p95 or float('nan'):.1f} ms over {len(lat)} requests (target < 50 ms)"
    )
    return out
