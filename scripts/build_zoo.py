"""Rebuild PaddleCraft's zoo of trained agents (agents/zoo/<name>/) and measure each one.

    python scripts/build_zoo.py                 # every entry
    python scripts/build_zoo.py digits-mlp      # some

Each entry is trained by ``run.py`` with fixed overrides (the command is recorded in its
``quality.json``), copied from the run's last checkpoint without optimizer state (so the
package stays small), then measured by ``paddlecraft.agents.zoo.quality.measure`` — the same function
``tests/test_zoo.py`` calls to re-check the shipped figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning, cpu_model  # noqa: E402

# before anything imports paddle (agents does): the training children inherit these
# settings, and Paddle would otherwise have set OMP_NUM_THREADS=1 for them
apply_cpu_tuning()

from paddlecraft.agents.zoo.quality import ENTRIES  # noqa: E402
from paddlecraft.arenas.zoo import measure  # noqa: E402


def build(name: str) -> dict:
    """Train entry ``name`` with run.py, keep its agent, measure it; return its quality record."""
    spec = ENTRIES[name]
    dest = ROOT / "agents" / "zoo" / name
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, str(ROOT / "run.py"), *spec["overrides"], f"hydra.run.dir={run_dir}"]
        subprocess.run(cmd, check=True, cwd=ROOT)
        last = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(last / "agents" / spec["agent"], dest)
    (dest / "optimizer.safetensors").unlink(missing_ok=True)
    meta = json.loads((dest / "agent.json").read_text())
    meta["sha256"].pop("optimizer.safetensors", None)
    (dest / "agent.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    value = measure(name)
    record = {
        "metric": spec["metric"],
        "value": value,
        "measured_by": "python -c 'from paddlecraft.arenas.zoo import measure; "
        f'print(measure("{name}"))\'',
        "trained_by": "python run.py " + " ".join(spec["overrides"]),
        "cpu": cpu_model(),
        "date": time.strftime("%Y-%m-%d"),
        "about": spec["about"],
    }
    (dest / "quality.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    for entry in sys.argv[1:] or list(ENTRIES):
        print(entry, json.dumps(build(entry)))
