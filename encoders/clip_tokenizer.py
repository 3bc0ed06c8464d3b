"""CLIPTokenizer: CLIP's byte-level BPE from its own files, through the ``tokenizers`` library.

Reads ``tokenizer.json`` (Hugging Face's, the whole pipeline stored) or ``vocab.json`` +
``merges.txt`` (OpenAI's / open_clip's BPE files), for which it assembles CLIP's pipeline from
``tokenizers`` parts: NFC, runs of whitespace to one space, lower case; CLIP's split of
letters, single digits, punctuation runs and English contractions; byte-level symbols; BPE
whose word-final pieces end in ``</w>``; ``<|startoftext|> ... <|endoftext|>`` around each
text. Batches are padded or cut to the context length (77), the end token kept last, so the
ids are what ``transformers.CLIPTokenizer`` gives with ``padding="max_length", truncation=True``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

from .tokenizer import SubwordTokenizer

SOT, EOT = "<|startoftext|>", "<|endoftext|>"
#: CLIP's pre-tokenizer split: its special tokens, contractions, letter runs, single digits,
#: runs of other non-space characters
CLIP_SPLIT = (
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"
)
WORD_END = "</w>"


def clip_bpe_tokenizer(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Tokenizer:
    """CLIP's whole tokenizer pipeline over a BPE ``vocab`` ({piece: id}) and ``merges``."""
    for special in (SOT, EOT):
        if special not in vocab:
            raise ValueError(
                f"the CLIP vocabulary has no {special} token (vocab.json must hold it)"
            )
    tok = Tokenizer(
        BPE(
            vocab=vocab,
            merges=merges,
            continuing_subword_prefix="",
            end_of_word_suffix=WORD_END,
            fuse_unk=False,
            unk_token=EOT,
        )
    )
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CLIP_SPLIT), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.Sequence(
        [decoders.ByteLevel(), decoders.Replace(WORD_END, " "), decoders.Strip(" ", 0, 1)]
    )
    tok.add_special_tokens([SOT, EOT])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{SOT} $A {EOT}",
        pair=f"{SOT} $A {EOT} $B {EOT}",
        special_tokens=[(SOT, vocab[SOT]), (EOT, vocab[EOT])],
    )
    return tok


def read_merges(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The merge rules of a ``merges.txt`` (a ``#version`` first line is skipped)."""
    pairs = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("#version") or not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{str(path)!r}: a merge rule is two pieces, got {line!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


class CLIPTokenizer(SubwordTokenizer):
    """CLIP's tokenizer: texts -> int64 ids [B, context_length] framed by start/end tokens.

    A `SubwordTokenizer` (so ``decode``, ``to_json`` and the agents' vocabulary contract
    work) whose `encode_batch` pads to ``context_length`` by default. ``pad_token``: what
    fills the rest of a row, ``<|endoftext|>`` as Hugging Face does (open_clip pads with id
    0: pass its token, ``"!"``); the towers read the end token, not the padding. Build it
    with `from_files`.
    """

    def __init__(
        self, tokenizer: Tokenizer, context_length: int = 77, pad_token: str = EOT
    ) -> None:
        super().__init__(tokenizer, pad_token=pad_token, bos_token=SOT, eos_token=EOT)
        if context_length < 2:
            raise ValueError(
                f"context_length must be >= 2 (start and end tokens), got {context_length}"
            )
        self.context_length = context_length

    @classmethod
    def from_files(
        cls, path: str | os.PathLike, context_length: int = 77, pad_token: str = EOT
    ) -> CLIPTokenizer:
        """Read a folder holding ``tokenizer.json`` or ``vocab.json`` + ``merges.txt``, or one
        of those files (``merges.txt`` is looked for beside ``vocab.json``)."""
        p = Path(path).expanduser()
        if p.is_dir():
            if (p / "tokenizer.json").is_file():
                p = p / "tokenizer.json"
            elif (p / "vocab.json").is_file():
                p = p / "vocab.json"
            else:
                raise FileNotFoundError(
                    f"no tokenizer.json or vocab.json + merges.txt in folder {str(p)!r}"
                )
        if not p.is_file():
            raise FileNotFoundError(f"CLIP tokenizer file {str(p)!r} does not exist")
        if p.name == "vocab.json" or p.name.endswith("vocab.json"):
            merges = p.with_name(p.name.replace("vocab.json", "merges.txt"))
            if not merges.is_file():
                raise FileNotFoundError(
                    f"{str(p)!r} needs its merges file beside it: {str(merges)!r} is missing"
                )
            vocab = json.loads(p.read_text(encoding="utf-8"))
            tok = clip_bpe_tokenizer(vocab, read_merges(merges))
        elif p.suffix == ".json":
            tok = Tokenizer.from_file(str(p))
        else:
            raise ValueError(
                f"cannot read CLIP tokenizer {str(p)!r}: expected tokenizer.json, or vocab.json "
                "with merges.txt beside it"
            )
        return cls(tok, context_length=context_length, pad_token=pad_token)

    def to_json(self) -> dict[str, Any]:
        """`SubwordTokenizer.to_json` plus ``context_length`` (what marks a CLIP record)."""
        return {**super().to_json(), "context_length": self.context_length}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> CLIPTokenizer:
        """The tokenizer saved by `to_json` (a dict, or its JSON text)."""
        if isinstance(data, str):
            data = json.loads(data)
        base = SubwordTokenizer.from_json(data)
        return cls(base.tokenizer, int(data.get("context_length", 77)), base.pad_token)

    def encode_batch(
        self, texts: object, max_len: int | None = None, add_special_tokens: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """ids int64 [B, T] and mask int64 [B, T] (1 = token), T = ``max_len`` or
        ``context_length``; a longer text is cut keeping ``<|endoftext|>`` last."""
        return super().encode_batch(
            texts, self.context_length if max_len is None else max_len, add_special_tokens
        )


def is_clip_tokenizer(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds CLIP's tokenizer: ``vocab.json`` + ``merges.txt`` (the folder or
    the vocab file), or a ``tokenizer.json`` whose special tokens include ``<|endoftext|>``."""
    p = Path(path).expanduser()
    if p.is_dir():
        if (p / "vocab.json").is_file() and (p / "merges.txt").is_file():
            return True
        p = p / "tokenizer.json"
    if p.is_file() and p.name.endswith("vocab.json"):
        return p.with_name(p.name.replace("vocab.json", "merges.txt")).is_file()
    if not (p.is_file() and p.suffix == ".json"):
        return False
    try:
        added = json.loads(p.read_text(encoding="utf-8")).get("added_tokens") or []
    except (OSError, ValueError, AttributeError):
        return False
    return any(isinstance(t, Mapping) and t.get("content") == EOT for t in added)


def record_tokenizer(data: Mapping[str, Any]) -> SubwordTokenizer:
    """The tokenizer of a saved record: a `CLIPTokenizer` when it has ``context_length``."""
    if isinstance(data, Mapping) and "context_length" in data:
        return CLIPTokenizer.from_json(data)
    return SubwordTokenizer.from_json(data)


__all__ = [
    "CLIP_SPLIT",
    "EOT",
    "SOT",
    "CLIPTokenizer",
    "clip_bpe_tokenizer",
    "is_clip_tokenizer",
    "read_merges",
    "record_tokenizer",
]
