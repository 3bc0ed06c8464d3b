"""The two sides of a referential game: a `Sender` that turns what it sees into a
discrete message, and a `Receiver` that reads the message and points at the target
among candidates (discrimination) or rebuilds its attributes (reconstruction).

```python
out = sender(x, channel="gs", temperature=1.0)   # out["onehot"]: [B, L, V] straight-through
h = receiver(out["onehot"])                       # [B, L, H]: the reading after each symbol
receiver.reconstruct(h)                           # [B, L, n_attributes, n_values] logits
receiver.score(h, candidates)                     # [B, L, K] one score per candidate
```

Objects are seen either as vectors (``input_size``: one-hot attributes) or through any
PaddleCraft encoder (``encoder``: images, speech); `pooled_features` is the one place
an encoder's output is read. Symbol 0 is the end-of-message symbol when messages have a
variable length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import paddle
import paddle.nn.functional as F
from paddle import nn

from paddlecraft.paddle_private import linear as _linear

from .base import Agent, AgentConfig
from .plug import image_inputs

__all__ = ["Receiver", "ReceiverConfig", "Sender", "SenderConfig", "pooled_features"]

CELLS = ("gru", "lstm", "transformer", "linear")


def pooled_features(encoder: Any, x: paddle.Tensor) -> paddle.Tensor:
    """An encoder's pooled feature vector [B, D] for inputs ``x`` (the ONE adapter to the
    encoder feature contract: change it here if the contract changes)."""
    return encoder.forward_features(x)  # the contract's ``pooled`` output


def _check(name: str, cfg: Any, needs_view: bool = True) -> None:
    from .settings import ConfigError

    if cfg.cell not in CELLS:
        raise ConfigError(f"agents.{name}.cell: one of {list(CELLS)}, got {cfg.cell!r}")
    if needs_view and cfg.encoder is None and not cfg.input_size:
        raise ConfigError(
            f"agents.{name}: give input_size (objects as vectors) or an encoder config "
            f"(e.g. encoder@agents.{name}.encoder=cnn)"
        )
    if cfg.vocab_size < 2 or cfg.max_len < 1:
        raise ConfigError(
            f"agents.{name}: vocab_size >= 2 and max_len >= 1 needed, got "
            f"{cfg.vocab_size} and {cfg.max_len}"
        )


class _ObjectView(nn.Layer):
    """What an agent sees of an object: a vector [B, input_size] or an encoder's features."""

    def __init__(
        self,
        agent: Agent,
        encoder_cfg: Any,
        input_size: int | None,
        out: int,
        role: str = "",
        image_shape: Any = None,
        frozen: bool = False,
    ) -> None:
        super().__init__()
        #: a fixed encoder: no gradients, eval mode (BatchNorm statistics and dropout fixed)
        self.frozen = bool(frozen and encoder_cfg is not None)
        if encoder_cfg is not None:  # headless, sized from the data: the feature contract
            self.encoder = agent.make_encoder(
                encoder_cfg,
                role or "encoder",
                slot=role or "encoder",
                inputs=image_inputs(image_shape),
                forced={"waveform_input": True} if role == "ear" else None,  # hears waveforms
                takes="speech encoder" if role == "ear" else None,
                headless=True,
                features=True,
            )
            dim = int(self.encoder.feature_dim)
        else:
            self.encoder, dim = None, int(input_size)
        head = f"{role}_in" if role else "object"
        self.project = agent.make_head(head, lambda: nn.Linear(dim, out))
        if self.frozen:
            for p in self.encoder.parameters():
                p.stop_gradient = True

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if self.encoder is None:
            feats = x
        elif self.frozen:
            if self.encoder.training:
                self.encoder.eval()
            with paddle.no_grad():
                feats = pooled_features(self.encoder, x)  # [B, D]
        else:
            feats = pooled_features(self.encoder, x)  # [B, D]
        return _linear(self.project, feats)  # [B, out]


def _causal_mask(n: int) -> paddle.Tensor:
    """[n, n] additive mask: position t attends to positions <= t."""
    return paddle.triu(paddle.full([n, n], float("-inf")), diagonal=1)


@dataclass
class MessageAgentConfig(AgentConfig):
    """Settings a speaker and a listener share: what they see and the message's shape."""

    encoder: Any = None  #: an encoder config for images/speech; None: vectors of input_size
    input_size: Optional[int] = None  #: object vector length (one-hot attributes)  # noqa: UP045
    image_shape: Optional[list[int]] = None  #: [C, H, W] of images (sizes the encoder)  # noqa: UP045
    vocab_size: int = 10  #: symbols, the end symbol 0 included
    max_len: int = 2  #: symbols per message
    hidden_size: int = 128  #: recurrent state
    embed_size: int = 32  #: symbol embedding
    cell: str = "gru"  #: gru | lstm | transformer | linear (no recurrence: position-wise)
    #: fix the image encoder (e.g. a loaded ResNet or ViT: encoder.pretrained=FILE): no
    #: updates, eval mode; the agent's own layers on top of its features still learn
    frozen_encoder: bool = False


@dataclass
class SenderConfig(MessageAgentConfig):
    """paddlecraft.agents.Sender settings."""


class Sender(Agent):
    """Sees an object, emits ``max_len`` symbols one at a time (autoregressive GRU, LSTM or
    causal Transformer), through a Gumbel-softmax or a REINFORCE channel."""

    Config = SenderConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        c = self.cfg
        _check(name, c)
        self.vocab_size, self.max_len, self.cell = c.vocab_size, c.max_len, c.cell
        h, e, v = c.hidden_size, c.embed_size, c.vocab_size
        with self.seeded():
            self.view = _ObjectView(
                self, c.encoder, c.input_size, h, image_shape=c.image_shape,
                frozen=c.frozen_encoder,
            )  # fmt: skip
            self.embed = self.make_head("embed", lambda: nn.Linear(v, e, bias_attr=False))
            if c.cell == "gru":
                self.rnn = self.make_head("rnn", lambda: nn.GRUCell(e, h))
            elif c.cell == "lstm":
                self.rnn = self.make_head("rnn", lambda: nn.LSTMCell(e, h))
            elif c.cell == "transformer":
                self.symbol_in = self.make_head("symbol_in", lambda: nn.Linear(e, h))
                self.rnn = self.make_head(
                    "transformer",
                    lambda: nn.TransformerEncoder(
                        nn.TransformerEncoderLayer(h, 4, 2 * h, dropout=0.0), 1
                    ),
                )
            if c.cell == "linear":  # every position read off the object linearly at once
                self.out = self.make_head("out", lambda: nn.Linear(h, v * c.max_len))
            else:
                self.out = self.make_head("out", lambda: nn.Linear(h, v))
        self.finish()

    def forward(
        self,
        x: paddle.Tensor,
        channel: str = "gs",
        temperature: float = 1.0,
        greedy: bool = False,
    ) -> dict[str, paddle.Tensor]:
        """Speak about objects ``x`` [B, ...].

        Returns ``symbols`` int64 [B, L]; with ``channel="gs"`` also ``onehot`` [B, L, V]
        (straight-through: one-hot forward, soft gradient) and ``logits`` [B, L, V]; with ``"reinforce"`` also
        ``log_prob`` [B, L] and ``entropy`` [B, L] of each symbol.
        """
        from .channel import categorical_sample, gumbel_symbols

        ctx = self.view(x)  # [B, H]
        b = ctx.shape[0]
        if self.cell == "linear":  # every position at once: one noise draw, no loop
            every = _linear(self.out, ctx).reshape([b, self.max_len, self.vocab_size])  # [B, L, V]
            if channel == "gs":
                y, sym = gumbel_symbols(every, temperature, noise=not greedy)  # [B, L, V], [B, L]
                return {"symbols": sym, "onehot": y, "logits": every}
            flat = every.reshape([b * self.max_len, self.vocab_size])
            sym, lp, ent = categorical_sample(flat, greedy=greedy)
            shape = [b, self.max_len]
            return {
                "symbols": sym.reshape(shape),
                "log_prob": lp.reshape(shape),
                "entropy": ent.reshape(shape),
            }
        prev = paddle.zeros([b, self.embed.weight.shape[1]])  # [B, E] start of message
        state: Any = ctx if self.cell == "gru" else (ctx, paddle.zeros_like(ctx))
        seq = [ctx]  # transformer: the context token, then each symbol's embedding
        symbols, onehots, logps, ents, scores = [], [], [], [], []
        for _ in range(self.max_len):
            hid, state = self._advance(prev, state, seq)
            logits = self.out(hid)  # [B, V]
            if channel == "gs":
                y, sym = gumbel_symbols(logits, temperature, noise=not greedy)  # [B, V], [B]
                onehots.append(y)
                scores.append(logits)
            else:
                sym, lp, ent = categorical_sample(logits, greedy=greedy)
                y = F.one_hot(sym, self.vocab_size)
                logps.append(lp)
                ents.append(ent)
            symbols.append(sym)
            prev = self.embed(y)  # [B, E]
            seq.append(prev)
        out = {"symbols": paddle.stack(symbols, axis=1)}  # [B, L]
        if channel == "gs":
            out["onehot"] = paddle.stack(onehots, axis=1)  # [B, L, V]
            out["logits"] = paddle.stack(scores, axis=1)  # [B, L, V]
        else:
            out["log_prob"] = paddle.stack(logps, axis=1)  # [B, L]
            out["entropy"] = paddle.stack(ents, axis=1)  # [B, L]
        return out

    def _advance(self, prev: paddle.Tensor, state: Any, seq: list) -> tuple[paddle.Tensor, Any]:
        """One recurrent step: the hidden output [B, H] after the previous symbol's embedding
        ``prev`` [B, E] (transformer: over ``seq``, the context and every embedding so far)."""
        if self.cell == "transformer":
            if len(seq) > 1:
                seq[-1] = self.symbol_in(seq[-1])
            tokens = paddle.stack(seq, axis=1)  # [B, t, H]
            return self.rnn(tokens, _causal_mask(tokens.shape[1]))[:, -1], state
        return self.rnn(prev, state)

    def teacher_forced(self, x: paddle.Tensor, symbols: paddle.Tensor) -> paddle.Tensor:
        """Logits [B, L, V] of each position about objects ``x`` [B, ...] when the message so
        far is ``symbols`` int64 [B, L] (what a new speaker imitating a teacher learns from)."""
        ctx = self.view(x)  # [B, H]
        b = ctx.shape[0]
        if self.cell == "linear":  # positions do not read each other
            return _linear(self.out, ctx).reshape([b, self.max_len, self.vocab_size])
        said = F.one_hot(symbols, self.vocab_size).astype(ctx.dtype)  # [B, L, V]
        prev = paddle.zeros([b, self.embed.weight.shape[1]])  # [B, E]
        state: Any = ctx if self.cell == "gru" else (ctx, paddle.zeros_like(ctx))
        seq, out = [ctx], []
        for t in range(self.max_len):
            hid, state = self._advance(prev, state, seq)
            out.append(self.out(hid))  # [B, V]
            prev = self.embed(said[:, t])  # [B, E]
            seq.append(prev)
        return paddle.stack(out, axis=1)  # [B, L, V]


@dataclass
class ReceiverConfig(MessageAgentConfig):
    """paddlecraft.agents.Receiver settings (``encoder``/``input_size``: the candidates)."""

    ear: Any = None  #: a speech encoder config: hear spoken messages (arena.spoken=true)
    n_attributes: int = 0  #: reconstruction: attributes to rebuild (0: discrimination only)
    n_values: int = 0  #: reconstruction: values per attribute


class Receiver(Agent):
    """Reads a message symbol by symbol; after each symbol it can rebuild the attributes
    (`reconstruct`) or score candidates (`score`)."""

    Config = ReceiverConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        c = self.cfg
        reconstruct = c.n_attributes > 0 and c.n_values > 0
        _check(name, c, needs_view=not reconstruct)
        self.vocab_size, self.cell = c.vocab_size, c.cell
        self.n_attributes, self.n_values = c.n_attributes, c.n_values
        self._masks: dict[int, paddle.Tensor] = {}  # linear cell: causal masks by length
        h, e, v = c.hidden_size, c.embed_size, c.vocab_size
        with self.seeded():
            self.embed = self.make_head("embed", lambda: nn.Linear(v, e, bias_attr=False))
            if c.cell == "gru":
                self.rnn = self.make_head("rnn", lambda: nn.GRU(e, h))
            elif c.cell == "lstm":
                self.rnn = self.make_head("rnn", lambda: nn.LSTM(e, h))
            elif c.cell == "linear":  # a linear reading of (position, symbol) pairs so far
                self.rnn = self.make_head("read", lambda: nn.Linear(c.max_len * v, h))
            else:
                self.symbol_in = self.make_head("symbol_in", lambda: nn.Linear(e, h))
                self.rnn = self.make_head(
                    "transformer",
                    lambda: nn.TransformerEncoder(
                        nn.TransformerEncoderLayer(h, 4, 2 * h, dropout=0.0), 1
                    ),
                )
                self.position = self.make_head("position", lambda: nn.Embedding(c.max_len, h))
            if reconstruct:
                self.attributes = self.make_head(
                    "attributes", lambda: nn.Linear(h, c.n_attributes * c.n_values)
                )
            if c.encoder is not None or c.input_size:
                self.view = _ObjectView(
                    self, c.encoder, c.input_size, h, image_shape=c.image_shape,
                    frozen=c.frozen_encoder,
                )  # fmt: skip
            self.ear = None if c.ear is None else _ObjectView(self, c.ear, None, h, "ear")
        self.finish()

    def hear(self, waveform: paddle.Tensor) -> paddle.Tensor:
        """The reading [B, 1, H] of spoken messages, waveforms [B, S] (needs ``ear``)."""
        if self.ear is None:
            from .settings import ConfigError

            raise ConfigError(
                f"agents.{self.name}.ear is not set: give the listener an ear (a speech "
                "encoder config, as arena=referential_spoken does) to hear waveforms"
            )
        return self.ear(waveform).unsqueeze(1)

    def forward(self, message: paddle.Tensor) -> paddle.Tensor:
        """The reading after each symbol, [B, L, H], of a message as one-hot (or relaxed)
        symbols [B, L, V] float, or as int64 symbols [B, L]."""
        if message.dtype in (paddle.int64, paddle.int32):
            message = F.one_hot(message, self.vocab_size)
        if self.cell == "linear":
            b, n, v = message.shape
            upto = (message.unsqueeze(1) * self._seen(n)).reshape([b, n, n * v])  # [B, L, L * V]
            return _linear(self.rnn, upto)  # [B, L, H]
        emb = self.embed(message)  # [B, L, E]
        if self.cell == "transformer":
            n = emb.shape[1]
            tokens = self.symbol_in(emb) + self.position(paddle.arange(n)).unsqueeze(0)
            return self.rnn(tokens, _causal_mask(n))  # [B, L, H]
        out, _ = self.rnn(emb)  # [B, L, H]
        return out

    def _seen(self, n: int) -> paddle.Tensor:
        """[1, t, s, 1]: 1 where s <= t, made once per message length (a constant)."""
        seen = self._masks.get(n)
        if seen is None:
            seen = paddle.tril(paddle.ones([n, n])).reshape([1, n, n, 1])
            self._masks[n] = seen
        return seen

    def reconstruct(self, h: paddle.Tensor) -> paddle.Tensor:
        """Attribute logits [..., n_attributes, n_values] from readings [..., H]."""
        logits = _linear(self.attributes, h)
        return logits.reshape([*h.shape[:-1], self.n_attributes, self.n_values])

    def score(self, h: paddle.Tensor, candidates: paddle.Tensor) -> paddle.Tensor:
        """Scores [B, L, K]: readings [B, L, H] against candidates [B, K, ...] (dot product)."""
        b, k = candidates.shape[0], candidates.shape[1]
        flat = candidates.reshape([b * k, *candidates.shape[2:]])
        emb = self.view(flat).reshape([b, k, -1])  # [B, K, H]
        return paddle.matmul(h, emb, transpose_y=True)  # [B, L, K]
