"""Online learning on sklearn's digits: stream all 1797 in a seeded random order to a
``data=stream`` run and print its held-out test accuracy at the end of the stream.

    python scripts/stream_digits.py               # a real run: run.py ... trainer.live=true,
                                                  #   samples POSTed over its live server
    python scripts/stream_digits.py --in-process  # the same run, its routes called through
                                                  #   Starlette's TestClient (no server)
    python scripts/stream_digits.py --feed        # the README's commands: run.py (its log
                                                  #   to a file) fed by `paddlecraft feed --end`
    ... --seed 1  ... -- arena.batch_size=32      # overrides after -- go to the run

Every 5th sample (by arrival) is held out (data.loader.holdout_every=5): the accuracy is over
those 359, judged with the weights the run ends with (its results.json). Runs from a
checkout (the in-process mode uses the test helpers in tests/).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OVERRIDES = ["arena=classify", "data=stream", "data.loader.classes=10", "trainer.progress=false"]


def digits_stream(seed: int) -> list[dict[str, Any]]:
    """All 1797 digits in a seeded random order, as ``{"pixels": [1][8][8], "label": k}``."""
    import numpy as np
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))
    images = (d.images / 16.0).astype(np.float32)
    return [{"pixels": images[i][None].tolist(), "label": int(d.target[i])} for i in order]


def over_http(samples: list[dict[str, Any]], seed: int, extra: list[str]) -> dict[str, Any]:
    """Start ``run.py`` with the live server, POST the stream, end it, wait for the results."""
    from paddlecraft.feed import LiveRun

    run_dir = Path(tempfile.mkdtemp(prefix="stream_digits_"))
    cmd = [sys.executable, str(ROOT / "run.py"), *OVERRIDES, "trainer.live=true",
           f"seed={seed}", f"hydra.run.dir={run_dir}", *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 180
        while not (run_dir / "live.json").exists():
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"the run did not go live: {proc.stderr.read()[-2000:]}")
            time.sleep(0.2)
        run = LiveRun(run_dir)
        for i, s in enumerate(samples):
            run.call("POST", "samples", {**s, "index": i})
        run.call("POST", "end")
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.terminate()
    return json.loads((run_dir / "results.json").read_text())


def through_the_command_line(
    samples: list[dict[str, Any]], seed: int, extra: list[str]
) -> dict[str, Any]:
    """The README's way: ``run.py`` with its output to a file (progress lines, no bar),
    the digits written as 8-bit PNGs in class folders (named by arrival order) and sent by
    ``paddlecraft feed RUN_DIR FOLDER --end``; the run must exit 0."""
    import cv2
    import numpy as np

    work = Path(tempfile.mkdtemp(prefix="stream_digits_"))
    folder, run_dir = work / "digits", work / "run"
    for i, s in enumerate(samples):
        (folder / str(s["label"])).mkdir(parents=True, exist_ok=True)
        pixels = np.rint(np.asarray(s["pixels"][0]) * 255).astype(np.uint8)  # [8, 8]
        cv2.imwrite(str(folder / str(s["label"]) / f"{i:05d}.png"), pixels)
    overrides = [o for o in OVERRIDES if not o.startswith("trainer.progress")]
    cmd = [sys.executable, str(ROOT / "run.py"), *overrides, "trainer.live=true",
           f"seed={seed}", f"hydra.run.dir={run_dir}", *extra]  # fmt: skip
    with open(work / "run.log", "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 180
            while not (run_dir / "live.json").exists():
                if proc.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"the run did not go live; see {work / 'run.log'}")
                time.sleep(0.2)
            feed = [sys.executable, "-m", "paddlecraft", "feed", str(run_dir), str(folder),
                    "--end", "--no-progress"]  # fmt: skip
            fed = subprocess.run(feed, cwd=ROOT, capture_output=True, text=True)
            if fed.returncode != 0:
                raise SystemExit(f"paddlecraft feed failed: {fed.stderr.strip()}")
            if proc.wait(timeout=1800) != 0:
                raise SystemExit(f"run.py exited {proc.returncode}; see {work / 'run.log'}")
        finally:
            if proc.poll() is None:
                proc.terminate()
    return json.loads((run_dir / "results.json").read_text())


def in_process(samples: list[dict[str, Any]], seed: int, extra: list[str]) -> dict[str, Any]:
    """The same config built in this process; its routes behind a TestClient, the loop on a
    thread, a stand-in LiveContext (tests/live_fake.py)."""
    from hydra import compose, initialize_config_dir
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.testclient import TestClient

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import (
        build_agents,
        build_arena,
        build_data,
        run_arena,
        trainer_callbacks,
    )
    from paddlecraft.arenas.engine.rng import seed_everything
    from tests.live_fake import FakeLive, LiveBoundary

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        # no live server here: the stream's own check is told it is live
        cfg = compose("config", [*OVERRIDES, "data.loader.live=true", f"seed={seed}", *extra])
    seed_everything(seed)
    data = build_data(cfg)
    arena = build_arena(cfg, build_agents(cfg, data), data)
    run_dir = Path(tempfile.mkdtemp(prefix="stream_digits_"))
    live = FakeLive(run_dir)
    arena.live = live
    arena.setup(str(run_dir))
    client = TestClient(Starlette(routes=[Mount("/api/arena", routes=arena.live_routes(live))]))
    callbacks = [*trainer_callbacks(cfg), LiveBoundary(live)]
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(run_arena(arena, run_dir, callbacks)))
    thread.start()
    for i, s in enumerate(samples):
        r = client.post("/api/arena/samples", json={**s, "index": i})
        if r.status_code != 200:
            raise SystemExit(f"sample {i} refused: {r.text}")
    client.post("/api/arena/end")
    thread.join()
    arena.close()
    return json.loads((run_dir / "results.json").read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    how = p.add_mutually_exclusive_group()
    how.add_argument("--in-process", action="store_true", help="no server: TestClient")
    how.add_argument("--feed", action="store_true", help="run.py fed by paddlecraft feed")
    p.add_argument("--seed", type=int, default=0, help="run seed and stream order")
    p.add_argument("overrides", nargs="*", help="more run settings (after --)")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))  # this checkout's paddlecraft (and tests/, in-process)
    import logging

    logging.basicConfig(level=logging.WARNING)
    samples = digits_stream(args.seed)
    started = time.time()
    go = in_process if args.in_process else through_the_command_line if args.feed else over_http
    results = go(samples, args.seed, args.overrides)
    metrics = results.get("metrics", results)
    acc = metrics.get("test_accuracy")
    how = (
        "in-process (TestClient)"
        if args.in_process
        else "through run.py and paddlecraft feed (PNG files)"
        if args.feed
        else "over HTTP (live server)"
    )
    sys.stdout.write(
        f"test_accuracy={acc:.4f} on {int(metrics.get('test_samples', 0))} held-out samples "
        f"after streaming {len(samples)} digits {how}, seed {args.seed}, "
        f"{results.get('step', '?')} steps, {time.time() - started:.0f} s\n"
    )


if __name__ == "__main__":
    main()
