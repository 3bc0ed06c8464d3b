"""A word-level `Vocab` and the token-id convention every text encoder follows.

Token ids: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3, then the words;
batches are right-padded with ``<pad>`` (see `Vocab.encode_batch`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .base import Tensor
from .decoding import BOS, EOS, PAD

UNK = 3  # PAD = 0, BOS = 1, EOS = 2 come from .decoding
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
VOCAB_FORMAT = "paddlecraft-vocab-1"

__all__ = ["BOS", "EOS", "PAD", "SPECIALS", "UNK", "VOCAB_FORMAT", "Vocab"]


class Vocab:
    """A word-level vocabulary: lower-cased whitespace tokens <-> ids, specials first.

    ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3, then the words. Saved as a
    plain JSON-able dict (`to_json`), never pickled.
    """

    pad_id, bos_id, eos_id, unk_id = PAD, BOS, EOS, UNK

    def __init__(self, words: Iterable[str] = ()) -> None:
        self.itos: list[str] = list(SPECIALS)
        for w in words:
            if w not in self.itos:
                self.itos.append(w)
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}

    @staticmethod
    def tokenize(text: str) -> list[str]:
        """Lower-case ``text`` and split it on whitespace."""
        return text.lower().split()

    @classmethod
    def normalize(cls, text: str) -> str:
        """The text `decode` gives back for in-vocabulary words: lower-case, single spaces."""
        return " ".join(cls.tokenize(text))

    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """A vocabulary of the words seen ``min_freq`` times or more, most frequent first.

        Ties are broken alphabetically, so the same texts always give the same ids.
        ``max_size`` caps the total size, the 4 special tokens included.
        """
        if isinstance(texts, str):
            raise TypeError(
                "Vocab.build takes an iterable of texts, not one string; wrap it: [text]"
            )
        counts = Counter(w for t in texts for w in cls.tokenize(t))
        words = sorted(
            (w for w, n in counts.items() if n >= min_freq and w not in SPECIALS),
            key=lambda w: (-counts[w], w),
        )
        if max_size is not None:
            words = words[: max(0, max_size - len(SPECIALS))]
        return cls(words)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: str) -> bool:
        return word in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    __hash__ = None  # mutable-by-contents equality

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {self.itos[len(SPECIALS) : len(SPECIALS) + 5]}...)"

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = True) -> list[int]:
        """Token ids of ``text`` (unknown words -> ``<unk>``), optionally framed by bos/eos."""
        ids = [self.stoi.get(w, UNK) for w in self.tokenize(text)]
        return ([BOS] if add_bos else []) + ids + ([EOS] if add_eos else [])

    def decode(self, ids: Iterable[int] | np.ndarray | Tensor) -> str:
        """Text of ``ids``: stops at ``<eos>``, skips ``<pad>`` and ``<bos>``."""
        if isinstance(ids, Tensor):
            ids = ids.numpy()
        words = []
        for i in np.asarray(ids, dtype=np.int64).reshape(-1).tolist():
            if i == EOS:
                break
            if i in (PAD, BOS):
                continue
            if not 0 <= i < len(self.itos):
                raise ValueError(f"token id {i} is outside this vocabulary (size {len(self)})")
            words.append(self.itos[i])
        return " ".join(words)

    def encode_batch(
        self,
        texts: Iterable[str],
        max_len: int | None = None,
        add_bos: bool = False,
        add_eos: bool = True,
    ) -> np.ndarray:
        """int64 ids [B, T], right-padded with ``<pad>``; T = ``max_len`` or the longest text.

        Longer texts are cut to ``max_len``; with ``add_eos`` the last kept token becomes
        ``<eos>`` so every row still ends.
        """
        if isinstance(texts, str):
            raise TypeError(
                "encode_batch takes an iterable of texts, not one string; wrap it: [text]"
            )
        rows = [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]
        width = max_len if max_len is not None else max((len(r) for r in rows), default=0)
        out = np.full((len(rows), width), PAD, dtype=np.int64)
        for b, r in enumerate(rows):
            if len(r) > width:
                r = r[:width]
                if add_eos and width > 0:
                    r[-1] = EOS
            out[b, : len(r)] = r
        return out

    def decode_batch(self, ids: np.ndarray | Tensor) -> list[str]:
        """Texts of an id array [B, T] (see `decode`)."""
        if isinstance(ids, Tensor):
            ids = ids.numpy()
        return [self.decode(row) for row in np.asarray(ids)]

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (for agent metadata); `from_json` reads it back."""
        return {"format": VOCAB_FORMAT, "tokens": list(self.itos)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Vocab:
        """The vocabulary saved by `to_json` (a dict, or its JSON text)."""
        if isinstance(data, str):
            data = json.loads(data)
        tokens = list(data.get("tokens", ())) if isinstance(data, Mapping) else []
        fmt = data.get("format") if isinstance(data, Mapping) else None
        if fmt != VOCAB_FORMAT or tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(
                f"not a {VOCAB_FORMAT} vocabulary: expected {{'format': {VOCAB_FORMAT!r}, "
                f"'tokens': [{', '.join(SPECIALS)}, ...]}}"
            )
        if len(set(tokens)) != len(tokens):
            raise ValueError("vocabulary tokens must be unique")
        return cls(tokens[len(SPECIALS) :])
