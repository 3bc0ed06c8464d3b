"""What the text agents share: a word vocabulary, image arrays, batch slices.

Each text agent (:class:`~agents.Captioner`, :class:`~agents.Listener`,
:class:`~agents.Recognizer`) holds a word :class:`~encoders.Vocab` built from ``words``: a
list, or a preset of :mod:`craftdata.words` (``"shapes"``, ``"digits"``). The resolved list
is saved with the agent, so a loaded agent never depends on a preset changing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from craftdata.words import resolve_words
from encoders import Vocab

from .base import Agent

__all__ = [
    "TextAgent",
    "batch_slices",
    "gru_text_decoder",
    "images_to_array",
    "shapes_image_encoder",
]


def shapes_image_encoder() -> dict[str, Any]:
    """The default image side of the caption agents: a 4-block CNN for 64 x 64 RGB shapes.

    A plain dict (every agent config keeps an untyped ``encoder`` slot, so any image
    encoder composes there).
    """
    return {
        "_target_": "encoders.ImageCNNEncoder",
        "in_channels": 3,
        "image_size": 64,
        "channels": [16, 32, 64, 64],
        "embedding_dim": 128,
        "num_classes": None,
    }


def gru_text_decoder() -> dict[str, Any]:
    """The default text decoder: a GRU :class:`~encoders.TextDecoder` (vocab and condition
    sizes are filled in by the agent)."""
    return {"_target_": "encoders.TextDecoder", "embed_dim": 32, "hidden_size": 128, "max_len": 12}


def images_to_array(images: Any, channels: int) -> np.ndarray:
    """Images as float32 [N, C, H, W] in [0, 1].

    Accepts uint8 [N, H, W, C] (RGB, as :func:`craftdata.shapes.load_shapes` gives) or
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


def batch_slices(n: int, size: int) -> Iterator[slice]:
    """Consecutive slices of at most ``size`` covering ``range(n)``."""
    for i in range(0, n, size):
        yield slice(i, min(n, i + size))


class TextAgent(Agent):
    """An agent that reads or writes words of its :attr:`vocab` (built from ``cfg.words``).

    Subclasses call :meth:`use_words` right after ``super().__init__``: the preset name in
    ``cfg.words`` becomes the word list it stands for, in the settings and in the record
    ``agent.json`` keeps.
    """

    vocab: Vocab

    def use_words(self) -> None:
        """Resolve ``cfg.words`` to a list (saved as such) and build :attr:`vocab` from it."""
        words = resolve_words(self.cfg.words, f"agents.{self.name}.words")
        self.cfg.words = words
        self.config["words"] = list(words)
        self.vocab = Vocab(words)

    def encode_texts(self, texts: Sequence[str], add_eos: bool = True) -> np.ndarray:
        """int64 token ids [N, T] of ``texts``, right-padded (see :meth:`Vocab.encode_batch`)."""
        return self.vocab.encode_batch(list(texts), add_eos=add_eos)
