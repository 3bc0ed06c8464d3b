"""The dual-encoder targets (issue 95): arena=contrastive from scratch on the bundled shapes.

    python scripts/contrastive_targets.py                  # seed 0, into runs/contrastive_targets
    python scripts/contrastive_targets.py --seed 1 --out runs/ct1 -- arena.epochs=40

Runs ``python run.py arena=contrastive`` (one thread; skipped when the folder already holds a
finished run), then prints the run's held-out retrieval (``i2t_recall@1`` >= 0.9 is the
target), the zero-shot accuracy by prompts on the held-out-combination images beside its
chance level and the linear probe on the same image embeddings, and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOWN = ("i2t_recall@1", "i2t_recall@5", "t2i_recall@1", "t2i_recall@5", "zeroshot_accuracy",
         "zeroshot_chance", "linear_probe_accuracy", "zeroshot_classes", "logit_scale")  # fmt: skip
TARGETS = (("i2t_recall@1", 0.9),)  #: (metric, at least)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/contrastive_targets")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the run")
    p.add_argument("overrides", nargs="*", help="extra run.py overrides (after --)")
    a = p.parse_args(argv)
    out = Path(a.out)
    results = out / "results.json"
    wall = None
    if not results.is_file():
        env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
        cmd = [sys.executable, str(ROOT / "run.py"), "arena=contrastive", f"seed={a.seed}",
               "trainer.progress=false", f"hydra.run.dir={out}", *a.overrides]  # fmt: skip
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, env=env)
        wall = time.perf_counter() - t0
        if r.returncode:
            return r.returncode
    m = json.loads(results.read_text())["metrics"]
    for k in SHOWN:
        print(f"{k:24s} {m.get(k, float('nan')):.4f}")
    if wall is not None:
        print(f"{'wall_seconds':24s} {wall:.0f}")
    ok = all(m.get(k, 0.0) >= v for k, v in TARGETS)
    zs = m.get("zeroshot_accuracy", 0.0) / max(m.get("zeroshot_chance", 1.0), 1e-9)
    print(f"zero-shot / chance: {zs:.1f}x; targets {'met' if ok else 'NOT met'}: "
          + ", ".join(f"{k} >= {v}" for k, v in TARGETS))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
