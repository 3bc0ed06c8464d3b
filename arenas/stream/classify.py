"""StreamClassifyArena: ``arena=classify data=stream``, a classifier that learns from samples
POSTed to the live run while it trains (online learning; the rules are in
`paddlecraft.craftdata.stream`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from paddlecraft.agents import Agent
from paddlecraft.arenas.classify import ClassifyArena
from paddlecraft.errors import ConfigError

from .base import StoppedWaiting, StreamSource

__all__ = ["StreamClassifyArena"]


class StreamClassifyArena(StreamSource, ClassifyArena):
    """The classify arena on a stream: step ``k`` trains the ``classifier`` on a seeded
    minibatch of the newest ``data.loader.window`` training samples among the first
    ``needed(k)`` arrivals; evaluation is over the held-out samples (every
    ``holdout_every``-th) among the arrivals the last step consumed (all of them once the
    stream ended). Headline: ``test_accuracy`` on the held-out samples.

    Args:
        agents: must contain ``classifier``.
        data: the stream's facts (`paddlecraft.craftdata.load_stream`, ``kind=labels``).
        seed: run seed (the minibatch draws).
        **settings: `ClassifyConfig` fields; ``epochs``
            must stay 1 (a stream is one pass; the run ends when the stream ends).
    """

    def __init__(
        self, agents: Mapping[str, Agent], data: Any, seed: int = 0, **settings: Any
    ) -> None:
        settings.setdefault("epochs", 1)
        super().__init__(agents, data=data, seed=seed, **settings)
        self.check_stream("labels")

    def setup(self, run_dir: str) -> None:
        """Open (or reopen, after a kill) the run's sample log."""
        self.open_store(run_dir)
        super().setup(run_dir)

    def batches(self, epoch: int, start: int = 0) -> Iterator[Any]:
        """Steps from ``start`` on: each waits for its arrivals, then yields (x [B, C, H, W],
        y [B]); ends once the stream ended and the next step's arrivals never came."""
        for idx in self.step_indices(start, self.cfg.batch_size):
            if isinstance(idx, StoppedWaiting):
                yield idx
            else:
                yield self.store.images(idx), self.store.labels(idx)

    def train_step(self, batch: Any) -> dict[str, float]:
        if isinstance(batch, StoppedWaiting):
            raise batch.error
        return super().train_step(batch)

    @paddle.no_grad()
    def _predict(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(logits [N, K], labels [N]) of the held-out samples consumed so far."""
        if split != "test":
            raise ConfigError(f"a stream has no {split!r} split; it holds out a test share")
        idx = self.held_out_indices()
        agent = self.classifier
        agent.eval()
        logits = []
        for i in range(0, len(idx), self.cfg.eval_batch_size):
            part = idx[i : i + self.cfg.eval_batch_size]
            logits.append(agent(agent.to_tensor(self.store.images(part))).numpy())
        agent.train()
        k = len(self.data.classes)
        out = np.concatenate(logits) if logits else np.zeros((0, k), np.float32)
        return out, self.store.labels(idx)

    def evaluate(self) -> dict[str, float]:
        logits, y = self._predict("test")
        metrics = {"test_samples": float(len(y)), "train_samples": float(self.consumed)}
        if not len(y):
            return {"test_accuracy": float("nan"), "test_loss": float("nan"), **metrics}
        loss = float(F.cross_entropy(paddle.to_tensor(logits), paddle.to_tensor(y)))
        self._majority_share = float(np.bincount(y).max() / len(y))
        self._last_predictions = (logits.argmax(-1), y)  # the live page's confusion matrix
        return {
            "test_accuracy": float((logits.argmax(-1) == y).mean()),
            "test_loss": loss,
            **metrics,
        }

    @paddle.no_grad()
    def predict(self, images: np.ndarray) -> list[dict[str, Any]]:
        """The current weights' answer for float32 [B, C, H, W] images: per image the label,
        its index and the class probabilities. Touches no RNG stream (call it on the training
        thread: the live route goes through ``live.call_soon``)."""
        agent = self.classifier
        agent.eval()
        probs = F.softmax(agent(agent.to_tensor(images)), axis=-1).numpy()
        agent.train()
        names = self.data.classes
        return [
            {"label": names[int(p.argmax())], "index": int(p.argmax()), "probs": p.tolist()}
            for p in probs
        ]

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """The confusion matrix of the held-out samples (none when nothing was held out)."""
        if not len(self.held_out_indices()):
            return {}
        return super().artifacts(run_dir)
