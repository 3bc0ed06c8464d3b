"""GAN: steps/s of the GAN arena against an equivalent PyTorch CPU DCGAN.

Same networks as ``conf/arena/gan.yaml`` on 8x8 digits (generator: linear -> BN -> ReLU,
two ConvTranspose k4 s2 + BN + ReLU, conv3x3 + sigmoid; discriminator: conv k4 s2 +
LeakyReLU, conv k3 + LeakyReLU, linear 64 + LeakyReLU, linear 1), batch 32, Adam(5e-4,
betas 0.5/0.999), least-squares loss, one discriminator and one generator update per
step, and the same per-step logging (losses, D(x), D(G(z)), gradient norms). Each
framework runs in its own process (their OpenMP runtimes must not share one), alternating,
three times; medians are compared. A third process runs the same DCGAN hand-written in
plain Paddle (no toolkit), which splits the gap into the toolkit's share and Paddle's;
that share is also given pair by pair (adjacent runs saw about the same machine load)
and as CPU time per step. All children get the same CPU tuning (thread count, MKL) as
``run.py``. Needs ``pip install torch==2.13.0`` (the ``bench`` extra). Run:
``python bench/gan_bench.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
    cfg = compose("config", overrides=["arena=gan"])
seed_everything(0)
arena = build_arena(cfg, build_agents(cfg))
batches = []
epoch = 0
while len(batches) < {steps} + 10:
    batches += list(arena.batches(epoch)); epoch += 1
for b in batches[:10]: arena.train_step(b)
t, c = time.perf_counter(), time.process_time()
for b in batches[10:10 + {steps}]: arena.train_step(b)
print(json.dumps({{"steps_per_s": {steps} / (time.perf_counter() - t),
                  "cpu_ms_per_step": (time.process_time() - c) / {steps} * 1e3, "batch": arena.batch_size,
                  "env": {{k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_DEBUG_CPU_TYPE")}}}}))
"""

_PADDLE_RAW = r"""
import sys
sys.path.insert(0, {root!r})
from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning; apply_cpu_tuning()  # the arena's env (threads, MKL)
import os, time, json, numpy as np, paddle
from paddle import nn
paddle.seed(0)
B, Z = 32, 32
G = nn.Sequential(
    nn.Linear(Z, 64 * 2 * 2, bias_attr=False), nn.Unflatten(1, (64, 2, 2)), nn.BatchNorm2D(64), nn.ReLU(),
    nn.Conv2DTranspose(64, 32, 4, 2, 1, bias_attr=False), nn.BatchNorm2D(32), nn.ReLU(),
    nn.Conv2DTranspose(32, 32, 4, 2, 1, bias_attr=False), nn.BatchNorm2D(32), nn.ReLU(),
    nn.Conv2D(32, 1, 3, padding=1), nn.Sigmoid())
D = nn.Sequential(
    nn.Conv2D(1, 32, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2D(32, 64, 3, 1, 1), nn.LeakyReLU(0.2),
    nn.Flatten(), nn.Linear(64 * 4 * 4, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
{wrap}
og = paddle.optimizer.Adam(5e-4, 0.5, 0.999, parameters=G.parameters())
od = paddle.optimizer.Adam(5e-4, 0.5, 0.999, parameters=D.parameters())
from sklearn.datasets import load_digits
x_all = paddle.to_tensor((load_digits().images / 16.0).astype("float32")).unsqueeze(1)
def norm(ps): return float(paddle.sqrt(paddle.add_n([(p.grad ** 2).sum() for p in ps if p.grad is not None])))
def step(x):
    fake = G(paddle.randn([B, Z]))
    d_real, d_fake = D(x), D(fake.detach())
    ld = 0.5 * ((d_real - 1) ** 2).mean() + 0.5 * (d_fake ** 2).mean()
    ld.backward(); nd = norm(D.parameters()); od.step(); od.clear_grad(set_to_zero=False)
    for p in D.parameters(): p.stop_gradient = True
    lg = 0.5 * ((D(fake) - 1) ** 2).mean()
    lg.backward(); ng = norm(G.parameters()); og.step(); og.clear_grad(set_to_zero=False)
    for p in D.parameters(): p.stop_gradient = False
    return {{"d_loss": float(ld), "g_loss": float(lg), "d_real": float(d_real.mean()),
            "d_fake": float(d_fake.mean()), "d_grad_norm": nd, "g_grad_norm": ng}}
rng = np.random.default_rng(0)
idx = [rng.choice(len(x_all), B, replace=False) for _ in range({steps} + 10)]
for i in idx[:10]: step(x_all[paddle.to_tensor(i)])
t, c = time.perf_counter(), time.process_time()
for i in idx[10:]: step(x_all[paddle.to_tensor(i)])
print(json.dumps({{"steps_per_s": {steps} / (time.perf_counter() - t),
                  "cpu_ms_per_step": (time.process_time() - c) / {steps} * 1e3,
                  "env": {{k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_DEBUG_CPU_TYPE")}}}}))
"""

_TORCH = r"""
import time, json, torch, numpy as np
from torch import nn
torch.manual_seed(0)
B, Z = 32, 32
G = nn.Sequential(
    nn.Linear(Z, 64 * 2 * 2, bias=False), nn.Unflatten(1, (64, 2, 2)), nn.BatchNorm2d(64), nn.ReLU(),
    nn.ConvTranspose2d(64, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
    nn.ConvTranspose2d(32, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
    nn.Conv2d(32, 1, 3, padding=1), nn.Sigmoid())
D = nn.Sequential(
    nn.Conv2d(1, 32, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(32, 64, 3, 1, 1), nn.LeakyReLU(0.2),
    nn.Flatten(), nn.Linear(64 * 4 * 4, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
og = torch.optim.Adam(G.parameters(), 5e-4, betas=(0.5, 0.999))
od = torch.optim.Adam(D.parameters(), 5e-4, betas=(0.5, 0.999))
from sklearn.datasets import load_digits
x_all = torch.tensor((load_digits().images / 16.0).astype("float32")).unsqueeze(1)
def norm(ps): return float(torch.sqrt(sum((p.grad ** 2).sum() for p in ps if p.grad is not None)))
def step(x):
    fake = G(torch.randn(B, Z))
    d_real, d_fake = D(x), D(fake.detach())
    ld = 0.5 * ((d_real - 1) ** 2).mean() + 0.5 * (d_fake ** 2).mean()
    od.zero_grad(set_to_none=True); ld.backward(); nd = norm(D.parameters()); od.step()
    for p in D.parameters(): p.requires_grad_(False)
    lg = 0.5 * ((D(fake) - 1) ** 2).mean()
    og.zero_grad(set_to_none=True); lg.backward(); ng = norm(G.parameters()); og.step()
    for p in D.parameters(): p.requires_grad_(True)
    return {{"d_loss": ld.item(), "g_loss": lg.item(), "d_real": d_real.mean().item(),
            "d_fake": d_fake.mean().item(), "d_grad_norm": nd, "g_grad_norm": ng}}
rng = np.random.default_rng(0)
idx = [rng.choice(len(x_all), B, replace=False) for _ in range({steps} + 10)]
for i in idx[:10]: step(x_all[i])
t = time.perf_counter()
for i in idx[10:]: step(x_all[i])
print(json.dumps({{"steps_per_s": {steps} / (time.perf_counter() - t), "threads": torch.get_num_threads()}}))
"""


def _child(code: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (``env``: extra variables); its last stdout line is JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "child failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_gan_vs_torch(steps: int = 300, repeats: int = 3) -> dict:
    """Median steps/s of the GAN arena and the PyTorch DCGAN, and their ratio."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise RuntimeError("needs PyTorch: pip install torch==2.13.0 (the 'bench' extra)") from e
    pd_runs, raw_runs, th_rates = [], [], []
    for _ in range(repeats):  # alternating, so each pair saw about the same machine load
        pd_runs.append(_child(_PADDLE.format(root=str(ROOT), conf=str(ROOT / "conf"), steps=steps)))
        raw_runs.append(_child(_PADDLE_RAW.format(root=str(ROOT), steps=steps, wrap="")))
        th_rates.append(_child(_TORCH.format(steps=steps))["steps_per_s"])
    pd_rates = [r["steps_per_s"] for r in pd_runs]
    raw_rates = [r["steps_per_s"] for r in raw_runs]
    pd_m, raw_m, th_m = (_median(r) for r in (pd_rates, raw_rates, th_rates))
    # the toolkit's own cost, pair by pair: wall-clock speed and CPU time per step
    pairs = [a / b for a, b in zip(pd_rates, raw_rates)]
    cpu_pairs = [b["cpu_ms_per_step"] / a["cpu_ms_per_step"] for a, b in zip(pd_runs, raw_runs)]
    return {
        "paddlecraft_steps_per_s": pd_m,
        "hand_written_paddle_steps_per_s": raw_m,
        "torch_steps_per_s": th_m,
        "ratio": pd_m / th_m,
        "toolkit_vs_hand_written_paddle": pd_m / raw_m,
        "toolkit_vs_hand_written_paddle_pairs": pairs,
        "toolkit_vs_hand_written_paddle_cpu_time": _median(cpu_pairs),
        "hand_written_paddle_vs_torch": raw_m / th_m,
        "env": {"arena": pd_runs[0]["env"], "hand_written_paddle": raw_runs[0]["env"]},
        "target": ">= 1.0",
        "steps": steps,
        "repeats": repeats,
        "summary": f"GAN arena {pd_m:.0f} steps/s vs PyTorch {th_m:.0f} = {pd_m / th_m:.2f}x (target >= 1.0); "
        f"the same DCGAN hand-written in Paddle {raw_m:.0f} = {raw_m / th_m:.2f}x PyTorch, "
        f"so the arena runs at {pd_m / raw_m:.2f}x plain Paddle (pairs "
        f"{min(pairs):.2f}-{max(pairs):.2f}; CPU time per step {_median(cpu_pairs):.2f}x)",
    }


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    apply_cpu_tuning()  # in this process's environment: every child (peers too) inherits it
    quick = parser.parse_args().quick
    print(json.dumps(bench_gan_vs_torch(60 if quick else 300, 2 if quick else 3), indent=2))


if __name__ == "__main__":
    main()
