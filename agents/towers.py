"""The two sides of a dual encoder (CLIP-style): an `ImageTower` and a `TextTower`.

```python
img = ImageTower("image", encoder=vit_cfg, image_shape=[3, 64, 64], embed_dim=64)
txt = TextTower("text", encoder=gru_cfg, words="shapes", embed_dim=64)
logits = img.logit_scale() * normalize(img.embed(x)) @ normalize(txt.embed(texts)).T
```

Each tower is one agent (its own scope, optimizer, device and seed) around any
PaddleCraft encoder of its modality, read through the feature contract (``pooled``
[B, feature_dim]); an optional linear ``projection`` (no bias, as CLIP's) maps the
features to a shared ``embed_dim``. ``embed`` gives the projected, un-normalised embedding.
The learned temperature (``logit_scale``, CLIP's log(1/0.07) start, clamped at log 100)
belongs to the image tower; ``temperature: from_text`` starts it from the text tower's
encoder's own ``logit_scale`` (a CLIP text tower loaded from a CLIP file carries the
file's), which the contrastive arena copies in when it is built. ``frozen=true`` fixes a tower's encoder and projection (kept
in eval mode: no dropout, no BatchNorm statistics updates); its temperature still learns
unless ``learn_temperature=false``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle
from omegaconf import MISSING
from paddle import nn

from paddlecraft.encoders.clip_tokenizer import CLIPTokenizer
from paddlecraft.encoders.vocab import PAD

from .base import Agent, AgentConfig
from .plug import constructor_params, image_inputs
from .settings import ConfigError
from .text_agent import TextAgent, check_image_encoder, images_to_array, input_channels

__all__ = ["ImageTower", "ImageTowerConfig", "TextTower", "TextTowerConfig", "check_text_encoder"]

MAX_LOGIT_SCALE = math.log(100.0)  #: CLIP's clamp: the scale exp(logit_scale) stays <= 100
FROM_TEXT = "from_text"  #: ``temperature``: start from the text tower's encoder's logit_scale


@dataclass
class TowerConfig(AgentConfig):
    """Settings both towers take."""

    encoder: Any = MISSING  #: the tower's encoder (conf/encoder/*), built headless
    #: the shared embedding size: a linear ``projection`` from the encoder's feature_dim
    #: (None: no projection; the embedding is the encoder's pooled features)
    embed_dim: Optional[int] = None  # noqa: UP045
    frozen: bool = False  #: fix the encoder and projection (eval mode, no updates)


@dataclass
class ImageTowerConfig(TowerConfig):
    """paddlecraft.agents.ImageTower settings."""

    image_shape: Optional[list[int]] = None  # noqa: UP045
    #: ^ [channels, height, width] of the images (from the data); sizes the encoder
    #: initial softmax temperature, > 0 (logit_scale = log(1/temperature)), or ``from_text``:
    #: the text tower's encoder's ``logit_scale`` (a loaded CLIP file's), set by the arena
    temperature: Any = 0.07
    learn_temperature: bool = True  #: train logit_scale (clamped at log 100)


@dataclass
class TextTowerConfig(TowerConfig):
    """paddlecraft.agents.TextTower settings."""

    #: vocabulary: shapes | digits | a list of words | a tokenizer file | CLIP's tokenizer folder
    #: (vocab.json + merges.txt: its padding and end ids are given to the encoder)
    words: Any = "shapes"


class LogitScale(nn.Layer):
    """One scalar parameter: the log of the contrastive logits' scale."""

    def __init__(self, init: float) -> None:
        super().__init__()
        self.w = self.create_parameter(
            [1], default_initializer=nn.initializer.Constant(float(init))
        )


def _temperature(value: Any, name: str) -> float:
    """``agents.<name>.temperature`` as a float > 0 (else a one-line `ConfigError`)."""
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = float("nan")
    if not t > 0:
        raise ConfigError(
            f"agents.{name}.temperature must be a number > 0 or {FROM_TEXT} (a loaded CLIP "
            f"text tower's logit_scale), got {value!r}"
        )
    return t


def check_text_encoder(cfg: Any, setting: str) -> None:
    """Refuse, before building, an encoder that does not read token ids (no ``vocab_size``)."""
    target = str(dict(cfg).get("_target_", ""))
    params = constructor_params(target)
    if params and "vocab_size" not in params:
        raise ConfigError(
            f"{setting}: {target.rsplit('.', 1)[-1]} does not read text (token ids), but this "
            f"agent feeds it captions; choose a text encoder, e.g. encoder@{setting}=gru_text "
            "(or bert_mini)"
        )


class _Tower:
    """What both towers add to their agent base: projection, frozen, embed."""

    encoder: Any
    projection: nn.Layer | None
    cfg: Any

    def _finish_tower(self, agent: Agent) -> None:
        c = self.cfg
        dim = int(self.encoder.feature_dim)
        self.projection = None
        if c.embed_dim is not None:
            if int(c.embed_dim) < 1:
                raise ConfigError(f"agents.{agent.name}.embed_dim must be >= 1, got {c.embed_dim}")
            out = int(c.embed_dim)
            self.projection = agent.make_head(
                "projection", lambda: nn.Linear(dim, out, bias_attr=False)
            )
        #: the width of `embed`'s output
        self.embed_dim = int(c.embed_dim) if c.embed_dim is not None else dim

    def _freeze_tower(self) -> None:
        if self.cfg.frozen:
            for layer in (self.encoder, self.projection):
                for p in layer.parameters() if layer is not None else ():
                    p.stop_gradient = True

    def _project(self, pooled: paddle.Tensor) -> paddle.Tensor:
        return pooled if self.projection is None else self.projection(pooled)  # [B, embed_dim]


class ImageTower(_Tower, Agent):
    """Images -> embeddings [B, embed_dim] (un-normalised), with the learned temperature.

    Args:
        name: the agent's scope (``image``): encoder ``<name>.image``, projection
            ``<name>.projection``, temperature ``<name>.logit_scale``.
        **settings: `ImageTowerConfig` fields.
    """

    Config = ImageTowerConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        c = self.cfg
        self.temperature_from_text = c.temperature == FROM_TEXT
        temperature = 0.07 if self.temperature_from_text else _temperature(c.temperature, name)
        with self.seeded():
            self.encoder = self.make_encoder(
                c.encoder, "image", inputs=image_inputs(c.image_shape), headless=True,
                features=True,
            )  # fmt: skip
            self._finish_tower(self)
            init = min(math.log(1.0 / temperature), MAX_LOGIT_SCALE)
            self.scale = self.make_head("logit_scale", lambda: LogitScale(init))
        check_image_encoder(self.encoder, f"agents.{name}.encoder")
        self.channels = int(c.image_shape[0]) if c.image_shape else input_channels(self.encoder)
        self._freeze_tower()
        self.scale.w.stop_gradient = not c.learn_temperature
        self.finish()

    def train(self) -> ImageTower:
        """Training mode, except a frozen tower's encoder and projection (kept in eval)."""
        super().train()
        if self.cfg.frozen:
            self.encoder.eval()
        return self

    def embed(self, images: Any) -> paddle.Tensor:
        """Embeddings [N, embed_dim] of uint8 [N, H, W, C] (or float [N, C, H, W]) images."""
        x = images if isinstance(images, paddle.Tensor) else images_to_array(images, self.channels)
        return self._project(self.encoder.forward_all(self.to_tensor(x))["pooled"])

    def logit_scale(self) -> paddle.Tensor:
        """exp(logit_scale), 0-d: the factor of the cosine similarities (at most 100)."""
        return paddle.exp(self.scale.w[0])  # 0-d

    @paddle.no_grad()
    def start_temperature(self, log_scale: float) -> None:
        """Set logit_scale to ``log_scale`` (clamped at log 100): ``temperature: from_text``."""
        self.scale.w.set_value(paddle.full_like(self.scale.w, min(log_scale, MAX_LOGIT_SCALE)))

    @paddle.no_grad()
    def clamp_temperature(self) -> None:
        """Keep logit_scale <= log 100 (called after each update, as CLIP does)."""
        w = self.scale.w
        if float(w.numpy()[0]) > MAX_LOGIT_SCALE:
            w.set_value(paddle.full_like(w, MAX_LOGIT_SCALE))


class TextTower(_Tower, TextAgent):
    """Texts -> embeddings [B, embed_dim] (un-normalised).

    Args:
        name: the agent's scope (``text``): encoder ``<name>.text``, projection
            ``<name>.projection``.
        **settings: `TextTowerConfig` fields.
    """

    Config = TextTowerConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        self.use_words(any_pad=True)
        c = self.cfg
        check_text_encoder(c.encoder, f"agents.{name}.encoder")
        with self.seeded():
            self.encoder = self.make_encoder(
                c.encoder, "text", inputs={"vocab_size": len(self.vocab)}, headless=True,
                features=True, forced=self._token_ids(c.encoder),
            )  # fmt: skip
            self._finish_tower(self)
        self._freeze_tower()
        self.finish()

    def _token_ids(self, encoder_cfg: Any) -> dict[str, int] | None:
        """A CLIP tokenizer's padding and end ids, given to an encoder that takes them."""
        if not isinstance(self.vocab, CLIPTokenizer):
            return None
        target = str(dict(encoder_cfg).get("_target_", ""))
        if {"pad_id", "eos_id"} <= constructor_params(target):
            return {"pad_id": int(self.vocab.pad_id), "eos_id": int(self.vocab.eos_id)}
        if self.vocab.pad_id != PAD:
            raise ConfigError(
                f"agents.{self.name}.words is a CLIP tokenizer (padding id {self.vocab.pad_id}) "
                f"but {target.rsplit('.', 1)[-1]} takes no pad_id / eos_id; use "
                f"encoder@agents.{self.name}.encoder=clip_text_b32 (or clip_text_tiny)"
            )
        return None

    def tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token ids [N, T] the encoder reads: a CLIP tokenizer's framed ids padded to
        the encoder's ``max_len`` (as transformers' ``padding="max_length"``), else words
        right-padded with 0."""
        if isinstance(self.vocab, CLIPTokenizer):
            width = int(getattr(self.encoder, "max_len", self.vocab.context_length))
            return self.vocab.encode_batch(list(texts), max_len=width)[0]
        return self.encode_texts(list(texts), add_eos=False)

    def train(self) -> TextTower:
        """Training mode, except a frozen tower's encoder (kept in eval)."""
        super().train()
        if self.cfg.frozen:
            self.encoder.eval()
        return self

    def embed(self, texts: Sequence[str]) -> paddle.Tensor:
        """Embeddings [N, embed_dim] of ``texts``."""
        tokens = self.to_tensor(self.tokens(texts))  # [N, T]
        return self._project(self.encoder.forward_all(tokens)["pooled"])
