"""Transformer building blocks shared by the BERT-, Whisper- and GPT-style models.

Sublayer names follow the reference implementations so pretrained key maps stay short:
`MultiHeadAttention` has ``q_proj`` / ``k_proj`` / ``v_proj`` / ``out_proj``;
`PostNormBlock` (BERT) ``attention``, ``attention_norm``, ``intermediate``,
``output``, ``output_norm``; `PreNormBlock` (Whisper, GPT) ``self_attn``,
``self_attn_layer_norm``, ``fc1``, ``fc2``, ``final_layer_norm``.

Attention masks are additive biases broadcast to [B, heads, T_query, T_key]: 0 where a
query may look, `MASKED` where it may not (see `padding_bias`, `causal_bias`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

Tensor = paddle.Tensor
KVCache = tuple[Tensor, Tensor]  # keys, values: [B, heads, t, head_dim] each

#: bias of a masked attention score: exp() underflows to exactly 0 in float32 and float64
MASKED = -1e9


def padding_bias(keep: Tensor, dtype: Any) -> Tensor:
    """Additive bias [B, 1, 1, T] from a key mask [B, T] (nonzero/True = a real token)."""
    keep = paddle.cast(paddle.cast(keep, "bool"), dtype)  # [B, T]
    return ((1.0 - keep) * MASKED).unsqueeze([1, 2])  # [B, 1, 1, T]


def causal_bias(length: int, dtype: Any) -> Tensor:
    """Additive bias [1, 1, T, T] that hides later positions from each query."""
    upper = np.triu(np.full((length, length), MASKED, dtype=np.float64), k=1)  # [T, T]
    return paddle.to_tensor(upper).astype(dtype)[None, None]  # [1, 1, T, T]


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> np.ndarray:
    """Whisper's fixed position table [length, channels]: ``[sin | cos]`` halves."""
    if channels % 2:
        raise ValueError(f"sinusoidal positions need an even width, got {channels}")
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = np.exp(-increment * np.arange(channels // 2))  # [C/2]
    scaled = np.arange(length)[:, None] * inv_timescales[None, :]  # [L, C/2]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)  # [L, C]


class MultiHeadAttention(nn.Layer):
    """Scaled dot-product self-attention over [B, T, D] with ``heads`` heads.

    ``key_bias=False`` drops the key projection's bias (Whisper). ``forward`` takes an
    optional additive ``bias`` (broadcast to [B, heads, T, T_key]) and an optional KV
    ``cache`` of earlier positions, and returns the output and the keys/values including
    this call's positions (for incremental decoding).
    """

    def __init__(self, dim: int, heads: int, key_bias: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"attention width {dim} must be divisible by heads={heads}")
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim, bias_attr=None if key_bias else False)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x: Tensor) -> Tensor:
        # 0 = "keep this axis": works for static shapes with unknown B and T too
        return x.reshape([0, 0, self.heads, self.head_dim]).transpose([0, 2, 1, 3])  # [B, H, T, d]

    def forward(
        self, x: Tensor, bias: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, KVCache]:
        q = self._split(self.q_proj(x))  # [B, H, T, d]
        k = self._split(self.k_proj(x))  # [B, H, T, d]
        v = self._split(self.v_proj(x))  # [B, H, T, d]
        if cache is not None:
            k = paddle.concat([cache[0], k], axis=2)  # [B, H, t + T, d]
            v = paddle.concat([cache[1], v], axis=2)
        scores = paddle.matmul(q, k, transpose_y=True) / math.sqrt(self.head_dim)  # [B, H, T, Tk]
        if bias is not None:
            scores = scores + bias
        weights = self.dropout(F.softmax(scores, axis=-1))  # [B, H, T, Tk]
        out = paddle.matmul(weights, v).transpose([0, 2, 1, 3])  # [B, T, H, d]
        out = out.reshape([0, 0, self.dim])  # [B, T, D]
        return self.out_proj(out), (k, v)


class PostNormBlock(nn.Layer):
    """A BERT encoder block: ``x = LN(x + attn(x))``, ``x = LN(x + W2 gelu(W1 x))``."""

    def __init__(
        self, dim: int, heads: int, mlp_dim: int, dropout: float = 0.0, eps: float = 1e-12
    ) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(dim, heads, dropout=dropout)
        self.attention_norm = nn.LayerNorm(dim, epsilon=eps)
        self.intermediate = nn.Linear(dim, mlp_dim)
        self.output = nn.Linear(mlp_dim, dim)
        self.output_norm = nn.LayerNorm(dim, epsilon=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, bias: Tensor | None = None) -> Tensor:
        a, _ = self.attention(x, bias)  # [B, T, D]
        x = self.attention_norm(x + self.dropout(a))
        h = F.gelu(self.intermediate(x), approximate=False)  # [B, T, mlp_dim]
        return self.output_norm(x + self.dropout(self.output(h)))  # [B, T, D]


def quick_gelu(x: Tensor) -> Tensor:
    """CLIP's GELU approximation ``x * sigmoid(1.702 x)``."""
    return x * F.sigmoid(1.702 * x)


#: activations a `PreNormBlock` takes: exact (erf) GELU (Whisper, GPT-2) or CLIP's quick GELU
ACTIVATIONS = ("gelu", "quick_gelu")


class PreNormBlock(nn.Layer):
    """A Whisper/GPT/CLIP block: ``x += attn(LN(x))``, ``x += fc2 act(fc1 LN(x))``; KV cache aware.

    ``activation``: ``"gelu"`` (exact, Whisper and GPT) or ``"quick_gelu"`` (CLIP).
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        mlp_dim: int,
        dropout: float = 0.0,
        eps: float = 1e-5,
        key_bias: bool = True,
        activation: str = "gelu",
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.self_attn = MultiHeadAttention(dim, heads, key_bias=key_bias, dropout=dropout)
        self.self_attn_layer_norm = nn.LayerNorm(dim, epsilon=eps)
        self.fc1 = nn.Linear(dim, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim, epsilon=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, bias: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, KVCache]:
        a, kv = self.self_attn(self.self_attn_layer_norm(x), bias, cache)  # [B, T, D]
        x = x + self.dropout(a)
        h = self.fc1(self.final_layer_norm(x))  # [B, T, mlp_dim]
        h = quick_gelu(h) if self.activation == "quick_gelu" else F.gelu(h, approximate=False)
        return x + self.dropout(self.fc2(h)), kv  # [B, T, D]
