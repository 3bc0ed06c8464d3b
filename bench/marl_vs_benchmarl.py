"""arena=marl's MAPPO against BenchMARL's MAPPO on mpe2 simple_spread_v3, one run, one CPU.

    python bench/marl_vs_benchmarl.py [--steps 80000] [--seeds 3] [--eval-episodes 100]

Needs the bench extra (``pip install -e '.[bench]'``: benchmarl, torchrl, torch CPU) and
the mpe extra. For each seed the two trainings run one after the other, each in its own
process (Paddle's and PyTorch's OpenMP runtimes must not share one) with one thread
(``OMP_NUM_THREADS=1``, ``MKL_NUM_THREADS=1``, ``torch.set_num_threads(1)``), for the
same number of environment steps (one step of one copy; 32 copies x 25 steps = 800 per
update on both sides). Each child prints one JSON line; this prints one JSON line with
the environment steps per second of each (training only: rollouts and updates, no
evaluation, no setup), their ratio ours/theirs (median of the per-seed ratios), the mean
episode return summed over the 3 agents of each after those steps (greedy actions, the
same ``--eval-episodes`` mpe2 episodes, seeds 10000.., for both: the one evaluator below
drives both policies through the raw PettingZoo API) with its spread over seeds, and
whether the targets hold: throughput >= BenchMARL's, and a return at least the low end of
BenchMARL's interval (min..max over seeds).

Matched: the task (mpe2 simple_spread_v3, N=3, local_ratio 0.5, max_cycles 25, discrete
actions; BenchMARL gets it through torchrl's ``PettingZooWrapper``, since PettingZoo 1.27
has no ``pettingzoo.mpe`` for BenchMARL's own task), 32 copies stepped in turn in one
process (ours: ``BatchedEnv``; theirs: torchrl's ``SerialEnv``, BenchMARL's default), 800
frames per update with every copy one whole episode, MAPPO with one policy shared by the
three agents and a centralised critic, Adam lr 7e-4 and eps 1e-8, gradient-norm clip 10,
gamma 0.99, GAE lambda 0.95, ratio clip 0.2, entropy 0.01, value-loss weight 1 (L2), 10
passes of one full-batch minibatch per update (BenchMARL: 10 minibatch iterations of 800
frames), 2 x 64 ReLU MLPs for the actor and the critic, categorical actions, truncated
episodes bootstrapped. Ours runs its default config (``arena=marl``) with the seed.

Not removable (BenchMARL's MAPPO has no setting for them): ours normalises the value
targets (running mean/std) and the advantages (per rollout), clips the value around the
collecting critic's (0.2) and scales the actor head's initial weights by 0.01; BenchMARL
does none of these. Ours gives each agent its own value (the critic reads every
observation plus the agent's one-hot index); BenchMARL's shared centralised critic reads
the env's global state (the concatenated observations) and gives one value for all three.
Ours clips the gradient norm of actor and critic together (one optimizer); BenchMARL
steps two Adams (actor + entropy loss, critic loss), each clipped on its own. Ours reseeds
every copy at every update (seeds drawn from the run's seed); BenchMARL's copies are
seeded once (``seed * 1000 + copy``) and run on from there. Both evaluate greedily.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASK = {"N": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False}
NUM_ENVS, ROLLOUT = 32, 25  # arena=marl's defaults (a run checks --steps against its own)
EVAL_SEED = 10_000  # first evaluation episode's seed (training seeds are drawn elsewhere)
EXTRAS = ("benchmarl", "torchrl", "torch", "mpe2")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The CLI; ``--steps`` must be a positive multiple of one update's 800 frames."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=80_000, help="environment steps per training")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..n-1, each side trained once")
    p.add_argument("--eval-episodes", type=int, default=100, help="greedy episodes, both sides")
    p.add_argument("--side", choices=("ours", "benchmarl"), help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    frames = NUM_ENVS * ROLLOUT
    if a.steps < frames or a.steps % frames:
        p.error(
            f"--steps={a.steps}: expected a positive multiple of {frames} (32 copies x 25 steps)"
        )
    if a.seeds < 1 or a.eval_episodes < 1:
        p.error("--seeds and --eval-episodes must be >= 1")
    return a


def missing_extras() -> list[str]:
    """The bench's packages that are not installed (checked without importing them)."""
    return [m for m in EXTRAS if importlib.util.find_spec(m) is None]


def evaluate(act: Callable[[dict[str, Any]], dict[str, Any]], episodes: int) -> list[float]:
    """Each episode's return summed over agents: mpe2 simple_spread_v3 episodes seeded
    ``EVAL_SEED + i``, ``act`` mapping the observation dict to the action dict."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(**TASK)
    out = []
    for i in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED + i)
        total = 0.0
        while env.agents:
            obs, rewards, _, _, _ = env.step(act(obs))
            total += float(sum(rewards.values()))
        out.append(total)
    env.close()
    return out


def train_ours(seed: int, steps: int, episodes: int) -> dict[str, Any]:
    """arena=marl's default config: ``steps / 800`` training steps, then the evaluation."""
    sys.path.insert(0, str(ROOT))
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import build_agents, build_arena
    from paddlecraft.arenas.engine.rng import seed_everything
    from paddlecraft.arenas.marl import DeployedPolicy

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arena=marl", f"seed={seed}"])
    a, g = cfg.arena, cfg.agents.agent
    if dict(a.env.kwargs) != TASK or a.algo != "mappo":
        raise RuntimeError(f"arena=marl's default task moved: {a.algo}, {dict(a.env.kwargs)}")
    settings = {
        "num_envs": a.num_envs, "rollout_steps": a.rollout_steps, "ppo_epochs": a.ppo_epochs,
        "minibatches": a.minibatches, "gamma": a.gamma, "gae_lambda": a.gae_lambda,
        "clip": a.clip, "entropy_coef": a.entropy_coef, "value_coef": a.value_coef,
        "lr": g.lr, "grad_clip": g.grad_clip, "critic_hidden": g.critic_hidden,
        "hidden": [g.encoder.hidden_size] * g.encoder.hidden_layers,
    }  # fmt: skip
    frames = a.num_envs * a.rollout_steps
    if steps % frames:
        raise RuntimeError(f"--steps={steps}: not a multiple of one update's {frames} frames")
    seed_everything(seed)
    arena = build_arena(cfg, build_agents(cfg))
    t0 = time.perf_counter()
    for u in range(steps // frames):
        arena.train_step(u)
    seconds = time.perf_counter() - t0
    policies = [DeployedPolicy(p, greedy=True) for p in arena.policies.values()]
    returns = evaluate(
        lambda obs: {k: v for p in policies for k, v in p.act(obs).items()}, episodes
    )
    arena.close()
    return {"env_steps": arena.env_steps, "seconds": seconds, "returns": returns,
            "settings": settings}  # fmt: skip


def train_benchmarl(
    seed: int, steps: int, episodes: int, folder: str, ours: Mapping[str, Any]
) -> dict[str, Any]:
    """BenchMARL's MAPPO with ``ours``, the settings arena=marl's run reported (see the
    module docstring for what is matched and what is not)."""
    import torch
    from benchmarl.algorithms import MappoConfig
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig
    from marl_benchmarl_task import Mpe2Spread
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    torch.set_num_threads(1)
    exp = ExperimentConfig.get_from_yaml()
    frames = ours["num_envs"] * ours["rollout_steps"]
    exp.sampling_device = exp.train_device = exp.buffer_device = "cpu"
    exp.share_policy_params, exp.prefer_continuous_actions = True, False
    exp.gamma, exp.lr, exp.adam_eps = ours["gamma"], ours["lr"], 1e-8  # Paddle Adam's eps
    exp.clip_grad_norm, exp.clip_grad_val = True, ours["grad_clip"]
    exp.max_n_iters, exp.max_n_frames = None, steps
    exp.on_policy_collected_frames_per_batch = frames
    exp.on_policy_n_envs_per_worker = ours["num_envs"]
    exp.on_policy_n_minibatch_iters = ours["ppo_epochs"]  # passes, each over every minibatch
    exp.on_policy_minibatch_size = frames // ours["minibatches"]
    exp.evaluation, exp.render, exp.loggers, exp.create_json = False, False, [], False
    exp.checkpoint_interval, exp.checkpoint_at_end = 0, False
    exp.save_folder = folder
    algo = MappoConfig.get_from_yaml()
    algo.share_param_critic, algo.loss_critic_type = True, "l2"
    algo.clip_epsilon, algo.entropy_coef = ours["clip"], ours["entropy_coef"]
    algo.critic_coef, algo.lmbda = ours["value_coef"], ours["gae_lambda"]
    relu = {"layer_class": torch.nn.Linear, "activation_class": torch.nn.ReLU}
    model = MlpConfig(num_cells=list(ours["hidden"]), **relu)
    critic = MlpConfig(num_cells=[ours["critic_hidden"]] * 2, **relu)
    task = Mpe2Spread(name="SIMPLE_SPREAD", config={k: v for k, v in TASK.items()
                                                     if k != "continuous_actions"})  # fmt: skip
    experiment = Experiment(task=task, algorithm_config=algo,
                            model_config=model, critic_model_config=critic, seed=seed,
                            config=exp)  # fmt: skip
    t0 = time.perf_counter()
    experiment.run()
    seconds = time.perf_counter() - t0
    policy, names = experiment.policy, experiment.group_map["agent"]

    def act(obs: Mapping[str, Any]) -> dict[str, int]:
        x = torch.as_tensor([obs[n] for n in names], dtype=torch.float32)  # [3, 18]
        td = TensorDict({"agent": TensorDict({"observation": x}, batch_size=[len(names)])})
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            a = policy(td)["agent", "action"]  # [3] action indices
        return {n: int(a[i]) for i, n in enumerate(names)}

    return {"env_steps": experiment.total_frames, "seconds": seconds,
            "returns": evaluate(act, episodes)}  # fmt: skip


def _child(
    side: str, seed: int, a: argparse.Namespace, folder: str, settings: Mapping[str, Any]
) -> dict[str, Any]:
    """One side's training in its own process, one thread; its JSON line. ``settings``:
    what arena=marl ran with (BenchMARL's side is given them)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--side", side, "--seed", str(seed),
           "--steps", str(a.steps), "--eval-episodes", str(a.eval_episodes)]  # fmt: skip
    env = {**os.environ, **ONE_THREAD, "BENCH_FOLDER": folder,
           "BENCH_SETTINGS": json.dumps(dict(settings))}  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the {side} training (seed {seed}) failed: {tail[0]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["env_steps_per_s"] = r["env_steps"] / r["seconds"]
    r["return"] = statistics.fmean(r.pop("returns"))
    return r


def compare(a: argparse.Namespace) -> dict[str, Any]:
    """Both sides for every seed, alternating; the report."""
    import tempfile

    sys.path.insert(0, str(ROOT))
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    os.environ.update(ONE_THREAD)
    apply_cpu_tuning()  # as run.py (MKL on AMD), in this environment: both children get it
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "benchmarl": []}
    with tempfile.TemporaryDirectory() as folder:  # BenchMARL's experiment folders
        for seed in range(a.seeds):
            runs["ours"].append(_child("ours", seed, a, folder, {}))
            settings = runs["ours"][-1]["settings"]
            runs["benchmarl"].append(_child("benchmarl", seed, a, folder, settings))
    rate = {s: statistics.median(r["env_steps_per_s"] for r in runs[s]) for s in runs}
    ret = {s: [r["return"] for r in runs[s]] for s in runs}
    pairs = [o["env_steps_per_s"] / t["env_steps_per_s"] for o, t in zip(*runs.values())]
    ratio = statistics.median(pairs)
    ours_ret, low = statistics.fmean(ret["ours"]), min(ret["benchmarl"])

    def spread(xs: list[float]) -> dict[str, float]:
        sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
        return {"mean": round(statistics.fmean(xs), 2), "std": round(sd, 2),
                "min": round(min(xs), 2), "max": round(max(xs), 2)}  # fmt: skip

    return {
        "bench": "marl_vs_benchmarl",
        "task": "mpe2 simple_spread_v3",
        "settings": runs["ours"][0]["settings"],
        "env_steps": a.steps,
        "seeds": a.seeds,
        "eval_episodes": a.eval_episodes,
        "eval": "greedy, return summed over agents",
        "env_steps_per_s": {s: round(v, 1) for s, v in rate.items()},
        "env_steps_per_s_by_seed": {
            s: [round(r["env_steps_per_s"], 1) for r in runs[s]] for s in runs
        },  # fmt: skip
        "ratio_ours_over_benchmarl": round(ratio, 3),
        "ratio_by_seed": [round(x, 3) for x in pairs],
        "return": {s: spread(v) for s, v in ret.items()},
        "return_by_seed": {s: [round(x, 2) for x in v] for s, v in ret.items()},
        "targets": {
            "throughput_at_least_benchmarl": ratio >= 1.0,
            "return_inside_or_above_benchmarl_interval": ours_ret >= low,
        },  # fmt: skip
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: Sequence[str] | None = None) -> None:
    a = parse_args(argv)
    missing = missing_extras()
    if missing:
        sys.exit(f"error: bench/marl_vs_benchmarl.py needs {', '.join(missing)}: install the "
                 "bench and mpe extras, pip install -e '.[bench,mpe]'")  # fmt: skip
    if a.side == "ours":
        r = train_ours(a.seed, a.steps, a.eval_episodes)
    elif a.side == "benchmarl":
        ours = json.loads(os.environ["BENCH_SETTINGS"])
        r = train_benchmarl(a.seed, a.steps, a.eval_episodes, os.environ["BENCH_FOLDER"], ours)
    else:
        r = compare(a)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
