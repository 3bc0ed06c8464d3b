"""arena=marl's training loop against the bare batched environments stepping random actions.

  python bench/marl_bench.py [--env simple_spread_v3] [--envs 32] [--updates 5]

Prints one JSON line: environment steps per second of the bare `BatchedEnv` with random
actions, of the arena's training step (rollout with the policy + PPO update, default
settings), and their ratio (the loop's cost over the environments).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    from paddlecraft.agents.group_policy import GroupPolicy
    from paddlecraft.arenas.marl import MarlArena, make_env
    from paddlecraft.arenas.marl.envs import default_groups
    from paddlecraft.arenas.marl.vector import BatchedEnv

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="simple_spread_v3")
    p.add_argument("--envs", type=int, default=32)
    p.add_argument("--updates", type=int, default=5)
    a = p.parse_args()
    kwargs = {"max_cycles": 25}
    probe = make_env(a.env, kwargs)
    groups = default_groups(probe.possible_agents)
    venv = BatchedEnv(lambda: make_env(a.env, kwargs), a.envs, groups)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    steps = 0
    for u in range(a.updates):
        venv.reset([u * a.envs + i for i in range(a.envs)])
        for _ in range(25):
            acts = {g: rng.integers(venv.act_space[g].n, size=(a.envs, len(m)))
                    for g, m in groups.items()}  # fmt: skip
            venv.step(acts)
            steps += a.envs
    bare = steps / (time.perf_counter() - t0)
    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 64,
           "hidden_layers": 2}  # fmt: skip
    agents = {g: GroupPolicy(g, encoder=enc, lr=7e-4, grad_clip=10.0) for g in groups}
    arena = MarlArena(agents, seed=0, env={"name": a.env, "kwargs": kwargs}, num_envs=a.envs)
    arena.train_step(0)  # warm-up
    t0 = time.perf_counter()
    for u in range(a.updates):
        arena.train_step(u + 1)
    loop = a.updates * 25 * a.envs / (time.perf_counter() - t0)
    print(json.dumps({
        "bench": "marl_loop_cost", "env": a.env, "envs": a.envs,
        "bare_env_steps_per_s": round(bare, 1), "train_env_steps_per_s": round(loop, 1),
        "ratio": round(bare / loop, 2), "cpu": cpu(), "threads": os.environ.get("OMP_NUM_THREADS"),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
