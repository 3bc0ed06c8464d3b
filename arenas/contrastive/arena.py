"""ContrastiveArena: an image agent and a text agent learn one embedding space (CLIP-style).

Agents: ``image`` (`paddlecraft.agents.ImageTower`, which owns the learned temperature) and
``text`` (`paddlecraft.agents.TextTower`), each with its own scope, optimizer and device.
Each step takes ``batch_size`` image/caption pairs and minimises the symmetric contrastive
loss over in-batch negatives (`.loss.contrastive_loss`); pairs of the batch with the same
caption (or the same image) are not counted as negatives (``mask_duplicates``). A frozen
tower (``agents.<name>.frozen=true``) embeds without gradients and is not updated.
``agents.image.temperature=from_text`` starts the image agent's temperature at the text
tower's encoder's ``logit_scale`` (a loaded CLIP file's), copied in when the arena is built
(a resumed run's checkpoint then restores its own).

Evaluation (held-out images): ``i2t_recall@1/5`` (an image counts when one of its own
captions is among its k top-scored captions of the held-out set's distinct captions),
``t2i_recall@1/5`` (each distinct caption: one of its images among the k top-scored
images); zero-shot classification by prompts on a labelled set the towers never trained
on (`.zeroshot`), beside a linear probe on the same image embeddings. ``artifacts()``
writes ``retrieval.png`` (each query image with its top captions, `.sheet`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle

from paddlecraft.agents import Agent, update_together
from paddlecraft.agents.settings import ConfigError
from paddlecraft.agents.towers import ImageTower, TextTower
from paddlecraft.arenas.engine import Arena, ArenaConfig
from paddlecraft.arenas.engine.media import Image
from paddlecraft.encoders.tensorio import atomic_write_json

from .data import ContrastiveDataConfig, PairWorld, load_world
from .loss import contrastive_loss, positives_mask
from .metrics import cosine, distinct, retrieval_metrics
from .sheet import retrieval_sheet
from .zeroshot import linear_probe, prompts, split_halves, zero_shot

__all__ = ["ContrastiveArena", "ContrastiveConfig", "ZeroShotConfig"]

log = logging.getLogger("paddlecraft")

LR_DECAYS = ("cosine", "none")
BATCH_STREAM = 0xC1  #: random-stream id: the training pairs' order ``[seed, epoch, id]``


@dataclass
class ZeroShotConfig:
    """Zero-shot classification by prompts."""

    template: str = "a photo of a {label}"  #: the prompt; {label} is the class name
    #: data=captions: a labelled image folder (one sub-folder per class) the towers never
    #: trained on; None: no zero-shot measure (the bundled shapes use their held-out split)
    folder: Optional[str] = None  # noqa: UP045
    image_size: Optional[int] = None  #: folder images' side (None: the towers' image_size)  # noqa: UP045


@dataclass
class ContrastiveConfig(ArenaConfig):
    """paddlecraft.arenas.ContrastiveArena settings."""

    epochs: int = 20  #: passes over the training pairs
    image_agent: str = "image"  #: the ImageTower's agent name
    text_agent: str = "text"  #: the TextTower's agent name
    batch_size: int = 128  #: pairs per step (each pair's negatives: the other B-1)
    steps_per_epoch: Optional[int] = None  #: None: one pass over the pairs  # noqa: UP045
    lr_decay: str = "cosine"  #: cosine (each agent's lr decays to 5% over the run) | none
    mask_duplicates: bool = True  #: same caption / same image in a batch: not a negative
    data: ContrastiveDataConfig = field(default_factory=ContrastiveDataConfig)
    files: Optional[Any] = None  #: data=captions: the data.loader config  # noqa: UP045
    zeroshot: ZeroShotConfig = field(default_factory=ZeroShotConfig)
    eval_batch_size: int = 256  #: items per forward in evaluation
    sheet_rows: int = 8  #: query images on the retrieval sheet
    sheet_top: int = 3  #: captions shown per query


class ContrastiveArena(Arena):
    """Dual-encoder training; headline ``i2t_recall@1`` on held-out images.

    Args:
        agents: ``image`` (ImageTower) and ``text`` (TextTower), or as ``image_agent`` and
            ``text_agent`` name them.
        seed: run seed (data, pair order, zero-shot halves).
        **settings: `ContrastiveConfig` fields.
    """

    Config = ContrastiveConfig
    headline = "i2t_recall@1"

    def __init__(self, agents: Mapping[str, Agent], seed: int = 0, **settings: Any) -> None:
        super().__init__(agents, seed=seed, **settings)
        c = self.cfg
        if c.batch_size < 2:
            raise ConfigError(
                f"arena.batch_size must be >= 2 (in-batch negatives), got {c.batch_size}"
            )
        if c.lr_decay not in LR_DECAYS:
            raise ConfigError(f"arena.lr_decay must be one of {LR_DECAYS}, got {c.lr_decay!r}")
        if "{label}" not in c.zeroshot.template:
            raise ConfigError(
                f"arena.zeroshot.template={c.zeroshot.template!r} has no {{label}} for the class name"
            )
        self.require_agents(c.image_agent, c.text_agent)
        self.image, self.text = self.agents[c.image_agent], self.agents[c.text_agent]
        for name, kind in ((c.image_agent, ImageTower), (c.text_agent, TextTower)):
            if not isinstance(self.agents[name], kind):
                raise ConfigError(
                    f"agents.{name} is a {type(self.agents[name]).__name__}; the contrastive "
                    f"arena needs a {kind.__name__} there (agent@agents.{name}="
                    f"{'image' if kind is ImageTower else 'text'}_tower)"
                )
        if self.image.embed_dim != self.text.embed_dim:
            raise ConfigError(
                f"agents.{self.image.name} embeds to {self.image.embed_dim} and "
                f"agents.{self.text.name} to {self.text.embed_dim}: give both towers one "
                f"shared size, e.g. agents.{self.image.name}.embed_dim=64 "
                f"agents.{self.text.name}.embed_dim=64 (a linear projection)"
            )
        if self.image.temperature_from_text:
            self.image.start_temperature(self._text_logit_scale())
        self.learners = [a for a in (self.image, self.text) if a.trainable_parameters()]
        self.world: PairWorld = self._build_world()
        if self.world.n_pairs < c.batch_size:
            raise ConfigError(
                f"arena.batch_size={c.batch_size} but only {self.world.n_pairs} training pairs; "
                "lower arena.batch_size"
            )
        self._last: dict[str, Any] = {}

    def _text_logit_scale(self) -> float:
        """The text tower's encoder's log scale (``agents.image.temperature=from_text``)."""
        enc = self.text.encoder
        scale = getattr(enc, "logit_scale", None) if getattr(enc, "with_logit_scale", 0) else None
        if not isinstance(scale, paddle.Tensor):
            raise ConfigError(
                f"agents.{self.image.name}.temperature=from_text but agents.{self.text.name}."
                f"encoder ({type(enc).__name__}) holds no logit_scale; use a CLIP text tower "
                f"(encoder@agents.{self.text.name}.encoder=clip_text_b32) or a number, e.g. 0.07"
            )
        return float(scale.numpy().reshape(-1)[0])

    def _build_world(self) -> PairWorld:
        """The splits (the bundled shapes; `.files.FileContrastiveArena`: the user's files)."""
        return load_world(self.seed, self.cfg.data)

    # ------------------------------------------------------------------ schedule
    def steps_per_epoch(self) -> int:
        c = self.cfg
        return int(c.steps_per_epoch) if c.steps_per_epoch else self.world.n_pairs // c.batch_size

    def batches(self, epoch: int) -> Iterator[np.ndarray]:
        """int64 [B] pair indices per step: seeded permutations, continued across passes."""
        steps, bs, n = self.steps_per_epoch(), self.cfg.batch_size, self.world.n_pairs
        rng = np.random.default_rng([self.seed, epoch, BATCH_STREAM])
        need = steps * bs
        order = np.concatenate([rng.permutation(n) for _ in range(-(-need // n))])[:need]
        yield from order.reshape(steps, bs)

    def _set_lr(self, agent: Agent) -> None:
        if self.cfg.lr_decay == "none" or agent.scheduler is not None:
            return
        total = max(1, self.cfg.epochs * self.steps_per_epoch())
        t = min(agent.step_count, total) / total
        agent.optimizer.set_lr(agent.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t))))

    # ------------------------------------------------------------------ training
    def _embed(self, agent: Any, inputs: Any) -> paddle.Tensor:
        if agent.cfg.frozen:
            with paddle.no_grad():
                return agent.embed(inputs)
        return agent.embed(inputs)

    def train_step(self, idx: np.ndarray) -> dict[str, float]:
        w = self.world
        img_idx = w.train_image_of[idx]
        texts = [w.train_texts[int(i)] for i in idx]
        for a in (self.image, self.text):
            a.train()
        for a in self.learners:
            self._set_lr(a)
        i_emb = self._embed(self.image, w.train_images[img_idx])  # [B, D]
        t_emb = self._embed(self.text, texts)  # [B, D]
        if str(t_emb.place) != str(i_emb.place):
            t_emb = t_emb.to(self.image.place)
        mask = positives_mask(texts, img_idx) if self.cfg.mask_duplicates else None
        scale = self.image.logit_scale()
        loss = contrastive_loss(i_emb, t_emb, scale, mask)
        if self.learners:
            update_together(loss, self.learners)
            self.image.clamp_temperature()
        return {"loss": float(loss), "logit_scale": float(scale)}

    # ------------------------------------------------------------------ evaluation
    @paddle.no_grad()
    def _embed_all(self, agent: Any, inputs: Sequence[Any] | np.ndarray) -> np.ndarray:
        bs, out = self.cfg.eval_batch_size, []
        for s in range(0, len(inputs), bs):
            out.append(agent.embed(inputs[s : s + bs]).numpy())
        return np.concatenate(out) if out else np.zeros((0, agent.embed_dim), np.float32)

    @paddle.no_grad()
    def logits(self, images: Any, texts: Sequence[str]) -> np.ndarray:
        """``logits_per_image`` [N_images, N_texts]: exp(logit_scale) times the cosine
        similarities of the towers' embeddings (eval mode), what the loss scores."""
        was = [a.training for a in (self.image, self.text)]
        self.image.eval()
        self.text.eval()
        try:
            img = self._embed_all(self.image, images)  # [N, D]
            txt = self._embed_all(self.text, list(texts))  # [M, D]
            return float(self.image.logit_scale()) * cosine(img, txt)  # [N, M]
        finally:
            for a, t in zip((self.image, self.text), was):
                a.train() if t else a.eval()

    def evaluate(self) -> dict[str, float]:
        w = self.world
        was = [a.training for a in (self.image, self.text)]
        self.image.eval()
        self.text.eval()
        try:
            captions, relevant = distinct(w.test_refs)
            img = self._embed_all(self.image, w.test_images)
            sim = cosine(img, self._embed_all(self.text, captions))  # [N, M]
            m = retrieval_metrics(sim, relevant)
            m["eval_images"], m["eval_captions"] = float(len(img)), float(len(captions))
            m["logit_scale"] = float(self.image.logit_scale())
            m.update(self._zero_shot())
        finally:
            for a, t in zip((self.image, self.text), was):
                a.train() if t else a.eval()
        self._last = {"captions": captions, "relevant": relevant, "sim": sim}
        return m

    def _zero_shot(self) -> dict[str, float]:
        zs = self.world.zeroshot
        if zs is None or len(zs) < 4:
            return {}
        fit, test = split_halves(len(zs), self.seed)
        feats = self._embed_all(self.image, zs.images)
        texts = self._embed_all(self.text, prompts(zs.classes, self.cfg.zeroshot.template))
        return {
            "zeroshot_accuracy": zero_shot(feats[test], texts, zs.labels[test]),
            "linear_probe_accuracy": linear_probe(
                feats[fit], zs.labels[fit], feats[test], zs.labels[test]
            ),
            "zeroshot_chance": 1.0 / len(zs.classes),
            "zeroshot_classes": float(len(zs.classes)),
        }

    def chance_level(self) -> float | None:
        """1 / the held-out set's distinct captions (an image picking one at random)."""
        n = len(distinct(self.world.test_refs)[0])
        return 1.0 / n if n else None

    # ------------------------------------------------------------------ artifacts
    def _sheet(self) -> np.ndarray | None:
        if not self._last:
            return None
        rows = range(min(self.cfg.sheet_rows, len(self._last["sim"])))
        return retrieval_sheet(
            self.world.test_images, self._last["captions"], self._last["sim"],
            self._last["relevant"], rows, self.cfg.sheet_top,
        )  # fmt: skip

    def media(self) -> dict[str, Any]:
        """VisualDL at each evaluation: the retrieval sheet."""
        sheet = self._sheet()
        return {"retrieval/sheet": Image(sheet)} if sheet is not None else {}

    def live_view(self) -> dict[str, Any]:
        """The live page's picture: the last evaluation's retrieval sheet."""
        from ..engine.live.panels import media_panels

        return {"panels": media_panels(self.media())}

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """``retrieval.png`` (query images with their top captions) and ``retrieval.json``
        (each sheet row's own caption and top captions with scores)."""
        import cv2

        if not self._last:
            self.evaluate()
        path = Path(run_dir) / "retrieval.png"
        cv2.imwrite(str(path), cv2.cvtColor(self._sheet(), cv2.COLOR_RGB2BGR))
        sim, caps, rel = self._last["sim"], self._last["captions"], self._last["relevant"]
        rows = []
        for i in range(min(self.cfg.sheet_rows, len(sim))):
            top = np.argsort(-sim[i], kind="stable")[: self.cfg.sheet_top]
            rows.append({
                "own": [caps[j] for j in np.flatnonzero(rel[i])],
                "top": [{"caption": caps[j], "score": float(sim[i, j])} for j in top],
            })  # fmt: skip
        table = Path(run_dir) / "retrieval.json"
        atomic_write_json(table, rows)
        return {"retrieval": str(path), "retrieval_table": str(table)}
