"""Classifier: one encoder with a ``prediction`` output, trained with cross-entropy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle
import paddle.nn.functional as F
from omegaconf import MISSING

from .base import Agent, AgentConfig
from .plug import image_inputs
from .settings import ConfigError


@dataclass
class ClassifierConfig(AgentConfig):
    """paddlecraft.agents.Classifier settings."""

    encoder: Any = MISSING  #: an encoder config (conf/encoder/*): ``_target_`` + kwargs, no scope
    label_smoothing: float = 0.0  #: cross-entropy label smoothing
    num_classes: Optional[int] = None  #: label count (from the data); fills the encoder's head  # noqa: UP045
    input_shape: Optional[list[int]] = None  # noqa: UP045
    #: ^ [channels, height, width] of the inputs (from the data); fills the encoder's sizes


class Classifier(Agent):
    """An agent that labels inputs: any encoder, with a class head of ``num_classes``.

    The encoder's parameters are named ``<name>.<logical>.w_0`` ... Settings: see
    `ClassifierConfig`, e.g. ``Classifier("clf", encoder={"_target_":
    "paddlecraft.encoders.ImageMLPEncoder", "input_size": 64}, lr=3e-4)``.
    """

    Config = ClassifierConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        inputs = image_inputs(self.cfg.input_shape)
        inputs["num_classes"] = self.cfg.num_classes
        with self.seeded():
            self.encoder = self.make_encoder(self.cfg.encoder, inputs=inputs)
        if "prediction" not in self.encoder.output_names:
            raise ConfigError(
                f"agents.{name}.encoder: {type(self.encoder).__name__} has no 'prediction' output; "
                f"set agents.{name}.num_classes (a classifier needs class logits)"
            )
        self.finish()

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        """Class logits [B, num_classes] for inputs [B, ...]."""
        return self.encoder(x)

    def loss(self, x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
        """Mean cross-entropy of logits against integer labels [B]."""
        return F.cross_entropy(self(x), y, label_smoothing=self.cfg.label_smoothing)

    @paddle.no_grad()
    def predict(self, x: Any, batch_size: int = 1024) -> np.ndarray:
        """Predicted labels (int64 [N]) for a numpy/tensor batch, in eval mode."""
        was_training = self.training
        self.eval()
        out = []
        for i in range(0, len(x), batch_size):
            out.append(self(self.to_tensor(x[i : i + batch_size])).argmax(-1).numpy())
        self.train(was_training)
        return np.concatenate(out) if out else np.zeros((0,), np.int64)
