"""The stream's append-only sample log: every acknowledged sample, in arrival order, on disk.

``<run>/stream/samples.log`` is one file: a header line, then records:

    kind (4 bytes: b"SMPL" a sample, b"END." the end of the stream)
    length (uint32, little-endian)   crc32 of the payload (uint32)   payload (length bytes)

A sample's payload is an ``.npz`` (``numpy.savez``, read back with ``allow_pickle=False``):
``image`` float32 [C, H, W] and ``label`` int64 [] or ``caption`` str []. `SampleLog.append`
writes the record with one ``write`` on a file opened for appending, then ``fsync``s it:
the HTTP handler answers 200 only after that returns, so nothing acknowledged is lost.

Why one log and not one file per sample: one ``fsync`` per sample (a new file also needs
its folder synced), no folder of tens of thousands of files, and the order is the file's
order. A crash mid-write leaves at most one torn record at the end, never acknowledged: the
CRC finds it and `SampleLog.open` cuts it off. A bad record with good data after it
is not a crash but damage, and is refused (`StreamLogError`).
"""

from __future__ import annotations

import io
import logging
import os
import struct
import threading
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.errors import PaddleCraftError

__all__ = ["END", "HEADER", "SAMPLE", "SampleLog", "StreamLogError", "decode", "encode"]

log = logging.getLogger("paddlecraft")

HEADER = b"paddlecraft-stream-1\n"  #: the first bytes of a sample log
SAMPLE = b"SMPL"  #: a record holding one sample
END = b"END."  #: the record that ends the stream (empty payload)
_HEAD = struct.Struct("<4sII")  # kind, payload length, crc32


class StreamLogError(PaddleCraftError, RuntimeError):
    """The run's sample log is damaged (not a torn last record): the message names the file."""


def encode(arrays: dict[str, Any]) -> bytes:
    """A sample's arrays as ``.npz`` bytes (the record payload)."""
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def decode(payload: bytes) -> dict[str, np.ndarray]:
    """The arrays of a record payload (no pickles are ever loaded)."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


class SampleLog:
    """An append-only, fsynced log of samples (see the module docstring for the layout).

    Args:
        path: the log file (made, with its folder, when missing).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._size = 0  # bytes of good records: a failed append is cut back to it

    def open(self) -> tuple[list[bytes], bool]:
        """Read every good record, cut off a torn last one, open for appending; return
        ``(sample payloads in order, whether the stream was ended)``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists() or self.path.stat().st_size == 0:
            self._write_header()
        data = self.path.read_bytes()
        if not data.startswith(HEADER):
            if HEADER.startswith(data):  # torn header: nothing was ever acknowledged
                self._write_header()
                data = HEADER
            else:
                raise StreamLogError(f"{self.path} is not a PaddleCraft sample log")
        samples, ended, good = self._scan(data)
        if good < len(data):
            log.warning(
                "stream: %s ends in a torn record (%d bytes, never acknowledged): cut off",
                self.path,
                len(data) - good,
            )
            with open(self.path, "r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = good
        return samples, ended

    def _write_header(self) -> None:
        with open(self.path, "wb") as f:
            f.write(HEADER)
            f.flush()
            os.fsync(f.fileno())
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _scan(self, data: bytes) -> tuple[list[bytes], bool, int]:
        """(payloads, ended, offset after the last good record)."""
        samples: list[bytes] = []
        ended = False
        at = len(HEADER)
        while at < len(data):
            if at + _HEAD.size > len(data):
                break  # torn head
            kind, n, crc = _HEAD.unpack_from(data, at)
            body = data[at + _HEAD.size : at + _HEAD.size + n]
            if kind not in (SAMPLE, END) or len(body) < n or zlib.crc32(body) != crc:
                if at + _HEAD.size + n < len(data):  # good-looking bytes follow: damage
                    raise StreamLogError(
                        f"{self.path}: record {len(samples) + 1} at byte {at} is damaged and "
                        "is not the last one; the log was edited or the disk failed (restore "
                        "the file, or start a new run)"
                    )
                break
            if kind == END:
                ended = True
            else:
                samples.append(bytes(body))
            at += _HEAD.size + n
        return samples, ended, at

    def append(self, kind: bytes, payload: bytes = b"") -> None:
        """Append one record and fsync it (returns only once it is on disk)."""
        if self._fd is None:
            raise RuntimeError("SampleLog.append before open()")
        record = _HEAD.pack(kind, len(payload), zlib.crc32(payload)) + payload
        with self._lock:
            try:
                written = os.write(self._fd, record)
                if written != len(record):  # a full disk: refuse, keep nothing
                    raise OSError(f"{self.path}: short write ({written} of {len(record)} bytes)")
                os.fsync(self._fd)
            except OSError:
                os.ftruncate(self._fd, self._size)
                raise
            self._size += len(record)

    def close(self) -> None:
        """Close the file (safe to call twice)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
