"""Per-agent mixed precision (``agents.<name>.amp: off | bf16 | fp16``) with Paddle AMP.

An agent's `Amp` runs its forward under ``paddle.amp.auto_cast`` (O1: per-op
white/black lists; O2: parameters cast by ``paddle.amp.decorate``, float32 master
weights kept by the optimizer), returns float32 outputs so losses stay in float32, and
for fp16 scales the loss with a ``GradScaler`` (skipping steps whose gradients
overflow). Settings are refused before any work when the device cannot honour them:
Paddle 3.3.1's ``auto_cast`` has no effect on CPU (it warns that AMP needs a CUDA, XPU
or custom device), so a CPU agent asking for AMP gets one clear error, unless a probe
shows this Paddle build does cast on CPU.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import cache
from typing import Any

import paddle

from paddlecraft.errors import AmpError

#: setting value -> Paddle dtype
AMP_DTYPES: dict[str, str | None] = {"off": None, "bf16": "bfloat16", "fp16": "float16"}
AMP_LEVELS = ("O1", "O2")


@cache
def autocast_casts_on_cpu(dtype: str) -> bool:
    """Whether ``auto_cast(dtype=...)`` really computes a CPU matmul in ``dtype`` (probed once)."""
    x = paddle.ones([2, 2], dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "amp_guard can only be enabled on CUDAPlace..."
        with paddle.amp.auto_cast(level="O1", dtype=dtype):
            out = paddle.matmul(x, x)
    return str(out.dtype).endswith(dtype)


def check_amp(mode: str, level: str, device: str, setting: str) -> None:
    """Raise `AmpError` unless ``mode``/``level`` are valid and ``device`` can run them."""
    if mode not in AMP_DTYPES:
        raise AmpError(f"{setting}={mode!r}: expected one of {list(AMP_DTYPES)}")
    if level not in AMP_LEVELS:
        raise AmpError(f"{setting}_level={level!r}: expected one of {list(AMP_LEVELS)}")
    dtype = AMP_DTYPES[mode]
    if dtype and device == "cpu" and not autocast_casts_on_cpu(dtype):
        raise AmpError(
            f"{setting}={mode} on CPU: Paddle {paddle.__version__}'s auto_cast has no effect "
            f"on CPU (AMP needs a GPU); set {setting}=off, or run the agent on a GPU "
            f"({setting.rsplit('.', 1)[0]}.device=gpu)"
        )


class Amp:
    """Mixed-precision state of one agent: autocast, optional O2 decoration, fp16 loss scaling.

    Args:
        mode: ``off``, ``bf16`` or ``fp16``.
        level: ``O1`` or ``O2``.
        device: the agent's resolved device (``cpu``, ``gpu:0``...).
        setting: the config key, for error messages (``agents.classifier.amp``).
    """

    def __init__(self, mode: str, level: str, device: str, setting: str) -> None:
        check_amp(mode, level, device, setting)
        self.mode, self.level = mode, level
        self.dtype = AMP_DTYPES[mode]
        self.scaler: paddle.amp.GradScaler | None = (
            paddle.amp.GradScaler(init_loss_scaling=2.0**15) if mode == "fp16" else None
        )

    @property
    def enabled(self) -> bool:
        """Whether mixed precision is on."""
        return self.dtype is not None

    def decorate(self, model: Any, optimizer: Any) -> None:
        """O2: cast ``model``'s parameters to the AMP dtype; the optimizer keeps float32 masters."""
        if self.enabled and self.level == "O2":
            paddle.amp.decorate(
                models=model,
                optimizers=optimizer,
                level="O2",
                dtype=self.dtype,
                master_weight=True,
            )

    def autocast(self) -> Any:
        """A context running ops in the AMP dtype (a no-op context when off)."""
        if not self.enabled:
            return nullcontext()
        return paddle.amp.auto_cast(level=self.level, dtype=self.dtype)

    @contextmanager
    def forward(self) -> Iterator[None]:
        """Autocast for a forward pass (outputs are cast back by `to_float32`)."""
        with self.autocast():
            yield

    def to_float32(self, out: Any) -> Any:
        """``out`` with every half-precision tensor (also inside tuples/lists/dicts) in float32."""
        if isinstance(out, paddle.Tensor):
            return out.astype("float32") if out.dtype in (paddle.float16, paddle.bfloat16) else out
        if isinstance(out, (tuple, list)):
            return type(out)(self.to_float32(o) for o in out)
        if isinstance(out, dict):
            return {k: self.to_float32(v) for k, v in out.items()}
        return out

    def backward(self, loss: paddle.Tensor) -> None:
        """``loss.backward()``, scaled for fp16."""
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def unscale(self, optimizer: Any) -> None:
        """Divide fp16 gradients by the loss scale in place (before reading or clipping them)."""
        if self.scaler:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: Any) -> None:
        """Optimizer step (fp16: skipped when gradients overflowed; the scale adapts)."""
        if self.scaler:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()

    def state_dict(self) -> dict:
        """The loss scaler's state (JSON-able; empty unless fp16)."""
        if not self.scaler:
            return {}
        return {k: _plain(v) for k, v in self.scaler.state_dict().items()}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict`."""
        if self.scaler and state:
            self.scaler.load_state_dict(state)


def _plain(v: Any) -> Any:
    if isinstance(v, paddle.Tensor):
        return v.numpy().tolist()
    return v.item() if hasattr(v, "item") else v
