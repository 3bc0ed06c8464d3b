"""ResNet-18 training steps: through a PaddleCraft agent vs plain ``paddle.vision`` vs PyTorch.

Each peer runs in its own process with the same threads, batch (32 x 3 x 64 x 64, 10
classes), optimizer (Adam 1e-3) and architecture (torchvision's ResNet-18: 7x7 stem,
max-pool, basic blocks 2-2-2-2). The PyTorch peer is Hugging Face ``transformers``'
``ResNetForImageClassification`` configured as ResNet-18 (torchvision's wheel does not import
against the CPU build of torch here). Prints steps/s and the ratios:

    python bench/resnet_bench.py [--quick]      # or: python bench/run.py --only resnet
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_COMMON = r"""
import sys, time, json
sys.path.insert(0, {root!r})
from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning; apply_cpu_tuning()  # as run.py
import numpy as np
rng = np.random.default_rng(0)
B, STEPS = {batch}, {steps}
xs = rng.standard_normal((STEPS + 3, B, 3, {image}, {image})).astype("float32")
ys = rng.integers(0, 10, (STEPS + 3, B)).astype("int64")
def timed(step):
    for i in range(3): step(xs[i], ys[i])          # warm-up
    t = time.perf_counter()
    for i in range(3, STEPS + 3): step(xs[i], ys[i])
    return STEPS / (time.perf_counter() - t)
"""

_AGENT = (
    _COMMON
    + r"""
import paddle
from paddlecraft.agents import Classifier
agent = Classifier("clf", encoder={{"_target_": "paddlecraft.encoders.ResNetEncoder", "depth": 18,
                                     "num_classes": 10, "in_channels": 3}}, lr=1e-3, seed=0)
def step(x, y):
    agent.update(agent.loss(agent.to_tensor(x), agent.to_tensor(y)))
print(json.dumps({{"steps_per_s": timed(step)}}))
"""
)

_PLAIN = (
    _COMMON
    + r"""
import paddle, paddle.nn.functional as F
paddle.seed(0)
net = paddle.vision.models.resnet18(num_classes=10)
opt = paddle.optimizer.Adam(1e-3, parameters=net.parameters())
def step(x, y):
    loss = F.cross_entropy(net(paddle.to_tensor(x)), paddle.to_tensor(y))
    loss.backward(); opt.step(); opt.clear_grad(set_to_zero=False)
print(json.dumps({{"steps_per_s": timed(step)}}))
"""
)

_TORCH = (
    _COMMON
    + r"""
import os, torch
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
torch.manual_seed(0)
from transformers import ResNetConfig, ResNetForImageClassification
cfg = ResNetConfig(layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512],
                   embedding_size=64, num_labels=10)
net = ResNetForImageClassification(cfg).train()
opt = torch.optim.Adam(net.parameters(), 1e-3)
def step(x, y):
    loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)).logits, torch.from_numpy(y))
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
print(json.dumps({{"steps_per_s": timed(step), "threads": torch.get_num_threads()}}))
"""
)


def _child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; its last stdout line is JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=dict(os.environ)
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "child failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_resnet(steps: int = 30, repeats: int = 3, batch: int = 32, image: int = 64) -> dict:
    """Median steps/s of the three peers (interleaved repeats) and their ratios, on
    ``batch`` RGB images of ``image`` x ``image`` pixels."""
    rates: dict[str, list[float]] = {"agent": [], "paddle_vision": [], "torch": []}
    for _ in range(repeats):
        for key, code in (("agent", _AGENT), ("paddle_vision", _PLAIN), ("torch", _TORCH)):
            try:
                child = code.format(root=str(ROOT), steps=steps, batch=batch, image=image)
                rates[key].append(_child(child)["steps_per_s"])
            except RuntimeError:
                if key != "torch":
                    raise
    med = {k: sorted(v)[len(v) // 2] if v else float("nan") for k, v in rates.items()}
    agent_time_ratio = med["paddle_vision"] / med["agent"]
    return {
        **{f"{k}_steps_per_s": v for k, v in med.items()},
        "agent_time_vs_paddle_vision": agent_time_ratio,
        "agent_vs_torch_speed": med["agent"] / med["torch"],
        "paddle_vision_vs_torch_speed": med["paddle_vision"] / med["torch"],
        "target": "agent time <= 1.05x paddle.vision",
        "steps": steps,
        "repeats": repeats,
        "summary": f"ResNet-18 step through an agent {med['agent']:.2f} steps/s vs plain "
        f"paddle.vision {med['paddle_vision']:.2f}: {agent_time_ratio:.3f}x the time "
        f"(target <= 1.05); PyTorch {med['torch']:.2f} steps/s "
        f"(agent = {med['agent'] / med['torch']:.2f}x its speed)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    print(json.dumps(bench_resnet(8 if quick else 30, 1 if quick else 3), indent=2))


if __name__ == "__main__":
    main()
