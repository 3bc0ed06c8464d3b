"""A two-agent arena written outside PaddleCraft: a teacher learns the labels, a student
learns from the teacher (knowledge distillation). Nothing here edits the toolkit.

Run it from this folder (docs/write-arena.md walks through it):

    PYTHONPATH=. paddlecraft --config-dir my_conf arena=distill
    PYTHONPATH=. python /path/to/PaddleCraft/run.py --config-dir my_conf arena=distill  # checkout
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from paddlecraft.agents import Agent
from paddlecraft.agents.instantiate import built
from paddlecraft.arenas.engine import Arena, ArenaConfig
from paddlecraft.craftdata import iterate_minibatches


@dataclass
class DistillConfig(ArenaConfig):
    """mypkg.DistillArena settings: the constructor's keywords, the schema, the record."""

    epochs: int = 5  #: passes over the training split
    batch_size: int = 64  #: training minibatch
    temperature: float = 2.0  #: softens the teacher's logits
    alpha: float = 0.5  #: weight of the teacher's soft targets (1 - alpha: the labels)


class DistillArena(Arena):
    """``teacher`` learns the labels; ``student`` learns from the teacher's soft targets."""

    Config = DistillConfig
    headline = "student_accuracy"

    def __init__(
        self, agents: Mapping[str, Agent], data: Any, seed: int = 0, **settings: Any
    ) -> None:
        super().__init__(agents, seed=seed, **settings)
        self.require_agents("teacher", "student")
        self.teacher, self.student = self.agents["teacher"], self.agents["student"]
        self.data = built(data)  # craftdata.Dataset: .train/.test with .x, .y

    def steps_per_epoch(self) -> int:
        return -(-len(self.data.train) // self.cfg.batch_size)

    def batches(self, epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        train = self.data.train  # the order is a function of (seed, epoch): resume replays it
        return iterate_minibatches(train.x, train.y, self.cfg.batch_size, self.epoch_rng(epoch))

    def train_step(self, batch: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        x, y = batch
        c = self.cfg
        tx, ty = self.teacher.to_tensor(x), self.teacher.to_tensor(y)
        teacher_loss = self.teacher.loss(tx, ty)
        self.teacher.update(teacher_loss)  # the teacher's own optimizer, own parameters
        with paddle.no_grad():
            soft = F.softmax(self.teacher(tx) / c.temperature)  # [B, classes]
        logits = self.student(self.student.to_tensor(x))  # [B, classes]
        distill = F.kl_div(F.log_softmax(logits / c.temperature), soft, reduction="batchmean")
        hard = F.cross_entropy(logits, self.student.to_tensor(y))
        loss = c.alpha * distill * c.temperature**2 + (1 - c.alpha) * hard
        self.student.update(loss)
        return {"teacher_loss": float(teacher_loss), "student_loss": float(loss)}

    def evaluate(self) -> dict[str, float]:
        test = self.data.test
        return {
            "teacher_accuracy": float((self.teacher.predict(test.x) == test.y).mean()),
            "student_accuracy": float((self.student.predict(test.x) == test.y).mean()),
        }
