"""Bad data: one clear error per bad file, or a logged and counted skip (``data.on_bad_file``).

A scan before training finds what it can cheaply: missing files, empty files, a format
that does not match the content, and truncated PNG/JPEG/WAV/FLAC files (their end marker or
declared length is missing). Damage a scan cannot see surfaces when the file is decoded,
with the same message.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from paddlecraft.errors import BadDataError, command

__all__ = [
    "ON_BAD_FILE",
    "BadDataError",
    "BadFiles",
    "check_audio_file",
    "check_image_file",
    "need_path",
]

log = logging.getLogger("paddlecraft.data")

ON_BAD_FILE = ("stop", "skip")  #: the values of ``data.on_bad_file``
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"IEND\xaeB`\x82"
_JPEG_MAGIC = b"\xff\xd8\xff"
_JPEG_END = b"\xff\xd9"
_JPEG_TAIL = 1024  # bytes searched for the end-of-image marker (some writers pad after it)


def bad_file_message(path: str | os.PathLike, problem: str) -> str:
    """``<file>: <problem>`` plus the fix (repair or remove it, or skip bad files)."""
    return (
        f"{path}: {problem}. Repair or remove the file, or set data.on_bad_file=skip to skip "
        "bad files (each is logged and counted in results.json)"
    )


@dataclass
class BadFiles:
    """The ``on_bad_file`` policy plus the files skipped so far (path -> reason)."""

    policy: str = "stop"  #: stop | skip
    skipped: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in ON_BAD_FILE:
            raise BadDataError(
                f"data.on_bad_file must be one of {list(ON_BAD_FILE)}, got {self.policy!r}"
            )

    def found(self, path: str | os.PathLike, problem: str) -> None:
        """Raise `BadDataError` (``stop``), or log the file and count it (``skip``)."""
        if self.policy == "stop":
            raise BadDataError(bad_file_message(path, problem))
        key = str(path)
        if key not in self.skipped:
            log.warning("skipping bad data file %s: %s (data.on_bad_file=skip)", key, problem)
            self.skipped[key] = problem

    def __len__(self) -> int:
        return len(self.skipped)


def _head_tail(path: Path, tail: int) -> tuple[int, bytes, bytes]:
    with open(path, "rb") as f:
        head = f.read(16)
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - tail))
        return size, head, f.read(tail)


def check_image_file(path: str | os.PathLike) -> str | None:
    """What is wrong with an image file (None when it looks whole), without decoding it.

    Checks that it exists and is not empty, that a ``.png``/``.jpg``/``.jpeg`` file starts
    with that format's signature, and that it ends with the format's end marker (PNG's
    ``IEND`` chunk; JPEG's end-of-image marker within the last KiB): a truncated copy fails.
    """
    p = Path(path)
    try:
        size, head, tail = _head_tail(p, _JPEG_TAIL)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if size == 0:
        return "is empty (0 bytes)"
    ext = p.suffix.lower()
    if head.startswith(_PNG_MAGIC):
        if not tail.endswith(_PNG_END):
            return "is a truncated PNG (no IEND chunk at the end)"
    elif head.startswith(_JPEG_MAGIC):
        if _JPEG_END not in tail:
            return "is a truncated JPEG (no end-of-image marker)"
    elif ext in (".png", ".jpg", ".jpeg"):
        return f"is not a {ext[1:].upper()} image (its first bytes are {head[:8].hex(' ')})"
    return None


def check_audio_file(path: str | os.PathLike) -> str | None:
    """What is wrong with a WAV or FLAC file (None when it looks whole), without decoding it.

    A WAV file's ``data`` chunk must hold the bytes it declares; a FLAC file is opened
    with ``soundfile`` (reads the STREAMINFO header); a FLAC file cut short is caught when
    it is decoded (fewer frames than its header declares).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(12)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if size == 0:
        return "is empty (0 bytes)"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return _check_wav_chunks(p, size)
    if head[:4] == b"fLaC":
        import soundfile as sf

        try:
            info = sf.info(str(p))
        except RuntimeError as e:
            return f"is not a readable FLAC file ({e})"
        return None if info.frames > 0 else "is a FLAC file with no audio frames"
    return f"is neither a WAV nor a FLAC file (its first bytes are {head[:8].hex(' ')})"


def _check_wav_chunks(path: Path, size: int) -> str | None:
    with open(path, "rb") as f:
        f.seek(12)
        while True:
            hdr = f.read(8)
            if len(hdr) < 8:
                return "is a WAV file without a data chunk"
            cid, n = hdr[:4], struct.unpack("<I", hdr[4:])[0]
            if cid == b"data":
                if f.tell() + n > size:
                    return (
                        f"is a truncated WAV file (its data chunk declares {n} bytes, "
                        f"{size - f.tell()} are there)"
                    )
                return None
            f.seek(n + (n & 1), os.SEEK_CUR)


def need_path(path: str | os.PathLike | None, data: str) -> str | os.PathLike:
    """``path``, or `BadDataError` saying ``data.path`` is not set (``data``: the
    data config that needs it, for the fix)."""
    if not path:
        raise BadDataError(f"data.path is not set: {command()} ... data={data} data.path=...")
    return path
