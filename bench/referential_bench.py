"""Referential game: steps/s of the default game (``arena=referential``) against the same
game written in plain PyTorch.

The same game as ``conf/arena/referential.yaml``: attribute world 2 x 10 (one-hot inputs,
90 training objects), batch 32, vocabulary 64 (16 when its figures were measured), 2 symbols (sizes read from the config); linear agents (the default
``cell: linear``): the speaker a linear object embedding (128) and a linear map to both
positions' logits, one Gumbel-softmax straight-through sample per symbol (temperature 1);
the listener a linear reading (128) of the symbols so far after each symbol and a linear
head to 2 x 10 logits, cross-entropy summed over attributes at the message's end; one Adam (1e-3) per agent, one
backward over the joint loss, and the same per-step metrics (loss, accuracy) read on the
host. Each framework runs in its own process with the same CPU tuning as ``run.py`` (thread
count, MKL), alternating, three times; medians are compared. Needs ``pip install
torch==2.13.0`` (the ``bench`` extra). Run: ``python bench/referential_bench.py [--quick]
[--cpu-time]`` (``--cpu-time``: one thread each, timed by CPU time, for a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's paddlecraft, not an installed one

_PADDLE = r"""
import os, sys, time, json
sys.path.insert(0, {root!r})
from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning; apply_cpu_tuning()  # as run.py
from hydra import compose, initialize_config_dir
from paddlecraft.arenas import register_configs
from paddlecraft.arenas.engine.app import build_agents, build_arena
from paddlecraft.arenas.engine.rng import seed_everything
register_configs()
with initialize_config_dir(config_dir={conf!r}, version_base="1.3"):
    cfg = compose("config", overrides=["arena=referential"])
seed_everything(0)
arena = build_arena(cfg, build_agents(cfg))
batches = list(arena.batches(0)) + list(arena.batches(1)) + list(arena.batches(2))
batches = (batches * 10)[: {steps} + 10]
for b in batches[:10]: arena.train_step(b)
t = time.{clock}()
for b in batches[10:]: arena.train_step(b)
import paddle
print(json.dumps({{"steps_per_s": {steps} / (time.{clock}() - t),
                  "threads": paddle.get_flags("FLAGS_paddle_num_threads")["FLAGS_paddle_num_threads"],
                  "omp": os.environ.get("OMP_NUM_THREADS")}}))
"""

_TORCH = r"""
import os, time, json, itertools, numpy as np, torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
if {one_thread}: torch.set_num_threads(1)
A, V, VOCAB, L, B, H, E = {game}
every = np.array(list(itertools.product(range(V), repeat=A)))
rng = np.random.default_rng(0)
train = every[rng.permutation(len(every))[:90]]
x_all = torch.zeros(len(train), A * V); x_all[torch.arange(len(train))[:, None], torch.tensor(np.arange(A) * V + train)] = 1
m_all = torch.tensor(train)

class Sender(nn.Module):  # cell=linear: every position read off the object at once
    def __init__(self):
        super().__init__()
        self.obj, self.out = nn.Linear(A * V, H), nn.Linear(H, VOCAB * L)
        self.embed = nn.Linear(VOCAB, E, bias=False)  # kept as in the arena (unused by linear)
    def forward(self, x):
        logits = self.out(self.obj(x)).reshape(x.shape[0], L, VOCAB)  # every position at once
        u = torch.rand_like(logits).clamp(1e-10, 1 - 1e-7)
        soft = F.softmax((logits - torch.log((-torch.log(u)).clamp(min=1e-10))) / 1.0, -1)
        hard = F.one_hot(soft.argmax(-1), VOCAB).float()
        return hard - soft.detach() + soft  # [B, L, VOCAB]

class Receiver(nn.Module):  # cell=linear: a linear reading of the symbols so far
    def __init__(self):
        super().__init__()
        self.read, self.head = nn.Linear(L * VOCAB, H), nn.Linear(H, A * V)
        self.seen = torch.tril(torch.ones(L, L)).reshape(1, L, L, 1)
    def forward(self, msg):
        upto = (msg.unsqueeze(1) * self.seen).reshape(msg.shape[0], L, L * VOCAB)
        return self.head(self.read(upto)).reshape(msg.shape[0], L, A, V)

s, r = Sender(), Receiver()
os_, or_ = torch.optim.Adam(s.parameters(), 1e-3), torch.optim.Adam(r.parameters(), 1e-3)
def step(idx):
    x, m = x_all[idx], m_all[idx]
    logits = r(s(x))  # [B, L, A, V]
    want = m[:, None, :].expand(-1, L, -1)
    ce = F.cross_entropy(logits.reshape(-1, V), want.reshape(-1), reduction="none").reshape(B, L, A).sum(-1)
    acc = (logits.argmax(-1) == want).float().min(-1).values
    w = F.one_hot(torch.full((B,), L - 1), L).float()  # where messages end (fixed length)
    loss = (w * ce).sum(1).mean()
    os_.zero_grad(); or_.zero_grad(); loss.backward(); os_.step(); or_.step()
    return float(loss), float((w * acc).sum(1).mean())
idxs = [torch.tensor(rng.integers(90, size=B)) for _ in range({steps} + 10)]
for i in idxs[:10]: step(i)
t = time.{clock}()
for i in idxs[10:]: step(i)
print(json.dumps({{"steps_per_s": {steps} / (time.{clock}() - t), "threads": torch.get_num_threads(),
                  "omp": os.environ.get("OMP_NUM_THREADS")}}))
"""


def _child(code: str, env: dict | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env or dict(os.environ)
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "child failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _game() -> str:
    """``A, V, VOCAB, L, B, H, E`` of the shipped default game, for the PyTorch twin."""
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arena=referential"])
    a, sp = cfg.arena, cfg.agents.speaker
    if sp.cell != "linear" or cfg.agents.listener.cell != "linear":
        raise RuntimeError("the PyTorch twin is written for the default linear agents")
    vals = (a.n_attributes, a.n_values, a.vocab_size, a.max_len, a.batch_size)
    return ", ".join(str(int(v)) for v in (*vals, sp.hidden_size, sp.embed_size))


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def bench_referential_vs_torch(quick: bool = False, cpu_time: bool = False) -> dict:
    """Median steps/s of the default referential game and its PyTorch twin, and their ratio.

    ``cpu_time``: both on one thread, timed by the process's CPU time instead of the wall
    clock. On a machine shared with other jobs the wall clock mostly measures the
    scheduler (PyTorch's two spinning OpenMP threads lose the most there); one thread
    each and CPU time compare the work each framework does per step.
    """
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise RuntimeError("needs PyTorch: pip install torch==2.13.0 (the 'bench' extra)") from e
    from paddlecraft.encoders.cpu_tuning import cpu_model

    steps = 200 if quick else 1000
    repeats = 2 if quick else 3
    game = _game()
    clock = "process_time" if cpu_time else "perf_counter"
    env = {**os.environ, "OMP_NUM_THREADS": "1"} if cpu_time else dict(os.environ)
    pd_code = _PADDLE.format(root=str(ROOT), conf=str(ROOT / "conf"), steps=steps, clock=clock)
    th_code = _TORCH.format(steps=steps, game=game, clock=clock, one_thread=cpu_time)
    pd_runs, th_runs = [], []
    for _ in range(repeats):  # alternating, so each pair saw about the same machine load
        pd_runs.append(_child(pd_code, env))
        th_runs.append(_child(th_code, env))
    pd_rates = [r["steps_per_s"] for r in pd_runs]
    th_rates = [r["steps_per_s"] for r in th_runs]
    pd_m, th_m = _median(pd_rates), _median(th_rates)
    pairs = [a / b for a, b in zip(pd_rates, th_rates)]
    return {
        "paddlecraft_steps_per_s": pd_m,
        "torch_steps_per_s": th_m,
        "ratio": pd_m / th_m,
        "ratio_pairs": pairs,
        "threads": {"paddle": pd_runs[0], "torch": th_runs[0]},
        "clock": "process CPU time, 1 thread each" if cpu_time else "wall clock",
        "machine": {"cpu": cpu_model(), "load_avg_1m": os.getloadavg()[0]},
        "target": ">= 1.0",
        "steps": steps,
        "repeats": repeats,
        "summary": f"referential arena {pd_m:.0f} steps/s vs PyTorch {th_m:.0f} = "
        f"{pd_m / th_m:.2f}x (target >= 1.0; pairs {min(pairs):.2f}-{max(pairs):.2f})",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="one thread each, timed by process CPU time (for a machine shared with other jobs)",
    )
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    apply_cpu_tuning()  # in this process's environment: every child (peers too) inherits it
    args = parser.parse_args()
    print(json.dumps(bench_referential_vs_torch(args.quick, args.cpu_time), indent=2))


if __name__ == "__main__":
    main()
