"""arena=marl's environment steps per second, in this process and on Ray workers.

    python scripts/marl_workers_rate.py                       # workers.count 0 and 2, simple_spread
    python scripts/marl_workers_rate.py --workers 0 4 --updates 5 --env simple_tag

For each worker count it builds the run that ``python run.py arena=marl env=<env>
arena.workers.count=<k>`` builds (the default config), rolls once to start the workers,
then times ``--updates`` rollouts alone and ``--updates`` whole updates (rollout and PPO);
one JSON line per count: ``rollout_steps_per_s`` and ``update_steps_per_s`` (environment
steps: copies x rollout steps). Where workers and the lead share few cores the workers
compete with the lead and with each other: the figures are the machine's, say its load.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from paddlecraft.arenas import register_configs
from paddlecraft.arenas.engine.app import build_agents, build_arena

ROOT = Path(__file__).resolve().parents[1]


def rates(env: str, workers: int, updates: int) -> dict[str, float]:
    """Environment steps per second of rollouts alone and of whole updates."""
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arena=marl", f"env={env}",
                                           f"arena.workers.count={workers}"])  # fmt: skip
    arena = build_arena(cfg, build_agents(cfg))
    steps = arena.cfg.num_envs * arena.cfg.rollout_steps
    with arena:
        arena.rollout()  # starts the workers (and a local Ray)
        t0 = time.perf_counter()
        for _ in range(updates):
            arena.rollout()
        t1 = time.perf_counter()
        for step in range(updates):
            arena.train_step(step)
        t2 = time.perf_counter()
    return {
        "env": env,
        "workers": workers,
        "env_steps_per_rollout": steps,
        "rollout_steps_per_s": round(steps * updates / (t1 - t0), 1),
        "update_steps_per_s": round(steps * updates / (t2 - t1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="simple_spread")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--updates", type=int, default=5)
    args = parser.parse_args()
    for k in args.workers:
        print(json.dumps(rates(args.env, k, args.updates)), flush=True)


if __name__ == "__main__":
    main()
