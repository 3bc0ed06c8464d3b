"""What the text agents share: a word vocabulary, image arrays, batch slices.

Each text agent (`Captioner`, `Listener`,
`Recognizer`) holds a word `Vocab` built from ``words``: a
list, or a preset of `paddlecraft.craftdata.words` (``"shapes"``, ``"digits"``). The resolved list
is saved with the agent, so a loaded agent never depends on a preset changing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.craftdata.words import WORD_PRESETS, resolve_words
from paddlecraft.encoders import Vocab
from paddlecraft.encoders.tokenizer import SubwordTokenizer
from paddlecraft.encoders.vocab import PAD

from .base import Agent
from .settings import ConfigError

__all__ = [
    "TextAgent",
    "batch_slices",
    "images_to_array",
    "check_image_encoder",
    "input_channels",
]


def images_to_array(images: Any, channels: int) -> np.ndarray:
    """Images as float32 [N, C, H, W] in [0, 1].

    Accepts uint8 [N, H, W, C] (RGB, as `paddlecraft.craftdata.shapes.load_shapes` gives) or
    uint8 [N, H, W] (grey), or float [N, C, H, W] already scaled.
    """
    x = np.asarray(images)
    if x.dtype == np.uint8:
        if x.ndim == 3:
            x = x[..., None]
        if x.ndim != 4 or x.shape[-1] != channels:
            raise ValueError(
                f"expected uint8 images [N, H, W, {channels}] (or [N, H, W] when grey), got "
                f"{list(x.shape)}"
            )
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2), dtype=np.float32) / np.float32(255)
    if x.ndim != 4 or x.shape[1] != channels:
        raise ValueError(
            f"expected float images [N, {channels}, H, W] in [0, 1] or uint8 [N, H, W, "
            f"{channels}], got {list(x.shape)} {x.dtype}"
        )
    return np.ascontiguousarray(x, dtype=np.float32)


def input_channels(encoder: Any) -> int:
    """The planes an image encoder reads: the first axis of its first input (contract)."""
    spec = next(iter(encoder.input_specs.values()))
    return int(spec.shape[0])


def check_image_encoder(encoder: Any, setting: str) -> None:
    """Refuse an encoder whose first input is not float pixels (e.g. a text encoder)."""
    name, spec = next(iter(encoder.input_specs.items()))
    if "float32" not in spec.dtypes:
        raise ConfigError(
            f"{setting}: {type(encoder).__name__} reads {name!r} as {'/'.join(spec.dtypes)}, "
            "not images; use an image encoder (conf/encoder/: mlp, cnn, resnet18, vit_tiny...)"
        )


def batch_slices(n: int, size: int) -> Iterator[slice]:
    """Consecutive slices of at most ``size`` covering ``range(n)``."""
    for i in range(0, n, size):
        yield slice(i, min(n, i + size))


class TextAgent(Agent):
    """An agent that reads or writes words of its `vocab` (built from ``cfg.words``).

    Subclasses call `use_words` right after ``super().__init__``: the preset name in
    ``cfg.words`` becomes the word list it stands for, in the settings and in the record
    ``agent.json`` keeps.
    """

    vocab: Vocab

    def use_words(self, any_pad: bool = False) -> None:
        """Resolve ``cfg.words`` to a list (saved as such) and build `vocab` from it.

        ``words`` may also name a local ``tokenizer.json`` / ``vocab.txt`` (or a folder with
        one), or CLIP's ``vocab.json`` + ``merges.txt``: `vocab` is then that
        `SubwordTokenizer` (a `CLIPTokenizer` for CLIP's files), saved whole in the record.
        ``any_pad``: accept a tokenizer whose padding id is not 0 (the agent tells its
        encoder the id; CLIP pads with ``<|endoftext|>``).
        """
        setting = f"agents.{self.name}.words"
        tok = tokenizer_of(self.cfg.words, setting, any_pad=any_pad)
        if tok is not None:
            record = {TOKENIZER_KEY: tok.to_json()}
            self.cfg.words = record
            self.config["words"] = record
            self.vocab = tok
            return
        words = resolve_words(self.cfg.words, setting)
        self.cfg.words = words
        self.config["words"] = list(words)
        self.vocab = Vocab(words)

    def fit_decoder(self, decoder: Any) -> None:
        """Give a text decoder this vocabulary's pad / begin / end ids (a tokenizer's own)."""
        decoder.pad_id, decoder.bos_id = self.vocab.pad_id, self.vocab.bos_id
        decoder.eos_id = self.vocab.eos_id

    def encode_texts(self, texts: Sequence[str], add_eos: bool = True) -> np.ndarray:
        """int64 token ids [N, T] of ``texts``, right-padded (see `Vocab.encode_batch`)."""
        if isinstance(self.vocab, SubwordTokenizer):
            if add_eos:
                return self.vocab.encode_targets(list(texts))
            return self.vocab.encode_batch(list(texts), add_special_tokens=False)[0]
        return self.vocab.encode_batch(list(texts), add_eos=add_eos)


TOKENIZER_KEY = "tokenizer"  #: ``words: {tokenizer: <SubwordTokenizer.to_json()>}`` in records


def tokenizer_of(words: Any, setting: str, any_pad: bool = False) -> SubwordTokenizer | None:
    """The subword tokenizer ``words`` names (a file/folder path, or a saved record), else None.

    CLIP's files (`paddlecraft.encoders.clip_tokenizer.is_clip_tokenizer`) give a
    `CLIPTokenizer`. The padding token must be id 0 unless ``any_pad``.
    """
    from omegaconf import DictConfig, OmegaConf

    from paddlecraft.encoders.clip_tokenizer import (
        CLIPTokenizer,
        is_clip_tokenizer,
        record_tokenizer,
    )

    if isinstance(words, DictConfig):
        words = OmegaConf.to_container(words, resolve=True)
    if isinstance(words, Mapping) and TOKENIZER_KEY in words:
        return record_tokenizer(words[TOKENIZER_KEY])
    if not isinstance(words, str) or words in WORD_PRESETS or not Path(words).expanduser().exists():
        return None
    path = Path(words).expanduser()
    is_clip = is_clip_tokenizer(path)
    tok = CLIPTokenizer.from_files(path) if is_clip else SubwordTokenizer.from_file(path)
    if (tok.pad_id != PAD and not any_pad) or tok.bos_id is None or tok.eos_id is None:
        hint = "; a CLIP tokenizer feeds a dual encoder's text tower" if is_clip else ""
        raise ValueError(
            f"{setting}={words!r}: the tokenizer needs its padding token at id {PAD} and begin "
            f"/ end tokens (got pad={tok.pad_id}, bos={tok.bos_id}, eos={tok.eos_id}){hint}"
        )
    return tok
