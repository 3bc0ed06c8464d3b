"""The samples a stream run has received: its log on disk and the same samples in memory.

HTTP handlers `SampleStore.add` (logged and fsynced, then visible) from the server's
threads; the training thread reads the first ``n`` samples, which never change once added.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.craftdata.stream import StreamData

from .log import END, SAMPLE, SampleLog, decode, encode
from .samples import SampleError

__all__ = ["LOG_FILE", "SampleStore"]

LOG_FILE = "stream/samples.log"  #: the sample log, in the run folder


class SampleStore:
    """Every acknowledged sample of a run, in arrival order (on disk and in memory).

    Args:
        spec: the stream's facts (its kind says whether samples carry labels or captions).
        run_dir: the run folder; the log is ``<run_dir>/stream/samples.log``.
    """

    def __init__(self, spec: StreamData, run_dir: str | os.PathLike) -> None:
        self.spec = spec
        self.log = SampleLog(Path(run_dir) / LOG_FILE)
        self._lock = threading.Lock()
        self._images: list[np.ndarray] = []  # each float32 [C, H, W]
        self._targets: list[Any] = []  # int labels or caption strings
        self.ended = False
        payloads, self.ended = self.log.open()
        for payload in payloads:
            self._keep(decode(payload))

    def _keep(self, arrays: dict[str, np.ndarray]) -> None:
        self._images.append(np.asarray(arrays["image"], np.float32))
        if "label" in arrays:
            self._targets.append(int(arrays["label"]))
        else:
            self._targets.append(str(arrays["caption"]))

    @property
    def count(self) -> int:
        """Samples received so far."""
        return len(self._targets)

    def add(self, arrays: dict[str, Any], index: int | None = None) -> int:
        """Log (fsynced) and keep one checked sample; return its arrival index.

        ``index``, when the client gives it, must be the next one (409 otherwise: a resend of
        a stored sample, or a gap); a sample after the end of the stream is refused (409).
        """
        with self._lock:
            n = self.count
            if self.ended:
                raise SampleError(f"the stream has ended ({n} samples); nothing more is taken", 409)
            if index is not None and index != n:
                raise SampleError(
                    f"sample index {index} is out of turn: the run has {n} samples, so the next "
                    f"index is {n} (ask GET /api/arena/stream, then send from there)",
                    409,
                )
            self.log.append(SAMPLE, encode(arrays))
            self._keep(arrays)
            return n

    def end(self) -> int:
        """End the stream (logged; a second end changes nothing); return the sample count."""
        with self._lock:
            if not self.ended:
                self.log.append(END)
                self.ended = True
            return self.count

    def images(self, idx: np.ndarray) -> np.ndarray:
        """float32 [B, C, H, W] of the samples at ``idx`` (arrival indices)."""
        if len(idx) == 0:
            return np.zeros((0, *self.spec.image_shape), np.float32)
        return np.stack([self._images[int(i)] for i in idx])

    def labels(self, idx: np.ndarray) -> np.ndarray:
        """int64 [B] labels of the samples at ``idx``."""
        return np.asarray([self._targets[int(i)] for i in idx], np.int64)

    def captions(self, idx: np.ndarray) -> list[str]:
        """The captions of the samples at ``idx``."""
        return [self._targets[int(i)] for i in idx]

    def info(self) -> dict[str, Any]:
        """What a client needs to send: counts, whether it ended, the accepted shape and labels."""
        n = self.count
        held = int(np.count_nonzero(self.spec.held_out(np.arange(n)))) if n else 0
        return {
            "count": n,
            "ended": self.ended,
            "train": n - held,
            "held_out": held,
            "kind": self.spec.kind,
            "channels": self.spec.channels,
            "image_size": self.spec.image_size,
            "classes": list(self.spec.classes),
            "max_request_bytes": self.spec.max_request_bytes,
        }

    def close(self) -> None:
        """Close the log (safe to call twice)."""
        self.log.close()
