"""ClassifyArena: one agent learns labels from a dataset (the seed's case 1 as an arena)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from paddlecraft.agents import Agent
from paddlecraft.agents.distributed import rank, world_size
from paddlecraft.agents.instantiate import built
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine import Arena, ArenaConfig
from paddlecraft.craftdata import BatchLoader

from .plot import save_confusion


@dataclass
class ClassifyConfig(ArenaConfig):
    """paddlecraft.arenas.ClassifyArena settings."""

    epochs: int = 20  #: passes over the training split
    batch_size: int = 64  #: training minibatch
    eval_batch_size: int = 1024  #: evaluation minibatch


class ClassifyArena(Arena):
    """Trains the ``classifier`` agent with cross-entropy on a dataset; headline: test accuracy.

    Args:
        agents: must contain ``classifier`` (an `paddlecraft.agents.Classifier`).
        data: the dataset (``paddlecraft.craftdata.load_digits(seed=0)``; the engine builds it
            from ``data.loader``) or its loader config (``{"_target_": ..., "seed": 0}``): arrays
            in memory, or files read lazily (``paddlecraft.craftdata.load_image_folder``: decoded by
            ``data.workers`` processes, the split recorded in the run folder).
        seed: run seed (data order).
        **settings: `ClassifyConfig` fields.
    """

    Config = ClassifyConfig
    headline = "test_accuracy"

    def __init__(
        self, agents: Mapping[str, Agent], data: Any, seed: int = 0, **settings: Any
    ) -> None:
        super().__init__(agents, seed=seed, **settings)
        self.require_agents("classifier")
        self.classifier = self.agents["classifier"]
        self.data = built(data)
        #: the last evaluation's (predicted [N], true [N]) test labels, for the live page
        self._last_predictions: tuple[np.ndarray, np.ndarray] | None = None
        k = getattr(self.data, "num_classes", None)
        if isinstance(k, int) and k < 2:
            raise ConfigError(
                f"the data has {k} class; a classifier needs at least 2 (every prediction "
                "would be right). For data=image_folder, data.path needs one sub-folder per "
                "class"
            )
        self._loaders: dict[str, BatchLoader] = {}
        self._bound_to: str | None = None
        self._majority_share: float | None = None  # of the test labels, seen at evaluation

    def setup(self, run_dir: str) -> None:
        """File data records its split in the run folder (or adopts the one recorded)."""
        super().setup(run_dir)
        bind = getattr(self.data, "use_run_dir", None)
        if bind is not None and self._bound_to != self.run_dir:
            bind(self.run_dir)
            self._bound_to = self.run_dir
            self.close()  # the splits may have changed: new loaders
            self._loaders = {}

    def loader(self, split: str) -> BatchLoader:
        """The batch loader of ``split`` (train: shuffled per (seed, epoch); else in order)."""
        if split not in self._loaders:
            train = split == "train"
            self._loaders[split] = BatchLoader(
                getattr(self.data, split),
                self.cfg.batch_size if train else self.cfg.eval_batch_size,
                seed=self.seed,
                shuffle=train,
                workers=getattr(self.data, "workers", 0),
                prefetch=getattr(self.data, "prefetch", 2),
                bad_files=getattr(self.data, "bad_files", None),
                # data-parallel: each process reads and decodes only its rows of a batch
                shard=(rank(), world_size()) if train else None,
            )
        return self._loaders[split]

    def steps_per_epoch(self) -> int:
        return len(self.loader("train"))

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.loader("train").epoch(epoch, start)

    def train_step(self, batch: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        x, y = batch  # data-parallel: this process's rows (a Shard); else the whole batch
        share = getattr(batch, "share", 1.0)
        agent = self.classifier
        if not agent.training:  # (a walk over every sublayer; evaluation leaves train mode on)
            agent.train()
        loss = agent.loss(agent.to_tensor(x), agent.to_tensor(y))
        agent.update(loss, batch_share=share)
        return {"loss": float(loss)}

    @paddle.no_grad()
    def _predict(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(logits [N, K], labels [N]) over a split, in its order."""
        agent = self.classifier
        agent.eval()
        logits, labels = [], []
        for x, y in self.loader(split).epoch(0):
            logits.append(agent(agent.to_tensor(x)).numpy())
            labels.append(np.asarray(y))
        agent.train()
        return np.concatenate(logits), np.concatenate(labels)

    def evaluate(self) -> dict[str, float]:
        logits, y = self._predict("test")
        loss = float(F.cross_entropy(paddle.to_tensor(logits), paddle.to_tensor(y)))
        metrics = {"test_accuracy": float((logits.argmax(-1) == y).mean()), "test_loss": loss}
        self._majority_share = float(np.bincount(y).max() / len(y)) if len(y) else None
        bad = getattr(self.data, "bad_files", None)
        if bad is not None:  # files read from disk: how many were skipped (on_bad_file=skip)
            metrics["bad_files_skipped"] = float(len(bad))
        self._last_predictions = (logits.argmax(-1), y)  # the live page's confusion matrix
        return metrics

    def live_view(self) -> dict[str, Any]:
        """The live page's picture: the last evaluation's confusion matrix on the test split
        (rows: true class, columns: predicted) and a few of its predictions."""
        from .plot import live_panels

        last = self._last_predictions
        return {"panels": [] if last is None else live_panels(*last)}

    def chance_level(self) -> float | None:
        """The best accuracy of a classifier that learned nothing: the larger of ``1 /
        num_classes`` (guessing) and the test split's majority-class share (always
        answering one class, what a collapsed network does)."""
        k = getattr(self.data, "num_classes", None)
        if not isinstance(k, int) or k < 2:
            return None
        return max(1.0 / k, self._majority_share or 0.0)

    def arena_state(self) -> dict:
        """The files skipped while decoding so far (a resumed run keeps counting them)."""
        bad = getattr(self.data, "bad_files", None)
        return {"bad_files": dict(bad.skipped)} if bad is not None else {}

    def load_arena_state(self, state: dict) -> None:
        bad = getattr(self.data, "bad_files", None)
        if bad is not None:
            bad.skipped.update(state.get("bad_files", {}))

    def close(self) -> None:
        for loader in self._loaders.values():
            loader.close()

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """A confusion-matrix picture of the test split."""
        logits, y = self._predict("test")
        k = self.data.num_classes
        cm = np.zeros((k, k), np.int64)
        np.add.at(cm, (y, logits.argmax(-1)), 1)
        path = Path(run_dir) / "confusion_matrix.png"
        save_confusion(cm, path)
        return {"confusion_matrix": str(path)}
