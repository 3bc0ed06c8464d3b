"""SubwordTokenizer: real subword text <-> ids through the maintained ``tokenizers`` library.

Reads a BERT WordPiece ``vocab.txt`` or any ``tokenizer.json`` (Hugging Face format: BPE,
WordPiece, Unigram...). Gives padded int64 ids and an attention mask for encoders
(`SubwordTokenizer.encode_batch`), ``text + <eos>`` targets for decoders
(`SubwordTokenizer.encode_targets`) and text back (`SubwordTokenizer.decode`).
The word-level `Vocab` stays the tokenizer of the synthetic grammar.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import paddle
from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

TOKENIZER_FORMAT = "paddlecraft-subword-1"
#: special tokens looked up when none is named, first found wins
PAD_TOKENS = ("[PAD]", "<pad>", "<|pad|>", "<PAD>")
BOS_TOKENS = ("[CLS]", "<s>", "<bos>", "<|startoftext|>", "<|endoftext|>")
EOS_TOKENS = ("[SEP]", "</s>", "<eos>", "<|endoftext|>")


class SubwordTokenizer:
    """Subword tokenizer: texts -> padded int64 ids [B, T] + mask, ids -> text.

    ``pad_id`` pads batches (required); ``bos_id`` / ``eos_id`` (BERT: ``[CLS]`` /
    ``[SEP]``; BPE files: ``<s>`` / ``</s>``) frame decoder targets and end decoding.
    Build it with `from_file`; save it inside agent metadata with `to_json`.
    """

    def __init__(
        self,
        tokenizer: Tokenizer | BertWordPieceTokenizer,
        pad_token: str | None = None,
        bos_token: str | None = None,
        eos_token: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.pad_token = self._special("pad_token", pad_token, PAD_TOKENS, required=True)
        self.bos_token = self._special("bos_token", bos_token, BOS_TOKENS)
        self.eos_token = self._special("eos_token", eos_token, EOS_TOKENS)
        self.pad_id = tokenizer.token_to_id(self.pad_token)
        self.bos_id = None if self.bos_token is None else tokenizer.token_to_id(self.bos_token)
        self.eos_id = None if self.eos_token is None else tokenizer.token_to_id(self.eos_token)

    def _special(
        self, setting: str, given: str | None, candidates: Sequence[str], required: bool = False
    ) -> str | None:
        if given is not None:
            if self.tokenizer.token_to_id(given) is None:
                raise ValueError(f"{setting}={given!r} is not in the tokenizer's vocabulary")
            return given
        for tok in candidates:
            if self.tokenizer.token_to_id(tok) is not None:
                return tok
        if required:
            raise ValueError(
                f"the tokenizer has none of {list(candidates)}: name its padding token with "
                f"{setting}=..."
            )
        return None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike,
        lowercase: bool = True,
        pad_token: str | None = None,
        bos_token: str | None = None,
        eos_token: str | None = None,
    ) -> SubwordTokenizer:
        """Read ``vocab.txt`` (BERT WordPiece; ``lowercase`` for uncased models) or ``tokenizer.json``.

        A folder is searched for ``tokenizer.json`` first, then ``vocab.txt``.
        """
        p = Path(path)
        if p.is_dir():
            found = [p / n for n in ("tokenizer.json", "vocab.txt") if (p / n).is_file()]
            if not found:
                raise FileNotFoundError(f"no tokenizer.json or vocab.txt in folder {str(p)!r}")
            p = found[0]
        if not p.is_file():
            raise FileNotFoundError(f"tokenizer file {str(p)!r} does not exist")
        if p.suffix == ".json":
            tok: Any = Tokenizer.from_file(str(p))
        elif p.suffix == ".txt":
            tok = BertWordPieceTokenizer(str(p), lowercase=lowercase)
        else:
            raise ValueError(
                f"cannot read tokenizer {str(p)!r}: expected a WordPiece vocab.txt or a "
                "tokenizers tokenizer.json"
            )
        return cls(tok, pad_token=pad_token, bos_token=bos_token, eos_token=eos_token)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict holding the whole tokenizer (for agent metadata); see `from_json`."""
        return {
            "format": TOKENIZER_FORMAT,
            "tokenizer": json.loads(self.tokenizer.to_str()),
            "pad_token": self.pad_token,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> SubwordTokenizer:
        """The tokenizer saved by `to_json` (a dict, or its JSON text)."""
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping) or data.get("format") != TOKENIZER_FORMAT:
            raise ValueError(
                f"not a {TOKENIZER_FORMAT} tokenizer record (see SubwordTokenizer.to_json)"
            )
        tok = Tokenizer.from_str(json.dumps(data["tokenizer"]))
        return cls(tok, data["pad_token"], data["bos_token"], data["eos_token"])

    # ------------------------------------------------------------------ encode
    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def __repr__(self) -> str:
        return (
            f"SubwordTokenizer({len(self)} tokens, pad={self.pad_token!r}, eos={self.eos_token!r})"
        )

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of one text (``add_special_tokens``: the file's framing, BERT ``[CLS] .. [SEP]``)."""
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def encode_batch(
        self, texts: Iterable[str], max_len: int | None = None, add_special_tokens: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encoder inputs: ids int64 [B, T] right-padded with ``pad_id``, and mask int64 [B, T] (1 = token).

        T = ``max_len`` or the longest text. A longer text is cut to ``max_len``, keeping its
        closing special token (BERT ``[SEP]``) last.
        """
        texts = _texts(texts, "encode_batch")
        rows = [
            list(e.ids)
            for e in self.tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)
        ]
        return self._pad(rows, max_len, keep_last=add_special_tokens)

    def encode_targets(self, texts: Iterable[str], max_len: int | None = None) -> np.ndarray:
        """Decoder targets: ids int64 [B, T] of ``text + <eos>`` right-padded with ``pad_id``.

        The same layout as `Vocab.encode_batch` gives a decoder (its ``tokens`` input
        is ``teacher_forcing_inputs(targets, tokenizer.bos_id)``).
        """
        if self.eos_id is None:
            raise ValueError(
                f"{self!r} has no end token: build it with eos_token=... to make decoder targets"
            )
        texts = _texts(texts, "encode_targets")
        encoded = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        rows = [[*e.ids, self.eos_id] for e in encoded]
        return self._pad(rows, max_len, keep_last=True)[0]

    def _pad(
        self, rows: list[list[int]], max_len: int | None, keep_last: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        width = max_len if max_len is not None else max((len(r) for r in rows), default=0)
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for b, r in enumerate(rows):
            if len(r) > width:
                r = r[: width - 1] + r[-1:] if keep_last and width > 0 else r[:width]
            ids[b, : len(r)] = r
            mask[b, : len(r)] = 1
        return ids, mask

    # ------------------------------------------------------------------ decode
    def decode(self, ids: Iterable[int] | np.ndarray | paddle.Tensor) -> str:
        """Text of ``ids``: a leading ``bos`` is skipped, decoding stops at ``eos``, specials dropped."""
        if isinstance(ids, paddle.Tensor):
            ids = ids.numpy()
        seq = np.asarray(ids, dtype=np.int64).reshape(-1).tolist()
        if seq and self.bos_id is not None and seq[0] == self.bos_id:
            seq = seq[1:]
        if self.eos_id is not None and self.eos_id in seq:
            seq = seq[: seq.index(self.eos_id)]
        bad = [i for i in seq if not 0 <= i < len(self)]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside this tokenizer (size {len(self)})")
        return self.tokenizer.decode(seq, skip_special_tokens=True)

    def decode_batch(self, ids: np.ndarray | paddle.Tensor) -> list[str]:
        """Texts of an id array [B, T] (see `decode`)."""
        if isinstance(ids, paddle.Tensor):
            ids = ids.numpy()
        return [self.decode(row) for row in np.asarray(ids)]


def _texts(texts: Iterable[str], what: str) -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{what} takes an iterable of texts, not one string; wrap it: [text]")
    return list(texts)
