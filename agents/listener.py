"""Text + K candidate images -> the described image: the `Listener` agent.

```python
lis.choose(captions, candidates)   # [N] texts, uint8 [N, K, 64, 64, 3] -> int64 [N]
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle
import paddle.nn.functional as F
from omegaconf import MISSING
from paddle import nn

from paddlecraft.encoders import Vocab

from .base import AgentConfig
from .plug import image_inputs
from .text_agent import (
    TextAgent,
    batch_slices,
    check_image_encoder,
    images_to_array,
    input_channels,
)

__all__ = ["Listener", "ListenerConfig"]


@dataclass
class ListenerConfig(AgentConfig):
    """paddlecraft.agents.Listener settings."""

    text_encoder: Any = MISSING
    #: ^ text side (conf/encoder/*: gru_text, bert_mini...); vocab_size filled in, headless
    encoder: Any = MISSING
    #: ^ image side (conf/encoder/*); built headless, sized from image_shape
    image_shape: Optional[list[int]] = None  # noqa: UP045
    #: ^ [channels, height, width] of the images (from the data); fills the encoder's sizes
    words: Any = "shapes"  #: vocabulary: shapes | digits | a list of words | a tokenizer file
    dim: int = 64  #: joint embedding size
    temperature: float = 0.1  #: softmax temperature of the cosine scores


class Listener(TextAgent):
    """Text + K candidate images -> the index of the described image (a referential game).

    A text encoder (``<name>.text``) and an image encoder (``<name>.image``) embed both
    sides; linear heads (``<name>.text_proj``, ``<name>.image_proj``) map them to ``dim``;
    the score is cosine similarity / ``temperature``. Trained with cross-entropy over
    in-batch candidates (other images with the same text are masked out, both directions).

    Args:
        name: the agent's scope.
        **settings: `ListenerConfig` fields.
    """

    Config = ListenerConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        self.use_words()
        c = self.cfg
        self.temperature = float(c.temperature)
        with self.seeded():
            self.text_encoder = self.make_encoder(
                c.text_encoder,
                "text",
                slot="text_encoder",
                inputs={"vocab_size": len(self.vocab)},
                headless=True,
                features=True,
            )
            self.image_encoder = self.make_encoder(
                c.encoder,
                "image",
                inputs=image_inputs(c.image_shape),
                headless=True,
                features=True,
            )
            t_dim, i_dim = self.text_encoder.feature_dim, self.image_encoder.feature_dim
            dim = c.dim
            self.text_proj = self.make_head("text_proj", lambda: nn.Linear(t_dim, dim))
            self.image_proj = self.make_head("image_proj", lambda: nn.Linear(i_dim, dim))
        check_image_encoder(self.image_encoder, f"agents.{name}.encoder")
        # images arrive as [N, H, W, C]: their planes come from image_shape when given
        self.channels = (
            int(c.image_shape[0]) if c.image_shape else input_channels(self.image_encoder)
        )
        self.finish()

    def embed_texts(self, texts: Sequence[str]) -> paddle.Tensor:
        """Unit-norm text embeddings [N, dim]."""
        tokens = self.to_tensor(self.encode_texts(texts, add_eos=False))
        return F.normalize(self.text_proj(self.text_encoder.forward_all(tokens)["pooled"]), axis=-1)

    def embed_images(self, images: Any) -> paddle.Tensor:
        """Unit-norm image embeddings [N, dim] from uint8 [N, H, W, C] (or float [N, C, H, W])."""
        x = images if isinstance(images, paddle.Tensor) else images_to_array(images, self.channels)
        emb = self.image_encoder.forward_all(self.to_tensor(x))["pooled"]  # [N, feature_dim]
        return F.normalize(self.image_proj(emb), axis=-1)

    def loss(self, texts: Sequence[str], images: Any) -> paddle.Tensor:
        """Symmetric in-batch cross-entropy: text i should pick image i and vice versa."""
        t, v = self.embed_texts(texts), self.embed_images(images)
        logits = paddle.matmul(t, v, transpose_y=True) / self.temperature  # [B, B]
        keys = np.array([" ".join(Vocab.tokenize(s)) for s in texts])
        same = (keys[:, None] == keys[None, :]) & ~np.eye(len(keys), dtype=bool)
        logits = logits - self.to_tensor(same.astype(np.float32) * 1e4)  # same text: not a negative
        target = self.to_tensor(np.arange(len(keys), dtype=np.int64))
        return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))

    @paddle.no_grad()
    def scores(self, texts: Sequence[str], candidates: Any, batch_size: int = 256) -> np.ndarray:
        """Scores [N, K] of ``candidates`` [N, K, H, W, C] for each text."""
        cand = np.asarray(candidates)
        n, k = cand.shape[:2]
        if len(texts) != n:
            raise ValueError(f"Listener.scores: {len(texts)} texts but {n} candidate sets")
        was = self.training
        self.eval()
        try:
            out = []
            for sl in batch_slices(n, max(1, batch_size // k)):
                t = self.embed_texts(texts[sl])  # [b, d]
                flat = cand[sl].reshape(-1, *cand.shape[2:])
                v = self.embed_images(flat).reshape([t.shape[0], k, -1])  # [b, K, d]
                out.append((v * t.unsqueeze(1)).sum(-1).numpy())
        finally:
            self.train(was)
        return np.concatenate(out) if out else np.zeros((0, k), np.float32)

    def choose(self, texts: Sequence[str], candidates: Any) -> np.ndarray:
        """The index (int64 [N]) of the candidate each text describes best."""
        return self.scores(list(texts), candidates).argmax(axis=1).astype(np.int64)
