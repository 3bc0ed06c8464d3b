"""What a caption chain learns and is tested on: image/text pairs, spoken clips, candidates.

``task="shapes"``: the captioned shapes (`paddlecraft.craftdata.load_shapes`) with a
compositional split; ``task="digits"``: sklearn digit images named by their spoken word
("seven"). Spoken data (only when a chain has a recognizer) comes from eSpeak NG voices
split into training and held-out ones, or from a folder of WAV recordings (digits).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np

from paddlecraft.agents.settings import ConfigError

log = logging.getLogger("paddlecraft")

TASKS = ("shapes", "digits")


WORLD_STREAM = 0xE1  #: random-stream id: the caption world
ESPEAK_STREAM = 0x5C  #: random-stream id: the eSpeak voices and noise
WAV_STREAM = 0x5D  #: random-stream id: the recorded speech's picks
TRAIN_SPEECH_STREAM = 0x51  #: random-stream id: the training captions spoken
TEST_SPEECH_STREAM = 0x52  #: random-stream id: the test captions spoken
COMP_SPEECH_STREAM = 0x53  #: random-stream id: the compositional test captions spoken


@dataclass
class CaptionDataConfig:
    """Split sizes (shapes; digits use ``n_test``)."""

    n_train: int = 6000  #: training images
    n_test: int = 500  #: in-distribution test images
    n_compositional: int = 300  #: images of held-out subject-relation combinations


@dataclass
class CaptionSpeechConfig:
    """Spoken data for a recognizer hop."""

    n_train: int = 3000  #: clips from training voices
    n_test: int = 500  #: clips from held-out voices (the first test texts)
    n_compositional: int = 300  #: held-out voices speaking compositional captions
    sample_rate: int = 16000  #: clip rate
    voice_seed: int = 0  #: seed of the train/test voice split
    test_fraction: float = 0.2  #: share of voices held out
    wav_dir: Optional[str] = None  #: digits: FSDD-layout WAV folder instead of eSpeak  # noqa: UP045


@dataclass
class Pairs:
    """Images (uint8 [N, H, W, C]) and their texts."""

    images: np.ndarray
    texts: list[str]

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class Spoken:
    """Clips (int16, one array each) with their texts and the index of the matching image."""

    waveforms: list[np.ndarray]
    texts: list[str]
    image_index: np.ndarray  # int64 [N]; empty for training clips
    sample_rate: int
    voices: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class Candidates:
    """For each item of a split: K image indices (itself + K-1 with other texts), its slot."""

    index: np.ndarray  # int64 [N, K]
    slot: np.ndarray  # int64 [N]: where the item itself sits among its K


@dataclass
class CaptionWorld:
    """Every split a caption chain uses; ``comp``/spoken splits are None when not built."""

    train: Pairs
    test: Pairs
    comp: Pairs | None
    holdout: list[str]  # the held-out "colour shape relation" triples
    test_cands: Candidates
    comp_cands: Candidates | None
    spoken_train: Spoken | None = None
    spoken_test: Spoken | None = None
    spoken_comp: Spoken | None = None


def candidates(pairs: Pairs, k: int, rng: np.random.Generator) -> Candidates:
    """K candidate images per item: the item and K-1 distractors with other texts, shuffled."""
    texts = np.array(pairs.texts)
    n = len(texts)
    cands = np.zeros((n, k), np.int64)
    for i in range(n):
        pool = np.flatnonzero(texts != texts[i])
        if len(pool) < k - 1:
            raise ConfigError(f"arena.k={k}: too few distinct texts to draw {k - 1} distractors")
        cands[i, 0] = i
        cands[i, 1:] = rng.choice(pool, k - 1, replace=False)
    order = np.argsort(rng.random((n, k)), axis=1)
    cands = np.take_along_axis(cands, order, axis=1)
    return Candidates(cands, np.argmax(cands == np.arange(n)[:, None], axis=1))


def build_world(
    task: str,
    seed: int,
    k: int,
    data: CaptionDataConfig,
    speech: CaptionSpeechConfig | None = None,
) -> CaptionWorld:
    """The splits of ``task``, candidates for the listener, and spoken data if ``speech``."""
    if task not in TASKS:
        raise ConfigError(f"arena.task must be one of {TASKS}, got {task!r}")
    if task == "shapes":
        from paddlecraft.craftdata.shapes import load_shapes

        d = load_shapes(
            seed, n_train=data.n_train, n_test=data.n_test, n_compositional=data.n_compositional
        )
        train = Pairs(d.train.images, d.train.captions)
        test = Pairs(d.test.images, d.test.captions)
        comp: Pairs | None = Pairs(d.compositional.images, d.compositional.captions)
        holdout = [" ".join(t) for t in d.holdout]
    else:
        from paddlecraft.craftdata import load_digits
        from paddlecraft.craftdata.speech import DIGIT_WORDS

        digits = load_digits(seed)

        def pairs(split: Any, n: int | None = None) -> Pairs:
            x = np.round(split.x[:n, 0] * 255).astype(np.uint8)[..., None]  # [N, 8, 8, 1]
            return Pairs(x, [DIGIT_WORDS[int(y)] for y in split.y[:n]])

        train, test = pairs(digits.train), pairs(digits.test, data.n_test or None)
        comp, holdout = None, []
    rng = np.random.default_rng([seed, WORLD_STREAM])
    test_cands = candidates(test, k, rng)
    comp_cands = candidates(comp, k, rng) if comp is not None else None
    world = CaptionWorld(train, test, comp, holdout, test_cands, comp_cands)
    if speech is not None:
        if speech.wav_dir:
            _add_wav_speech(world, task, seed, speech)
        else:
            _add_espeak_speech(world, seed, speech)
    return world


def _add_espeak_speech(world: CaptionWorld, seed: int, s: CaptionSpeechConfig) -> None:
    from paddlecraft.craftdata.speech import cache_root, split_voices, spoken_split

    rate = s.sample_rate
    train_voices, test_voices = split_voices(s.voice_seed, s.test_fraction)
    n_test = min(s.n_test, len(world.test))
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, ESPEAK_STREAM])
    texts = [world.train.texts[i] for i in rng.integers(0, len(world.train), s.n_train)]
    tr = spoken_split(texts, train_voices, [seed, TRAIN_SPEECH_STREAM], rate)
    te = spoken_split(world.test.texts[:n_test], test_voices, [seed, TEST_SPEECH_STREAM], rate)
    world.spoken_train = Spoken(tr.waveforms, tr.texts, np.zeros(0, np.int64), rate, tr.voices)
    world.spoken_test = Spoken(te.waveforms, te.texts, np.arange(n_test), rate, te.voices)
    if world.comp is not None:
        n_comp = min(s.n_compositional, len(world.comp))
        co = spoken_split(world.comp.texts[:n_comp], test_voices, [seed, COMP_SPEECH_STREAM], rate)
        world.spoken_comp = Spoken(co.waveforms, co.texts, np.arange(n_comp), rate, co.voices)
    log.info(
        "spoken data: %d training clips (%d voices), %d test clips (%d held-out voices) "
        "in %.1f s (eSpeak NG, cached under %s)",
        len(tr),
        len(train_voices),
        len(te),
        len(test_voices),
        time.perf_counter() - t0,
        cache_root() / "speech",
    )


def _add_wav_speech(world: CaptionWorld, task: str, seed: int, s: CaptionSpeechConfig) -> None:
    from paddlecraft.craftdata.wav import load_wav_folder, split_by_speaker

    if task != "digits":
        raise ConfigError("arena.speech.wav_dir holds spoken digits: use it with arena.task=digits")
    rate = s.sample_rate
    train, test = split_by_speaker(load_wav_folder(str(s.wav_dir), rate), seed=seed)
    world.spoken_train = Spoken(
        train.waveforms, train.texts, np.zeros(0, np.int64), rate, train.voices
    )
    # each test clip is matched with a test image of the same digit
    rng = np.random.default_rng([seed, WAV_STREAM])
    texts = np.array(world.test.texts)
    match = np.array([rng.choice(np.flatnonzero(texts == t)) for t in test.texts], np.int64)
    world.spoken_test = Spoken(test.waveforms, test.texts, match, rate, test.voices)
    log.info(
        "speech from %s: %d train clips, %d test clips (speakers %s)",
        s.wav_dir,
        len(train),
        len(test),
        sorted(set(test.voices)),
    )
