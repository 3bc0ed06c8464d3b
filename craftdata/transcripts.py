"""Your own speech: audio + transcript from a CSV/TSV table or LibriSpeech folders, read lazily.

- a ``.csv`` / ``.tsv`` file with a header naming the audio column (``path``, ``file`` or
  ``audio``) and the text column (``text``, ``transcript`` or ``sentence``); audio paths
  are relative to the table's folder;
- a folder in the LibriSpeech layout: ``*.trans.txt`` files of ``<id> <TRANSCRIPT>`` lines,
  each ``<id>.flac`` (or ``.wav``) beside it;
- a folder of ``<digit>_<speaker>_<n>.wav`` files (FSDD) stays `paddlecraft.craftdata.load_wav_folder`.

WAV and FLAC are decoded with ``soundfile`` (channels averaged) and resampled to
``sample_rate`` (the speech encoder's rate). Transcripts are lower-cased; the character
vocabulary is ``alphabet`` or, unset, the training transcripts' characters. A transcript
with a character outside it is a bad file (named, with the line it came from).
"""

from __future__ import annotations

import csv
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paddlecraft.craftdata.badfiles import BadDataError, BadFiles, check_audio_file, need_path
from paddlecraft.craftdata.loader import LazySplit, held_out
from paddlecraft.craftdata.speech import resample

__all__ = [
    "TranscriptData",
    "TranscriptSplit",
    "load_transcripts",
    "read_audio",
    "read_table",
    "split_rows",
    "training_alphabet",
]

log = logging.getLogger("paddlecraft.data")

_PATH_COLUMNS = ("path", "file", "audio", "filename")
_TEXT_COLUMNS = ("text", "transcript", "sentence")
AUDIO_EXTENSIONS = (".flac", ".wav")


SPLIT_STREAM = 0x5EEC  #: random-stream id: the held-out clips


def read_audio(path: str | os.PathLike, sample_rate: int) -> np.ndarray:
    """float32 mono samples in [-1, 1] at ``sample_rate``; ``ValueError(problem)`` if unreadable."""
    import soundfile as sf

    try:
        with sf.SoundFile(os.fspath(path)) as f:
            declared, rate = f.frames, f.samplerate
            x = f.read(dtype="float32", always_2d=True)
    except (RuntimeError, sf.LibsndfileError) as e:
        raise ValueError(f"cannot be decoded as audio ({e})") from e
    if len(x) < declared:
        raise ValueError(f"is truncated ({len(x)} of the {declared} frames its header declares)")
    x = x.mean(axis=1) if x.shape[1] > 1 else x[:, 0]
    return resample(x, rate, sample_rate).astype(np.float32, copy=False)


def read_table(path: Path) -> list[tuple[str, str, str]]:
    """``(audio path, transcript, where)`` rows of a CSV/TSV file with a header."""
    delim = "\t" if path.suffix.lower() == ".tsv" else ","
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter=delim)
        header = [h.strip().lower() for h in next(reader, [])]
        pc = next((header.index(c) for c in _PATH_COLUMNS if c in header), None)
        tc = next((header.index(c) for c in _TEXT_COLUMNS if c in header), None)
        if pc is None or tc is None:
            raise BadDataError(
                f"{path}: the first line must name the audio column ({'/'.join(_PATH_COLUMNS)}) "
                f"and the text column ({'/'.join(_TEXT_COLUMNS)}), got {header}"
            )
        rows = []
        for n, row in enumerate(reader, 2):
            if not row:
                continue
            if len(row) <= max(pc, tc):
                raise BadDataError(f"{path}, line {n}: expected {len(header)} columns, got {row}")
            rows.append((str(path.parent / row[pc]), row[tc], f"{path}, line {n}"))
    return rows


def read_librispeech(root: Path) -> list[tuple[str, str, str]]:
    """``(audio path, transcript, where)`` of every ``*.trans.txt`` line under ``root``."""
    rows = []
    for trans in sorted(root.rglob("*.trans.txt")):
        for n, line in enumerate(trans.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            uid, _, text = line.partition(" ")
            audio = next(
                (trans.parent / f"{uid}{e}" for e in AUDIO_EXTENSIONS
                 if (trans.parent / f"{uid}{e}").is_file()),
                trans.parent / f"{uid}.flac",
            )  # fmt: skip
            rows.append((str(audio), text, f"{trans}, line {n}"))
    return rows


def read_source(path: str, setting: str) -> list[tuple[str, str, str]]:
    """Rows of a table file or a LibriSpeech folder; a clear error for anything else."""
    p = Path(path).expanduser()
    if p.is_file() and p.suffix.lower() in (".csv", ".tsv"):
        return read_table(p)
    if p.is_dir():
        rows = read_librispeech(p)
        if rows:
            return rows
        raise BadDataError(
            f"{setting}={path!r}: no *.trans.txt transcripts under this folder (LibriSpeech "
            "layout); for FSDD recordings use craftdata.load_wav_folder"
        )
    raise BadDataError(
        f"{setting}={path!r}: expected a .csv/.tsv file (path,text) or a LibriSpeech-style "
        "folder of *.trans.txt files"
    )


@dataclass
class TranscriptSplit(LazySplit):
    """Audio files and transcripts; `load` gives (waveform, character ids)."""

    files: np.ndarray  #: bytes [N]
    texts: np.ndarray  #: utf-8 bytes [N], lower-cased
    alphabet: str = ""
    sample_rate: int = 16000

    @property
    def y(self) -> np.ndarray:  # type: ignore[override]
        return np.arange(len(self.files))

    def __len__(self) -> int:
        return len(self.files)

    def path(self, i: int) -> str:
        return os.fsdecode(self.files[i])

    def text(self, i: int) -> str:
        """Transcript ``i`` (lower-case)."""
        return self.texts[i].decode("utf-8")

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        wave = read_audio(self.path(i), self.sample_rate)
        ids = np.array([self.alphabet.index(c) + 1 for c in self.text(i)], np.int64)
        return wave, ids  # [T], [L] (0 is the CTC blank / padding)

    def empty_item(self) -> tuple[np.ndarray, ...]:
        return np.zeros(0, np.float32), np.zeros(0, np.int64)

    def collate(self, items):  # type: ignore[override]
        """(waves [B, T] zero-padded, lengths [B], ids [B, L] 0-padded, id lengths [B])."""
        waves, ids = zip(*items)
        return (*_pad(waves, np.float32), *_pad(ids, np.int64))


def _pad(seqs, dtype) -> tuple[np.ndarray, np.ndarray]:
    lens = np.array([len(s) for s in seqs], np.int64)
    out = np.zeros((len(seqs), max(1, int(lens.max(initial=0)))), dtype)
    for k, s in enumerate(seqs):
        out[k, : len(s)] = s
    return out, lens


@dataclass
class TranscriptData:
    """Train/test transcript splits, the character alphabet and loader settings."""

    train: TranscriptSplit
    test: TranscriptSplit
    alphabet: str
    sample_rate: int
    name: str
    workers: int = 2
    prefetch: int = 2
    bad_files: BadFiles = field(default_factory=BadFiles)

    @property
    def words(self) -> list[str]:
        """What a character recognizer's ``words`` setting takes: the alphabet's characters."""
        return list(self.alphabet)


def split_rows(
    path: str, test_path: str | None, test_fraction: float, seed: int
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(train rows, test rows): ``test_path``'s rows, or a seeded share of ``path``'s."""
    rows = read_source(path, "data.path")
    if test_path:
        return rows, read_source(test_path, "data.test_path")
    is_test = held_out(len(rows), test_fraction, seed, SPLIT_STREAM, "clip")
    return [r for r, t in zip(rows, is_test) if not t], [r for r, t in zip(rows, is_test) if t]


def training_alphabet(rows: list[tuple[str, str, str]]) -> str:
    """The sorted characters of the (lower-cased) transcripts in ``rows``."""
    return "".join(sorted({c for _, t, _ in rows for c in t.lower()}))


def load_transcripts(
    path: str,
    test_path: str | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    sample_rate: int = 16000,
    alphabet: str | None = None,
    workers: int = 2,
    prefetch: int = 2,
    on_bad_file: str = "stop",
) -> TranscriptData:
    """Speech files with transcripts as lazy train/test splits (checked before training).

    Each audio file is checked (exists, WAV/FLAC, not cut short) and each transcript's
    characters against the alphabet; a bad one raises `BadDataError` naming the file
    or line (``on_bad_file="skip"``: logged, left out, counted).
    """
    need_path(path, "speech")
    bad = BadFiles(on_bad_file)
    rows, test_rows = split_rows(path, test_path, test_fraction, seed)
    given = alphabet is not None
    alpha = alphabet if given else training_alphabet(rows)

    def split(rs: list[tuple[str, str, str]]) -> TranscriptSplit:
        files, texts = [], []
        for audio, text, where in rs:
            outside = sorted({c for c in text.lower() if c not in alpha})
            if outside:
                fix = (
                    "data.loader.alphabet"
                    if given
                    else "data.loader.alphabet (or add them to training)"
                )
                bad.found(
                    where,
                    f"the transcript of {audio} has characters {outside} outside the "
                    f"vocabulary {alpha!r}; set {fix}",
                )
                continue
            problem = check_audio_file(audio)
            if problem is not None:
                bad.found(audio, f"{problem} (listed in {where})")
                continue
            files.append(os.fsencode(audio))
            texts.append(text.lower().encode("utf-8"))
        return TranscriptSplit(np.array(files, bytes), np.array(texts, bytes), alpha, sample_rate)

    return TranscriptData(
        train=split(rows),
        test=split(test_rows),
        alphabet=alpha,
        sample_rate=sample_rate,
        name=f"speech:{Path(path).name}",
        workers=workers,
        prefetch=prefetch,
        bad_files=bad,
    )
