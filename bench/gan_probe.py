"""Why the GAN arena trails PyTorch: the measurements behind the GAN note in docs/benchmarks.md.

    python bench/gan_probe.py      # ~2 minutes; needs torch (the 'bench' extra)

Prints, each measured in its own process:

1. one convolution of the discriminator (32 -> 64 channels, 3x3, 4x4 maps, batch 32),
   forward + backward: Paddle NCHW, Paddle NHWC, PyTorch;
2. the plain-Paddle DCGAN of ``gan_bench.py``: eager vs ``paddle.jit.to_static``;
3. the same under ``FLAGS_use_mkldnn=1`` with ``to_static`` (Paddle's oneDNN kernels
   apply only to static programs): steps/s, or the error Paddle raises;
4. the GAN arena with Paddle on one OpenMP thread vs the toolkit's default (all cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gan_bench import _PADDLE, _PADDLE_RAW, ROOT, _child

_CONV = r"""
import json, time
{setup}
def step():
{step}
for _ in range(20): step()
t = time.perf_counter()
for _ in range(300): step()
print(json.dumps({{"ms": (time.perf_counter() - t) / 300 * 1e3}}))
"""

_CONV_PADDLE = (
    "import paddle\n"
    "conv = paddle.nn.Conv2D(32, 64, 3, padding=1, data_format={fmt!r})\n"
    "x = paddle.randn({shape}); x.stop_gradient = False"
)
_CONV_TORCH = (
    "import torch\n"
    "conv = torch.nn.Conv2d(32, 64, 3, padding=1)\n"
    "x = torch.randn(32, 32, 4, 4, requires_grad=True)"
)
_STATIC = (
    "G = paddle.jit.to_static(G, full_graph=True); D = paddle.jit.to_static(D, full_graph=True)"
)


def _conv_ms(setup: str) -> float:
    return _child(_CONV.format(setup=setup, step="    conv(x).sum().backward()"))["ms"]


def _error_line(code: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, **env},
    )  # fmt: skip
    if out.returncode == 0:
        return "ran: " + out.stdout.strip().splitlines()[-1]
    lines = [ln.strip() for ln in out.stderr.splitlines() if "Error" in ln]
    return lines[-1] if lines else "failed"


def probe(steps: int = 150) -> dict:
    res: dict = {}
    res["conv_fwd_bwd_ms"] = {
        "paddle_nchw": _conv_ms(_CONV_PADDLE.format(fmt="NCHW", shape=[32, 32, 4, 4])),
        "paddle_nhwc": _conv_ms(_CONV_PADDLE.format(fmt="NHWC", shape=[32, 4, 4, 32])),
        "torch": _conv_ms(_CONV_TORCH),
    }
    res["plain_paddle_steps_per_s"] = {
        "eager": _child(_PADDLE_RAW.format(root=str(ROOT), steps=steps, wrap=""))["steps_per_s"],
        "to_static": _child(_PADDLE_RAW.format(root=str(ROOT), steps=steps, wrap=_STATIC))[
            "steps_per_s"
        ],
    }
    res["onednn_to_static"] = _error_line(
        _PADDLE_RAW.format(root=str(ROOT), steps=steps, wrap=_STATIC), {"FLAGS_use_mkldnn": "1"}
    )
    arena = _PADDLE.format(root=str(ROOT), conf=str(ROOT / "conf"), steps=steps)
    res["arena_steps_per_s"] = {
        "default_threads": _child(arena)["steps_per_s"],
        "one_thread": _child(arena, {"OMP_NUM_THREADS": "1"})["steps_per_s"],
    }
    return res


def main() -> None:
    r = probe()
    c, p, a = r["conv_fwd_bwd_ms"], r["plain_paddle_steps_per_s"], r["arena_steps_per_s"]
    print(json.dumps(r, indent=2))
    print(
        f"conv 32->64 3x3 fwd+bwd: Paddle {c['paddle_nchw']:.2f} ms (NHWC {c['paddle_nhwc']:.2f}) "
        f"vs PyTorch {c['torch']:.2f} ms = {c['paddle_nchw'] / c['torch']:.1f}x slower\n"
        f"plain Paddle DCGAN: eager {p['eager']:.0f} steps/s, to_static {p['to_static']:.0f}\n"
        f"oneDNN (FLAGS_use_mkldnn=1, to_static): {r['onednn_to_static']}\n"
        f"GAN arena: default threads {a['default_threads']:.0f} steps/s, one thread {a['one_thread']:.0f}"
    )


if __name__ == "__main__":
    main()
