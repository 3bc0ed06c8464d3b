"""Text as an encoder API: a word ``Vocab``, a ``TextEncoder`` (GRU or Transformer) and a
vector-conditioned ``TextDecoder`` with teacher forcing, greedy and beam-search decoding.

Token ids follow one convention everywhere: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2,
``<unk>`` = 3; batches are right-padded with ``<pad>`` (see :meth:`Vocab.encode_batch`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import paddle
from paddle import nn

from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, Tensor
from .decoding import BOS, EOS, PAD, ConditionedDecoder
from .image_mlp import dense

UNK = 3  # PAD = 0, BOS = 1, EOS = 2 come from .decoding
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
VOCAB_FORMAT = "paddlecraft-vocab-1"


class Vocab:
    """A word-level vocabulary: lower-cased whitespace tokens <-> ids, specials first.

    ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3, then the words. Saved as a
    plain JSON-able dict (:meth:`to_json`), never pickled.
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
        """The text :meth:`decode` gives back for in-vocabulary words: lower-case, single spaces."""
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
        """Texts of an id array [B, T] (see :meth:`decode`)."""
        if isinstance(ids, Tensor):
            ids = ids.numpy()
        return [self.decode(row) for row in np.asarray(ids)]

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (for agent metadata); :meth:`from_json` reads it back."""
        return {"format": VOCAB_FORMAT, "tokens": list(self.itos)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Vocab:
        """The vocabulary saved by :meth:`to_json` (a dict, or its JSON text)."""
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


# ----------------------------------------------------------------------------- layer specs
def token_embedding(num: int, dim: int, padding_idx: int | None = PAD) -> LayerSpec:
    """An embedding table ``num x dim`` (row ``padding_idx`` stays zero)."""
    return LayerSpec(
        lambda: nn.Embedding(num, dim, padding_idx=padding_idx),
        ("embedding", num, dim, padding_idx),
    )


def gru(input_size: int, hidden_size: int, num_layers: int = 1, dropout: float = 0.0) -> LayerSpec:
    """A batch-first GRU ``input_size -> hidden_size``."""
    return LayerSpec(
        lambda: nn.GRU(input_size, hidden_size, num_layers, dropout=dropout),
        ("gru", input_size, hidden_size, num_layers),
    )


def transformer(d_model: int, heads: int, num_layers: int, ff: int, dropout: float) -> LayerSpec:
    """A stack of post-norm Transformer encoder layers of width ``d_model``."""
    return LayerSpec(
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, heads, ff, dropout=dropout), num_layers
        ),
        ("transformer", d_model, heads, num_layers, ff),
    )


def _check_token_ids(enc: Encoder, tokens: Tensor, vocab_size: int) -> None:
    # dynamic mode only: a bad id would otherwise surface as a C++ index error
    if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise EncoderInputError(
            f"{enc._who()} input 'tokens': ids must be in [0, {vocab_size}), got "
            f"[{int(tokens.min())}, {int(tokens.max())}]. Encode with the vocabulary the "
            "encoder was built for (vocab_size=len(vocab))."
        )


TOKENS_FIX = "Give token ids as [B, T] int64, right-padded with 0 (Vocab.encode_batch does this)."


class TextEncoder(Encoder):
    """Token ids [B, T] -> a sentence ``embedding`` [B, hidden_size] [-> ``prediction`` logits].

    Logical layers: ``embedding`` (token table, row 0 = ``<pad>`` stays zero), then either
    ``rnn`` (GRU, ``arch="gru"``) or ``position`` (learned positions) + ``transformer``
    (``arch="transformer"``, padding keys masked out), ``projection`` (linear + tanh to
    ``hidden_size``: the sentence embedding) and, with ``num_classes``, ``prediction``.
    Features are mean-pooled over non-pad positions, so extra right padding does not change
    the result. Input ``tokens``: [B, T] int64 (T <= ``max_len`` for the transformer).
    Outputs: ``prediction`` [B, num_classes] (primary) when ``num_classes`` is set, and
    ``embedding`` [B, hidden_size]. The transformer's feed-forward width is ``4 * embed_dim``.
    """

    def __init__(
        self,
        scope: str,
        vocab_size: int,
        embed_dim: int = 64,
        hidden_size: int = 128,
        arch: str = "gru",
        num_layers: int = 1,
        num_heads: int = 4,
        max_len: int = 64,
        num_classes: int | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__(scope)
        if arch not in ("gru", "transformer"):
            raise ValueError(
                f"TextEncoder({scope!r}): arch must be 'gru' or 'transformer', got {arch!r}"
            )
        if arch == "transformer" and embed_dim % num_heads:
            raise ValueError(
                f"TextEncoder({scope!r}): embed_dim={embed_dim} must be divisible by "
                f"num_heads={num_heads} for the transformer"
            )
        self.vocab_size, self.embed_dim, self.hidden_size = vocab_size, embed_dim, hidden_size
        self.arch, self.max_len, self.num_classes = arch, max_len, num_classes
        self.declare("embedding", token_embedding(vocab_size, embed_dim))
        if arch == "gru":
            self.declare("rnn", gru(embed_dim, hidden_size, num_layers, dropout))
            features = hidden_size
        else:
            self.declare("position", token_embedding(max_len, embed_dim, padding_idx=None))
            self.declare(
                "transformer", transformer(embed_dim, num_heads, num_layers, 4 * embed_dim, dropout)
            )
            features = embed_dim
        self.declare("projection", dense(features, hidden_size))
        if num_classes is not None:
            self.declare("prediction", dense(hidden_size, num_classes))
        self.declare_input("tokens", InputSpec((None,), dtypes=("int64", "int32")))
        self.declare_outputs(*(("prediction", "embedding") if num_classes else ("embedding",)))

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return TOKENS_FIX

    def _forward(self, tokens: Tensor) -> dict[str, Tensor]:
        if paddle.in_dynamic_mode():
            _check_token_ids(self, tokens, self.vocab_size)
            if self.arch == "transformer" and tokens.shape[1] > self.max_len:
                raise EncoderInputError(
                    f"{self._who()} input 'tokens': {tokens.shape[1]} positions but max_len="
                    f"{self.max_len}. Cut the text (encode_batch(max_len=...)) or build with a "
                    "larger max_len."
                )
        keep = tokens != PAD  # [B, T]
        x = self.layers["embedding"](tokens)  # [B, T, E]
        if self.arch == "gru":
            h, _ = self.layers["rnn"](x)  # [B, T, H]; right padding never reaches earlier steps
        else:
            pos = paddle.cumsum(tokens * 0 + 1, axis=1) - 1  # [B, T]: 0..T-1
            x = x + self.layers["position"](pos)  # [B, T, E]
            h = self.layers["transformer"](x, keep.unsqueeze([1, 2]))  # [B, T, E], pad keys off
        mask = paddle.cast(keep, h.dtype).unsqueeze(-1)  # [B, T, 1]
        pooled = (h * mask).sum(axis=1) / paddle.clip(mask.sum(axis=1), min=1.0)  # [B, F]
        emb = paddle.tanh(self.layers["projection"](pooled))  # [B, hidden_size]
        out = {"embedding": emb}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](emb)  # [B, num_classes]
        return out


class TextDecoder(ConditionedDecoder):
    """Next-token logits [B, T, vocab] for a sentence conditioned on a vector (e.g. an image).

    Logical layers: ``init`` (linear + tanh: condition -> initial GRU state), ``embedding``
    (token table), ``rnn`` (GRU over [token embedding, condition] at every step) and
    ``prediction`` (hidden -> vocabulary logits). Inputs: ``cond`` [B, cond_dim] float32 and
    ``tokens`` [B, T] int64, the teacher-forcing input ``<bos> + target[:-1]``
    (:meth:`teacher_forcing_inputs`). Output ``prediction``: [B, T, vocab_size] logits.
    Train with :meth:`loss`; decode with :meth:`greedy` or :meth:`beam_search` (dynamic mode,
    see :class:`~encoders.decoding.ConditionedDecoder`). Decoding never emits ``<pad>`` or
    ``<bos>`` before ``<eos>``.
    """

    def __init__(
        self,
        scope: str,
        vocab_size: int,
        cond_dim: int,
        embed_dim: int = 64,
        hidden_size: int = 128,
        max_len: int = 20,
    ) -> None:
        super().__init__(scope)
        self.vocab_size, self.cond_dim, self.embed_dim = vocab_size, cond_dim, embed_dim
        self.hidden_size, self.max_len = hidden_size, max_len
        self.declare("init", dense(cond_dim, hidden_size))
        self.declare("embedding", token_embedding(vocab_size, embed_dim))
        self.declare("rnn", gru(embed_dim + cond_dim, hidden_size))
        self.declare("prediction", dense(hidden_size, vocab_size))
        self.declare_input("cond", InputSpec((cond_dim,)))
        self.declare_input("tokens", InputSpec((None,), dtypes=("int64", "int32")))
        self.declare_outputs("prediction")

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        if name == "cond":
            return f"Give the condition as [B, {self.cond_dim}] float32 (cast with .astype('float32'))."
        return TOKENS_FIX

    # ------------------------------------------------------------------ graph
    def _initial_state(self, cond: Tensor) -> Tensor:
        return paddle.tanh(self.layers["init"](cond)).unsqueeze(0)  # [1, B, H]

    def _run(self, cond: Tensor, tokens: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        e = self.layers["embedding"](tokens)  # [B, T, E]
        steps = paddle.cast(tokens * 0 + 1, e.dtype).unsqueeze(-1)  # [B, T, 1] ones
        x = paddle.concat([e, cond.unsqueeze(1) * steps], axis=-1)  # [B, T, E + C]
        return self.layers["rnn"](x, state)  # [B, T, H], [1, B, H]

    def _forward(self, cond: Tensor, tokens: Tensor) -> dict[str, Tensor]:
        if paddle.in_dynamic_mode():
            _check_token_ids(self, tokens, self.vocab_size)
        h, _ = self._run(cond, tokens, self._initial_state(cond))  # [B, T, H]
        return {"prediction": self.layers["prediction"](h)}  # [B, T, V]

    # ------------------------------------------------------------------ decoding hooks
    def _init_state(self, cond: Tensor) -> Tensor:
        return self._initial_state(cond)  # [1, N, H]

    def _next_logits(self, cond: Tensor, tokens: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        out, state = self._run(cond, tokens, state)  # [N, 1, H], [1, N, H]
        return self.layers["prediction"](out[:, 0]), state  # [N, V]

    def _select_state(self, state: Tensor, index: Tensor) -> Tensor:
        return paddle.gather(state, index, axis=1)  # [1, M, H]
