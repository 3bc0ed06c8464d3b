"""StreamCaptionArena: ``arena=caption data=stream``, the captioner and the listener learn from
image + caption pairs POSTed to the live run while it trains (the rules are in
`paddlecraft.craftdata.stream`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import paddle

from paddlecraft.agents import Agent, Captioner, Listener
from paddlecraft.arenas.caption.arena import CaptionConfig
from paddlecraft.arenas.caption.files import bleu_multi
from paddlecraft.arenas.engine import Arena
from paddlecraft.encoders.vocab import Vocab
from paddlecraft.errors import ConfigError

from .base import StoppedWaiting, StreamSource

__all__ = ["StreamCaptionArena"]


#: random-stream id: a held-out sample's distractors, ``[seed, index, id]``
CANDIDATES_STREAM = 0xCA


class StreamCaptionArena(StreamSource, Arena):
    """Image -> caption -> image on a stream: step ``k`` trains the ``captioner`` (teacher
    forced) and the ``listener`` (contrastive) on one seeded minibatch of the newest
    ``data.loader.window`` training pairs among the first ``needed(k)`` arrivals.

    Evaluation, on the held-out pairs consumed so far: the captioner's exact match with the
    reference and its BLEU-4; the listener's recall@1 among ``arena.k`` held-out images from
    the reference caption (``listener_accuracy``) and from the captioner's caption
    (``chain_accuracy``, the headline), the distractors drawn by ``(seed, index)``.

    Args:
        agents: ``captioner`` (`Captioner`) and ``listener``
            (`Listener`), the chain ``[captioner, listener]``.
        source: the stream's facts (`paddlecraft.craftdata.load_stream`, ``kind=captions``).
        seed: run seed (minibatch draws, distractors).
        **settings: `CaptionConfig` fields (``k``,
            ``beam_size``, ``eval_batch_size``, ``hops.captioner.batch_size``; ``epochs``
            must stay 1; the rest are the generated world's and are not used).
    """

    Config = CaptionConfig
    headline = "chain_accuracy"

    def __init__(
        self, agents: Mapping[str, Agent], seed: int = 0, source: Any = None, **settings: Any
    ) -> None:
        settings.setdefault("epochs", 1)
        super().__init__(agents, seed=seed, **settings)
        self.data = source
        self.check_stream("captions")
        if list(self.cfg.chain) != ["captioner", "listener"]:
            raise ConfigError(
                f"arena.chain={list(self.cfg.chain)}: data=stream trains the chain "
                "[captioner, listener] (chain=default)"
            )
        self.require_agents("captioner", "listener")
        self.captioner, self.listener = self.agents["captioner"], self.agents["listener"]
        if not isinstance(self.captioner, Captioner) or not isinstance(self.listener, Listener):
            raise ConfigError("agents.captioner must be a Captioner and agents.listener a Listener")
        if self.cfg.k < 2:
            raise ConfigError(f"arena.k must be >= 2 (candidates per choice), got {self.cfg.k}")
        hop = self.cfg.hops.get("captioner")
        self.batch_size = int(getattr(hop, "batch_size", None) or 64)

    def setup(self, run_dir: str) -> None:
        """Open (or reopen, after a kill) the run's sample log."""
        self.open_store(run_dir)
        super().setup(run_dir)

    def batches(self, epoch: int, start: int = 0) -> Iterator[Any]:
        """Steps from ``start`` on: (images [B, C, H, W], captions [B]) once arrived."""
        for idx in self.step_indices(start, self.batch_size):
            if isinstance(idx, StoppedWaiting):
                yield idx
            else:
                yield self.store.images(idx), self.store.captions(idx)

    def train_step(self, batch: Any) -> dict[str, float]:
        if isinstance(batch, StoppedWaiting):
            raise batch.error
        images, captions = batch
        out: dict[str, float] = {}
        for name, agent in (("captioner", self.captioner), ("listener", self.listener)):
            agent.train()
            if name == "captioner":
                loss = agent.loss(images, captions)
            else:
                loss = agent.loss(captions, images)
            agent.update(loss)
            out[f"{name}_loss"] = float(loss)
        out["loss"] = out["captioner_loss"] + out["listener_loss"]
        return out

    def _candidates(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per held-out sample: k candidate positions in ``idx`` (itself among k - 1 others,
        drawn by ``(seed, its index)``) and where it sits (int64 [N, k], [N])."""
        n, k = len(idx), self.cfg.k
        cands, where = np.zeros((n, k), np.int64), np.zeros(n, np.int64)
        for j, i in enumerate(idx):
            rng = np.random.default_rng([self.seed, int(i), CANDIDATES_STREAM])
            others = np.delete(np.arange(n), j)
            pick = rng.choice(others, size=k - 1, replace=len(others) < k - 1)
            slot = int(rng.integers(k))
            cands[j] = np.insert(pick, slot, j)
            where[j] = slot
        return cands, where

    @paddle.no_grad()
    def evaluate(self) -> dict[str, float]:
        idx = self.held_out_indices()
        m = {"test_samples": float(len(idx)), "train_samples": float(self.consumed)}
        nan = float("nan")
        if len(idx) < 2:
            keys = ("chain_accuracy", "listener_accuracy", "caption_exact", "caption_bleu")
            return {**dict.fromkeys(keys, nan), **m}
        images, refs = self.store.images(idx), self.store.captions(idx)
        said = self.captioner.caption(images, beam_size=self.cfg.beam_size)
        cands, where = self._candidates(idx)
        grid = images[cands]  # [N, k, C, H, W]: each sample's candidates
        from_ref = self.listener.choose(refs, grid)
        from_said = self.listener.choose(said, grid)
        norm = [Vocab.normalize(r) for r in refs]
        return {
            "chain_accuracy": float((from_said == where).mean()),
            "listener_accuracy": float((from_ref == where).mean()),
            "caption_exact": float(np.mean([s == r for s, r in zip(said, norm, strict=True)])),
            "caption_bleu": bleu_multi(said, [[r] for r in refs]),
            "chance": 1.0 / self.cfg.k,
            **m,
        }

    def chance_level(self) -> float | None:
        """1/k: the listener picking at random."""
        return 1.0 / self.cfg.k

    @paddle.no_grad()
    def predict(self, images: np.ndarray) -> list[dict[str, Any]]:
        """The captioner's caption of each float32 [B, C, H, W] image, with the current
        weights (greedy or ``arena.beam_size``; no RNG stream touched)."""
        said = self.captioner.caption(images, beam_size=self.cfg.beam_size)
        return [{"caption": s} for s in said]
