"""Devices per agent: ``cpu``, ``gpu`` or ``gpu:N``, checked before any work starts."""

from __future__ import annotations

import re

import paddle

from paddlecraft.errors import DeviceError

_DEVICE_RE = re.compile(r"^(cpu|gpu)(?::(\d+))?$")


def resolve_device(spec: str, setting: str = "device") -> str:
    """Check a device string and return Paddle's form (``cpu`` or ``gpu:N``).

    Paddle's own error for a GPU on a CPU-only build is garbled (PADDLE_NOTES), so this
    raises one clear line naming the setting and the fix.
    """
    m = _DEVICE_RE.match(str(spec).strip().lower())
    if not m:
        raise DeviceError(
            f"{setting}={spec!r} is not a device: use cpu, gpu or gpu:N (e.g. {setting}=cpu)"
        )
    kind, index = m.group(1), m.group(2)
    if kind == "cpu":
        if index not in (None, "0"):
            raise DeviceError(f"{setting}={spec!r}: CPU devices take no index; use {setting}=cpu")
        return "cpu"
    if not paddle.device.is_compiled_with_cuda():
        raise DeviceError(
            f"{setting}={spec!r} asks for a GPU but this Paddle build is CPU-only; "
            f"set {setting}=cpu, or install paddlepaddle-gpu on a machine with a GPU"
        )
    count = paddle.device.cuda.device_count()
    i = int(index or 0)
    if i >= count:
        raise DeviceError(
            f"{setting}={spec!r} but this machine has {count} GPU(s) (gpu:0..gpu:{count - 1}); "
            f"set {setting}=gpu:0" + (" or cpu" if count else ", or cpu")
        )
    return f"gpu:{i}"


def place_of(device: str) -> paddle.CPUPlace | paddle.CUDAPlace:
    """The Paddle place for a device string from `resolve_device`."""
    if device == "cpu":
        return paddle.CPUPlace()
    return paddle.CUDAPlace(int(device.split(":")[1]))
