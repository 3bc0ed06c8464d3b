"""ClassifyArena: one agent learns labels from a dataset (the seed's case 1 as an arena)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import paddle
import paddle.nn.functional as F

from agents import Agent
from agents.distributed import shard
from agents.instantiate import safe_instantiate
from arenas.engine import Arena, ArenaConfig
from craftdata import iterate_minibatches

from .plot import render_confusion


@dataclass
class ClassifyConfig(ArenaConfig):
    """arenas.ClassifyArena settings."""

    epochs: int = 20  #: passes over the training split
    batch_size: int = 64  #: training minibatch
    eval_batch_size: int = 1024  #: evaluation minibatch


class ClassifyArena(Arena):
    """Trains the ``classifier`` agent with cross-entropy on a dataset; headline: test accuracy.

    Args:
        agents: must contain ``classifier`` (an :class:`agents.Classifier`).
        data: loader config, e.g. ``{"_target_": "craftdata.load_digits", "seed": 0}``.
        seed: run seed (data order).
        **settings: :class:`ClassifyConfig` fields.
    """

    Config = ClassifyConfig
    headline = "test_accuracy"

    def __init__(
        self, agents: Mapping[str, Agent], data: Any, seed: int = 0, **settings: Any
    ) -> None:
        super().__init__(agents, seed=seed, **settings)
        self.require_agents("classifier")
        self.classifier = self.agents["classifier"]
        self.data = safe_instantiate(data)
        self.batch_size, self.eval_batch_size = self.cfg.batch_size, self.cfg.eval_batch_size

    def steps_per_epoch(self) -> int:
        return -(-len(self.data.train) // self.batch_size)

    def batches(self, epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return iterate_minibatches(
            self.data.train.x, self.data.train.y, self.batch_size, self.epoch_rng(epoch)
        )

    def train_step(self, batch: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        (x, y), share = shard(*batch)  # data-parallel: this process's rows; else all
        agent = self.classifier
        agent.train()
        loss = agent.loss(agent.to_tensor(x), agent.to_tensor(y))
        agent.update(loss, batch_share=share)
        return {"loss": float(loss)}

    @paddle.no_grad()
    def _logits(self, x: np.ndarray) -> np.ndarray:
        agent = self.classifier
        agent.eval()
        out = [
            agent(agent.to_tensor(x[i : i + self.eval_batch_size])).numpy()
            for i in range(0, len(x), self.eval_batch_size)
        ]
        agent.train()
        return np.concatenate(out)

    def evaluate(self) -> dict[str, float]:
        test = self.data.test
        logits = self._logits(test.x)
        loss = float(F.cross_entropy(paddle.to_tensor(logits), paddle.to_tensor(test.y)))
        return {
            "test_accuracy": float((logits.argmax(-1) == test.y).mean()),
            "test_loss": loss,
        }

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """A confusion-matrix picture of the test split."""
        test = self.data.test
        pred = self._logits(test.x).argmax(-1)
        k = self.data.num_classes
        cm = np.zeros((k, k), np.int64)
        np.add.at(cm, (test.y, pred), 1)
        path = Path(run_dir) / "confusion_matrix.png"
        cv2.imwrite(str(path), render_confusion(cm))
        return {"confusion_matrix": str(path)}
