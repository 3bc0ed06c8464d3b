"""Synthetic speech, offline: eSpeak NG through the ``espeakng-loader`` wheel (ctypes, no system
package), across many voices, rates and pitches, cached on disk after the first generation.

(One idea: the ctypes binding, the deterministic worker protocol and the cache
must change together.)

eSpeak NG is GPL-3.0. PaddleCraft does not ship or link it at build time: the library and
its voice data come from the ``espeakng-loader`` wheel and are loaded with ``ctypes`` at
run time, only when speech is synthesised.

Determinism. eSpeak keeps hidden state between calls (identical requests in one process
give slightly different audio) and draws from libc's ``rand()``. So synthesis always runs
in fresh worker processes, each reseeding ``rand`` before every clip and speaking a fixed
chunk of the list in a fixed order: the same list gives bit-identical audio on every run.

A *voice* is one of eSpeak's voice variants (``f3``, ``m1``, ``klatt4``, ``whisper``...:
104 of them); each utterance also draws an English accent, a rate (words per minute), a
pitch and a pitch range. Train/test splits are by voice (`split_voices`), so a test
hears voices never trained on.

Cache: ``$PADDLECRAFT_CACHE/speech/<sha256>/`` (default ``~/.cache/paddlecraft``), keyed by
the whole utterance list, the sample rate and the library version; written to a temporary
folder and renamed into place, so a crash never leaves half a cache entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from paddlecraft.errors import PaddleCraftError

__all__ = [
    "ACCENTS",
    "DIGIT_WORDS",
    "ESPEAK_RATE",
    "SpeechUnavailableError",
    "SpokenSplit",
    "Utterance",
    "cache_root",
    "espeak_voices",
    "load_spoken_digits",
    "make_utterances",
    "resample",
    "spoken_split",
    "split_voices",
    "synthesize",
    "to_float",
]

ESPEAK_RATE = 22050  #: eSpeak NG's native sample rate
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
ACCENTS = (
    "en-us",
    "en",
    "en-us-nyc",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-029",
)
RATES = (130, 210)  #: words per minute, uniform
PITCHES = (25, 75)  #: eSpeak pitch 0-100, uniform
RANGES = (20, 80)  #: eSpeak pitch range 0-100, uniform
CACHE_VERSION = "paddlecraft-speech-2"
CHUNK = 400  #: utterances per worker process (fixed: the chunking is part of the result)


VOICE_SPLIT_STREAM = 0x70  #: random-stream id: the held-out voices
DIGITS_STREAM = 0xD1  #: random-stream id: the spoken digits' order
TRAIN_SPEECH_STREAM = 0xD2  #: random-stream id: the training digits spoken
TEST_SPEECH_STREAM = 0xD3  #: random-stream id: the test digits spoken


class SpeechUnavailableError(PaddleCraftError, RuntimeError):
    """eSpeak NG cannot be loaded (the ``espeakng-loader`` wheel is missing or broken)."""


@dataclass(frozen=True)
class Utterance:
    """One clip to synthesise: text, voice variant, accent, rate, pitch, range, rand() seed."""

    text: str
    voice: str = "f3"
    accent: str = "en-us"
    rate: int = 175
    pitch: int = 50
    range: int = 50
    seed: int = 0

    @property
    def voice_name(self) -> str:
        """The eSpeak voice name, ``<accent>+<variant>``."""
        return f"{self.accent}+{self.voice}"


@dataclass(frozen=True)
class SpokenSplit:
    """Waveforms (int16, one array per clip, at ``sample_rate``) with their texts and voices."""

    waveforms: list[np.ndarray]
    texts: list[str]
    voices: list[str]
    sample_rate: int

    def __post_init__(self) -> None:
        if not len(self.waveforms) == len(self.texts) == len(self.voices):
            raise ValueError(
                f"SpokenSplit: {len(self.waveforms)} waveforms, {len(self.texts)} texts and "
                f"{len(self.voices)} voices must align"
            )

    def __len__(self) -> int:
        return len(self.texts)


# ----------------------------------------------------------------------------- the library
def _loader():
    try:
        import espeakng_loader
    except ImportError as e:
        raise SpeechUnavailableError(
            "speech synthesis needs eSpeak NG from the espeakng-loader wheel: "
            "pip install espeakng-loader==0.2.4 (Linux x86_64, macOS arm64, Windows)"
        ) from e
    return espeakng_loader


def espeak_voices() -> list[str]:
    """eSpeak NG's voice variants (``f3``, ``m1``, ``klatt``...), sorted by name."""
    data = Path(_loader().get_data_path())
    return sorted(p.name for p in (data / "voices" / "!v").iterdir() if p.is_file())


def library_version() -> str:
    """The espeakng-loader wheel's version (part of the cache key)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("espeakng-loader")
    except PackageNotFoundError:
        return "unknown"


class _Espeak:
    """eSpeak NG in this process via ctypes (synchronous mode). Used by the worker processes."""

    def __init__(self) -> None:
        import ctypes

        loader = _loader()
        self.lib = lib = ctypes.CDLL(loader.get_library_path())
        self.libc = ctypes.CDLL(None)
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        data_parent = str(Path(loader.get_data_path()).parent).encode()
        rate = lib.espeak_Initialize(2, 0, data_parent, 0)  # AUDIO_OUTPUT_SYNCHRONOUS
        if rate != ESPEAK_RATE:
            raise SpeechUnavailableError(f"espeak_Initialize failed (returned {rate})")
        self._chunks: list[np.ndarray] = []
        proto = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
        )

        def collect(wav, n, events):  # noqa: ANN001 (ctypes callback)
            if n > 0:
                self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            return 0

        self._callback = proto(collect)  # keep a reference: the library holds a raw pointer
        lib.espeak_SetSynthCallback(self._callback)

    def speak(self, u: Utterance) -> np.ndarray:
        """int16 audio at 22050 Hz for one utterance."""
        self.libc.srand(int(u.seed) % (2**31))  # the library draws from both generators
        self.lib.espeak_ng_SetRandSeed(int(u.seed) % (2**31))
        if self.lib.espeak_SetVoiceByName(u.voice_name.encode()) != 0:
            raise ValueError(f"eSpeak NG has no voice {u.voice_name!r}")
        for param, value in ((1, u.rate), (3, u.pitch), (4, u.range)):  # RATE, PITCH, RANGE
            self.lib.espeak_SetParameter(param, int(value), 0)
        self._chunks.clear()
        text = u.text.encode() + b"\0"
        # position 0, POS_CHARACTER, no end, espeakCHARS_AUTO
        err = self.lib.espeak_Synth(text, len(text), 0, 1, 0, 0, None, None)
        if err != 0:
            raise RuntimeError(f"espeak_Synth failed ({err}) for {u!r}")
        self.lib.espeak_Synchronize()
        return np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)


def trim_silence(x: np.ndarray, threshold: int = 100, pad: int = 441) -> np.ndarray:
    """Cut leading and trailing samples quieter than ``threshold``, keeping ``pad`` samples."""
    loud = np.flatnonzero(np.abs(x.astype(np.int32)) > threshold)
    if not len(loud):
        return x
    return x[max(0, loud[0] - pad) : loud[-1] + 1 + pad]


def resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Polyphase resampling (``scipy.signal.resample_poly``); int16 in -> int16 out."""
    if rate_in == rate_out:
        return x
    from math import gcd

    from scipy.signal import resample_poly

    g = gcd(int(rate_in), int(rate_out))
    y = resample_poly(x.astype(np.float64), rate_out // g, rate_in // g)
    if x.dtype == np.int16:
        return np.clip(np.round(y), -32768, 32767).astype(np.int16)
    return y.astype(x.dtype)


def to_float(x: np.ndarray) -> np.ndarray:
    """int16 audio -> float32 in [-1, 1); float input is returned as float32."""
    if x.dtype == np.int16:
        return x.astype(np.float32) / 32768.0
    return np.asarray(x, np.float32)


def _worker(job_file: str, out_file: str) -> None:
    job = json.loads(Path(job_file).read_text())
    engine = _Espeak()
    clips = []
    for fields in job["utterances"]:
        audio = trim_silence(engine.speak(Utterance(**fields)))
        clips.append(resample(audio, ESPEAK_RATE, int(job["sample_rate"])))
    offsets = np.cumsum([0] + [len(c) for c in clips]).astype(np.int64)
    audio = np.concatenate(clips) if clips else np.zeros(0, np.int16)
    with open(out_file, "wb") as f:
        np.savez(f, audio=audio, offsets=offsets)


def _run_chunks(chunks: list[list[Utterance]], sample_rate: int, workers: int) -> list[np.ndarray]:
    """Speak each chunk in its own fresh process (``workers`` at a time), in order."""
    out: list[list[np.ndarray] | None] = [None] * len(chunks)
    with tempfile.TemporaryDirectory(prefix="paddlecraft-speech-") as tmp:
        pending = list(range(len(chunks)))
        running: list[tuple[int, subprocess.Popen, str]] = []
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        while pending or running:
            while pending and len(running) < max(1, workers):
                i = pending.pop(0)
                job, res = f"{tmp}/job_{i}.json", f"{tmp}/out_{i}.npz"
                payload = {"sample_rate": sample_rate, "utterances": [asdict(u) for u in chunks[i]]}
                Path(job).write_text(json.dumps(payload))
                cmd = [sys.executable, "-c", _WORKER_CMD, str(Path(__file__).resolve()), job, res]
                proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
                running.append((i, proc, res))
            i, proc, res = running.pop(0)
            _, err = proc.communicate()
            if proc.returncode != 0:
                for _, p, _ in running:
                    p.kill()
                msg = err.decode(errors="replace").strip().splitlines()
                raise SpeechUnavailableError(
                    f"speech worker failed (exit {proc.returncode}): {msg[-1] if msg else ''}"
                )
            with np.load(res, allow_pickle=False) as z:
                audio, offsets = z["audio"], z["offsets"]
            out[i] = [audio[offsets[j] : offsets[j + 1]] for j in range(len(offsets) - 1)]
    return [clip for chunk in out for clip in chunk or []]


# the worker imports this file by path (not the package), so it needs nothing but numpy/scipy
_WORKER_CMD = (
    "import sys, importlib.util as u; s = u.spec_from_file_location('_pc_speech', sys.argv[1]); "
    "m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); "
    "m._worker(sys.argv[2], sys.argv[3])"
)


def cache_root() -> Path:
    """``$PADDLECRAFT_CACHE`` or ``~/.cache/paddlecraft``."""
    return Path(os.environ.get("PADDLECRAFT_CACHE") or Path.home() / ".cache" / "paddlecraft")


def synthesize(
    utterances: Sequence[Utterance | str],
    sample_rate: int = ESPEAK_RATE,
    *,
    cache: bool = True,
    workers: int = 2,
) -> list[np.ndarray]:
    """int16 waveforms (silence trimmed) at ``sample_rate``, one per utterance, bit-identical per list.

    Strings are spoken with the default voice. Each chunk of `CHUNK` utterances is
    spoken by a fresh process; with ``cache`` the result is stored under
    `cache_root` and read back next time (much faster than synthesising again).
    """
    utts = [u if isinstance(u, Utterance) else Utterance(str(u)) for u in utterances]
    if not utts:
        return []
    key = hashlib.sha256(
        json.dumps(
            {
                "version": CACHE_VERSION,
                "library": library_version(),
                "chunk": CHUNK,
                "rate": int(sample_rate),
                "utterances": [asdict(u) for u in utts],
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:32]
    folder = cache_root() / "speech" / key
    if cache and (folder / "clips.npz").is_file():
        try:
            with np.load(folder / "clips.npz", allow_pickle=False) as z:
                audio, offsets = z["audio"], z["offsets"]
            if len(offsets) == len(utts) + 1:
                return [audio[offsets[j] : offsets[j + 1]] for j in range(len(utts))]
        except (OSError, ValueError, KeyError):
            pass  # unreadable entry: synthesise again and replace it
    chunks = [utts[i : i + CHUNK] for i in range(0, len(utts), CHUNK)]
    clips = _run_chunks(chunks, int(sample_rate), workers)
    if cache:
        _write_cache(folder, clips, utts, int(sample_rate))
    return clips


def _write_cache(folder: Path, clips: list[np.ndarray], utts: list[Utterance], rate: int) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        offsets = np.cumsum([0] + [len(c) for c in clips]).astype(np.int64)
        with open(tmp / "clips.npz", "wb") as f:
            np.savez(f, audio=np.concatenate(clips), offsets=offsets)
            f.flush()
            os.fsync(f.fileno())
        meta = {"version": CACHE_VERSION, "sample_rate": rate, "count": len(utts)}
        (tmp / "meta.json").write_text(json.dumps(meta))
        if folder.exists():  # written meanwhile by another process: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ----------------------------------------------------------------------------- datasets
def split_voices(seed: int = 0, test_fraction: float = 0.2) -> tuple[list[str], list[str]]:
    """(train voices, test voices): a seeded split of `espeak_voices`."""
    voices = espeak_voices()
    rng = np.random.default_rng([seed, VOICE_SPLIT_STREAM])
    order = rng.permutation(len(voices))
    n_test = max(1, int(round(test_fraction * len(voices))))
    test = sorted(voices[i] for i in order[:n_test])
    train = sorted(voices[i] for i in order[n_test:])
    return train, test


def make_utterances(
    texts: Sequence[str], voices: Sequence[str], rng: np.random.Generator
) -> list[Utterance]:
    """One utterance per text with a random voice (from ``voices``), accent, rate, pitch, range."""
    n = len(texts)
    voice = rng.integers(0, len(voices), n)
    accent = rng.integers(0, len(ACCENTS), n)
    rate = rng.integers(RATES[0], RATES[1] + 1, n)
    pitch = rng.integers(PITCHES[0], PITCHES[1] + 1, n)
    rng_ = rng.integers(RANGES[0], RANGES[1] + 1, n)
    seeds = rng.integers(0, 2**31 - 1, n)
    return [
        Utterance(str(t), voices[v], ACCENTS[a], int(r), int(p), int(g), int(s))
        for t, v, a, r, p, g, s in zip(texts, voice, accent, rate, pitch, rng_, seeds)
    ]


def spoken_split(
    texts: Sequence[str],
    voices: Sequence[str],
    seed: Sequence[int] | int,
    sample_rate: int = 16000,
    *,
    cache: bool = True,
) -> SpokenSplit:
    """Speak ``texts`` (in order) with random voices from ``voices``; deterministic by seed."""
    utts = make_utterances(texts, voices, np.random.default_rng(seed))
    clips = synthesize(utts, sample_rate, cache=cache)
    return SpokenSplit(clips, [u.text for u in utts], [u.voice for u in utts], sample_rate)


def load_spoken_digits(
    seed: int = 0,
    n_train: int = 2000,
    n_test: int = 500,
    sample_rate: int = 16000,
    test_fraction: float = 0.2,
) -> tuple[SpokenSplit, SpokenSplit]:
    """Spoken "zero".."nine": (train, test), split by voice (test voices are never in train)."""
    train_voices, test_voices = split_voices(seed, test_fraction)
    rng = np.random.default_rng([seed, DIGITS_STREAM])
    train_texts = [DIGIT_WORDS[i] for i in rng.integers(0, 10, n_train)]
    test_texts = [DIGIT_WORDS[i] for i in rng.integers(0, 10, n_test)]
    return (
        spoken_split(train_texts, train_voices, [seed, TRAIN_SPEECH_STREAM], sample_rate),
        spoken_split(test_texts, test_voices, [seed, TEST_SPEECH_STREAM], sample_rate),
    )
