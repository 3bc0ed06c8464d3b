"""Image -> caption: the `Captioner` agent.

```python
cap = Agent.load("runs/caption/<time>/checkpoints/step_00001000/agents/captioner")
cap.caption(images)   # uint8 [N, 64, 64, 3] RGB -> ["a red circle above a blue square", ...]
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import paddle
from omegaconf import MISSING

from .base import AgentConfig
from .plug import image_inputs
from .text_agent import (
    TextAgent,
    batch_slices,
    check_image_encoder,
    images_to_array,
    input_channels,
)

__all__ = ["Captioner", "CaptionerConfig"]


@dataclass
class CaptionerConfig(AgentConfig):
    """paddlecraft.agents.Captioner settings."""

    encoder: Any = MISSING
    #: ^ image encoder config (conf/encoder/*); built headless, sized from image_shape
    decoder: Any = MISSING
    #: ^ text decoder config (conf/decoder/*); vocab_size and cond_dim are filled in
    image_shape: Optional[list[int]] = None  # noqa: UP045
    #: ^ [channels, height, width] of the images (from the data); fills the encoder's sizes
    words: Any = "shapes"  #: vocabulary: shapes | digits | a list of words | a tokenizer file
    beam_size: int = 1  #: default decoding: 1 = greedy, > 1 = beam search


class Captioner(TextAgent):
    """Image -> caption: an image encoder (``<name>.image``) + a text decoder (``<name>.text``).

    Teacher-forced training (`loss`); batched greedy or beam decoding (`caption`).
    The decoder is conditioned on the image embedding; its ``vocab_size`` and
    ``cond_dim`` are filled in from ``words`` and the image encoder.

    Args:
        name: the agent's scope.
        **settings: `CaptionerConfig` fields.
    """

    Config = CaptionerConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        self.use_words()
        c = self.cfg
        self.beam_size = int(c.beam_size)
        with self.seeded():
            self.encoder = self.make_encoder(
                c.encoder,
                "image",
                inputs=image_inputs(c.image_shape),
                headless=True,
                features=True,
            )
            dec = {
                **dict(c.decoder),
                "vocab_size": len(self.vocab),
                "cond_dim": self.encoder.feature_dim,
            }
            self.decoder = self.make_encoder(dec, "text", slot="decoder", takes="text decoder")
        self.fit_decoder(self.decoder)
        check_image_encoder(self.encoder, f"agents.{name}.encoder")
        # images arrive as [N, H, W, C]: their planes come from image_shape when given
        self.channels = int(c.image_shape[0]) if c.image_shape else input_channels(self.encoder)
        self.finish()

    def embed(self, images: Any) -> paddle.Tensor:
        """Image embeddings [N, D] (the decoder's condition)."""
        x = images if isinstance(images, paddle.Tensor) else images_to_array(images, self.channels)
        return self.encoder.forward_all(self.to_tensor(x))["pooled"]  # [N, feature_dim]

    def loss(self, images: Any, captions: Sequence[str]) -> paddle.Tensor:
        """Teacher-forced cross-entropy of ``captions`` given ``images``."""
        targets = self.to_tensor(self.encode_texts(captions))
        return self.decoder.loss(self.embed(images), targets)

    @paddle.no_grad()
    def caption(
        self, images: Any, beam_size: int | None = None, batch_size: int = 256
    ) -> list[str]:
        """Captions of uint8 [N, H, W, 3] RGB images (greedy when ``beam_size`` is 1)."""
        beam = self.beam_size if beam_size is None else int(beam_size)
        x = images_to_array(images, self.channels)
        was = self.training
        self.eval()
        out: list[str] = []
        try:
            for sl in batch_slices(len(x), batch_size):
                cond = self.embed(x[sl])
                ids = (
                    self.decoder.greedy(cond)
                    if beam == 1
                    else self.decoder.beam_search(cond, beam_size=beam)
                )
                out += self.vocab.decode_batch(ids)
        finally:
            self.train(was)
        return out
