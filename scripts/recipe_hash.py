"""Train each self-play recipe on a short budget and print a sha256 of what it learned.

    python scripts/recipe_hash.py                    # short budget: ~1-3 minutes a recipe
    python scripts/recipe_hash.py --budget tiny      # the fast tier's budget: seconds
    python scripts/recipe_hash.py --record tests/data/recipe_hashes.json

Each recipe is the game config's default (``arena=selfplay game=<game>``, seed 0, one thread)
with only its budget cut: fewer updates, fewer games per update, fewer evaluation games
(the same opponents), so the same code paths run. The hashes are of the trained policy's
weights (every tensor, by name) and of the final evaluation's figures; a change that keeps
them is one that does not move the default. A run is bit-reproducible on one CPU model
at one thread count only, so recorded hashes are keyed by the CPU model (``lscpu``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: recipe -> budget -> the overrides that cut the game config's budget (nothing else)
RECIPES: dict[str, dict[str, list[str]]] = {
    "tictactoe": {
        "short": [
            "arena.epochs=2", "arena.steps_per_epoch=5", "arena.games_per_step=128",
            "arena.eval.games={random:10,minimax:10}",
            "arena.eval.final_games={random:20,minimax:20}",
        ],
        "tiny": [
            "arena.epochs=1", "arena.steps_per_epoch=2", "arena.games_per_step=32",
            "arena.eval.games={random:2,minimax:2}",
            "arena.eval.final_games={random:2,minimax:2}",
        ],
    },
    "connect_four": {
        "short": [
            "arena.epochs=2", "arena.steps_per_epoch=3", "arena.games_per_step=32",
            "arena.league.snapshot_every=2", "trainer.checkpoint_every=3",
            "arena.eval.games={random:4,mcts100:4}",
            "arena.eval.final_games={random:4,tactical:4,mcts10:4,mcts100:4,mcts1000:2}",
            "arena.eval.search_games={mcts100:4,mcts1000:2}", "arena.eval.solver_positions=20",
        ],
        "tiny": [
            "arena.epochs=1", "arena.steps_per_epoch=2", "arena.games_per_step=8",
            "arena.league.snapshot_every=1",
            "arena.eval.games={random:2,mcts100:2}",
            "arena.eval.final_games={random:2,tactical:2,mcts10:2}",
            "arena.eval.search_games={mcts100:2}", "arena.eval.simulations=20",
        ],
    },
    "connect_four_ppo": {
        "short": [
            "arena.epochs=2", "arena.steps_per_epoch=4", "arena.games_per_step=64",
            "arena.search.updates=4", "arena.search.games_per_step=16",
            "arena.league.snapshot_every=2",
            "arena.eval.games={random:4,mcts100:4}",
            "arena.eval.final_games={random:4,tactical:4,mcts10:4,mcts100:4,mcts1000:2}",
            "arena.eval.search_games={mcts100:4,mcts1000:2}",
        ],
        "tiny": [
            "arena.epochs=1", "arena.steps_per_epoch=4", "arena.games_per_step=16",
            "arena.search.updates=2", "arena.search.games_per_step=8",
            "arena.league.snapshot_every=1",
            "arena.eval.games={random:2,mcts100:2}",
            "arena.eval.final_games={random:2,tactical:2,mcts10:2}",
            "arena.eval.search_games={mcts100:2}", "arena.eval.simulations=20",
        ],
    },
}  # fmt: skip


def cpu_model() -> str:
    """The CPU's model name as ``lscpu`` prints it (``platform.processor()`` without it)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def weights_hash(policy_dir: Path) -> str:
    """sha256 over a saved policy's tensors: each name, dtype, shape and bytes, by name."""
    from safetensors.numpy import load_file

    tensors = load_file(str(policy_dir / "weights.safetensors"))
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{t.dtype}|{t.shape}|".encode())
        h.update(t.tobytes())
    return h.hexdigest()


def figures_hash(metrics: dict) -> str:
    """sha256 of the final evaluation's figures (every metric, sorted, exactly as saved)."""
    return hashlib.sha256(json.dumps(metrics, sort_keys=True).encode()).hexdigest()


def train(recipe: str, budget: str, out: Path) -> dict[str, str]:
    """Train ``recipe`` on ``budget`` into ``out`` (one thread, seed 0): its two hashes."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "run.py"), "arena=selfplay", f"game={recipe}", "seed=0",
           "trainer.progress=false", f"hydra.run.dir={out}", *RECIPES[recipe][budget]]  # fmt: skip
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{recipe} ({budget}) failed:\n{r.stderr[-3000:]}")
    metrics = json.loads((out / "results.json").read_text())["metrics"]
    return {"weights": weights_hash(out / "policy"), "figures": figures_hash(metrics)}


def hashes(budget: str, recipes: list[str] | None = None) -> dict[str, dict[str, str]]:
    """``{recipe: {"weights": sha256, "figures": sha256}}`` of each recipe on ``budget``."""
    with tempfile.TemporaryDirectory() as tmp:
        return {r: train(r, budget, Path(tmp) / r) for r in recipes or list(RECIPES)}


def main() -> None:
    """Print (and with ``--record``, store under this CPU model) the recipes' hashes."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", choices=("short", "tiny"), default="short")
    ap.add_argument("--recipe", action="append", choices=list(RECIPES), help="default: all")
    ap.add_argument("--record", type=Path, help="a JSON file: {cpu model: {budget: hashes}}")
    args = ap.parse_args()
    got = hashes(args.budget, args.recipe)
    model = cpu_model()
    print(json.dumps({"cpu": model, "budget": args.budget, "hashes": got}, indent=2))
    if args.record:
        table = json.loads(args.record.read_text()) if args.record.exists() else {}
        table.setdefault(model, {}).setdefault(args.budget, {}).update(got)
        args.record.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
