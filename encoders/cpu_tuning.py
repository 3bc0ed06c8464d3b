"""CPU tuning: one explicit call, made before Paddle is imported, for settings left unset.

``run.py``, the bench scripts and the test suite call `apply_cpu_tuning` before they
import Paddle; importing the toolkit changes nothing. In your own scripts:

    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning
    apply_cpu_tuning()          # before anything imports paddle
    import paddle

What it sets (``python bench/core_bench.py`` prints the gain on your machine; the figures
measured here are in docs/results.json):

- ``import paddle`` sets ``OMP_NUM_THREADS=1`` when it is unset, so Paddle's MKL uses one
  core. We set it to the number of cores this process may use.
- Paddle's bundled MKL takes a slow path on AMD CPUs; ``MKL_DEBUG_CPU_TYPE=5`` takes the fast
  one there. We set it on AMD CPUs only (on Intel it does not help).

Nothing is changed if Paddle was already imported (too late to matter), for variables the
user set, or when ``PADDLECRAFT_CPU_TUNING=0``. What was applied is recorded in
``PADDLECRAFT_CPU_TUNING`` (e.g. ``OMP_NUM_THREADS=2``) for benchmarks and logs.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import warnings
from typing import Any

#: the lines ``import paddle`` prints to stderr that tell a user of this toolkit nothing:
#: its warning when ``OMP_NUM_THREADS`` > 1 (set on purpose: a thread per core)
PADDLE_IMPORT_NOISE = ("WARNING: OMP_NUM_THREADS set to ", "PLEASE USE OMP_NUM_THREADS WISELY.")


def _cpuinfo(field: str) -> str:
    """The first ``field`` of /proc/cpuinfo ("" where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_vendor() -> str:
    """The CPU vendor (``GenuineIntel``, ``AuthenticAMD``; "" where /proc/cpuinfo has none)."""
    return _cpuinfo("vendor_id")


def cpu_model() -> str:
    """The CPU's model name (``AMD EPYC ...``), recorded with every measured figure."""
    import platform

    return _cpuinfo("model name") or platform.processor() or platform.machine()


def apply_cpu_tuning() -> dict[str, str]:
    """Set unset thread/MKL variables before ``import paddle``; return what was set."""
    if os.environ.get("PADDLECRAFT_CPU_TUNING") == "0" or "paddle" in sys.modules:
        return {}
    applied: dict[str, str] = {}
    if "OMP_NUM_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        applied["OMP_NUM_THREADS"] = str(max(1, cores or 1))
    if "MKL_DEBUG_CPU_TYPE" not in os.environ and cpu_vendor() == "AuthenticAMD":
        applied["MKL_DEBUG_CPU_TYPE"] = "5"
    os.environ.update(applied)
    if applied:
        os.environ["PADDLECRAFT_CPU_TUNING"] = ",".join(f"{k}={v}" for k, v in applied.items())
    return applied


def import_paddle_quietly() -> None:
    """``import paddle`` without its import-time notes about settings made on purpose: the
    ``OMP_NUM_THREADS`` warning (`PADDLE_IMPORT_NOISE`) and the C++-extension builder's
    "No ccache found" (nothing here compiles extensions). Anything else it prints still
    reaches stderr, and an import error is raised as it is. Call after `apply_cpu_tuning`.
    The toolkit's packages that need Paddle import it this way (``paddlecraft/_needs_paddle.py``).

    Paddle's import makes logging handlers (on the root logger and on dozens of its own)
    that bind ``sys.stderr`` as it is then; those made while stderr is held back are bound
    to the real stderr again afterwards, so nothing logged later is lost."""
    if "paddle" in sys.modules:
        return
    real, buf = sys.stderr, io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(buf):
            warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)
            import paddle  # noqa: F401
    finally:
        _rebind_log_streams(buf, real)
        for line in buf.getvalue().splitlines(keepends=True):
            if not line.startswith(PADDLE_IMPORT_NOISE):
                sys.stderr.write(line)


def _rebind_log_streams(old: Any, new: Any) -> None:
    """Point every logging ``StreamHandler`` that writes to ``old`` at ``new`` instead."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):  # a PlaceHolder has none
            if isinstance(handler, logging.StreamHandler) and handler.stream is old:
                handler.setStream(new)
