"""CaptionArena: chains of agents that pass a message across image, text and speech.

A chain is a list of hops, each an agent name (see `.chain` for what may follow
what): ``[captioner, listener]`` (image -> text -> image choice), ``[captioner, speaker,
recognizer, listener]`` (image -> text -> speech -> text -> image choice),
``[recognizer, listener]`` (spoken digit -> digit image choice).

Training: every learned hop trains on its own supervised data (captioner: images and
their captions; recognizer: speech with its transcripts, from voices kept out of the
test; listener: captions with their images against in-batch distractors). Each epoch
gives each learned hop ``hops.<name>.steps`` updates, interleaved evenly (one update of
one hop per engine step). With ``finetune_epochs``, the last learned hop then trains on
what the hops before it produce for the training inputs (e.g. the listener on the
captioner's captions rather than the true ones); the hops before it are not updated
then, so those inputs are computed once, and again identically after a resume.

Evaluation (each epoch and at the end): per hop on its own test data (caption exact
match and BLEU-4, recognizer WER on held-out voices, listener recall@1 among K
candidates with chance 1/K), then end to end: the test inputs go through the whole chain
(``chain_accuracy``: the listener's recall@1, or exact match when the chain ends in
text). The same on the compositional split (``comp_`` prefix: captions whose
subject-relation combination never occurs in training). ``artifacts()`` writes a
"telephone" sheet (``telephone.png``, `.sheet`) and ``hops.json`` (the metrics
grouped by hop).

This module is the one class that plans which hop trains when and
evaluates hop by hop and end to end; the chain rules, the data, the metrics and the
sheet live in `.chain`, `.data`, `.metrics` and `.sheet`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np

from paddlecraft.agents import Agent, Captioner, Listener, Recognizer
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine import Arena, ArenaConfig
from paddlecraft.arenas.engine.media import Audio, Image, Text
from paddlecraft.encoders.tensorio import atomic_write_json

from .chain import Chain
from .data import (
    TASKS,
    Candidates,
    CaptionDataConfig,
    CaptionSpeechConfig,
    Pairs,
    Spoken,
    build_world,
)
from .metrics import bleu4, exact_match, group_by_hop, word_error_rate
from .sheet import telephone_sheet

log = logging.getLogger("paddlecraft")

LR_DECAYS = ("cosine", "none")


BATCH_STREAM = 0xB7  #: random-stream id: the training batches' order
FINETUNE_STREAM = 0xF7  #: random-stream id: the fine-tuning inputs
FINETUNE_VOICES_STREAM = 0xF1  #: random-stream id: the fine-tuning inputs' voices


@dataclass
class CaptionHopConfig:
    """Training of one learned hop."""

    steps: Optional[int] = None  #: updates per epoch; None = one pass over its data  # noqa: UP045
    batch_size: Optional[int] = None  #: None = 64 (32 for a recognizer)  # noqa: UP045


@dataclass
class CaptionConfig(ArenaConfig):
    """paddlecraft.arenas.CaptionArena settings."""

    chain: list[str] = field(default_factory=lambda: ["captioner", "listener"])  #: hops, by agent
    task: str = "shapes"  #: shapes (captioned shapes) | digits (sklearn digits named by word)
    epochs: int = 8  #: supervised epochs
    finetune_epochs: int = 0  #: epochs in which the last learned hop trains on upstream outputs
    hops: dict[str, CaptionHopConfig] = field(default_factory=dict)  #: per learned hop
    k: int = 4  #: candidates per listener choice (chance = 1/k)
    beam_size: int = 1  #: captioner decoding in evaluation (1 = greedy)
    lr_decay: str = "cosine"  #: cosine (each hop's lr decays to 5% over its updates) | none
    finetune_lr_scale: float = 0.3  #: lr factor while fine-tuning
    finetune_size: int = 2000  #: training inputs sent through the chain for fine-tuning
    data: CaptionDataConfig = field(default_factory=CaptionDataConfig)  #: split sizes
    files: Optional[Any] = None  #: data=captions|speech: the data.loader config  # noqa: UP045
    speech: CaptionSpeechConfig = field(default_factory=CaptionSpeechConfig)  #: spoken data
    sheet_rows: int = 8  #: test rows on the telephone sheet (plus half as many compositional)
    eval_batch_size: int = 256  #: evaluation batch


class CaptionArena(Arena):
    """Image / text / speech chains; headline ``chain_accuracy`` (end-to-end, test split).

    Args:
        agents: the agents named in ``chain`` (Captioner, Speaker, Recognizer, Listener).
        seed: run seed (data generation, order, distractors).
        **settings: `CaptionConfig` fields.
    """

    Config = CaptionConfig
    headline = "chain_accuracy"

    def __init__(self, agents: Mapping[str, Agent], seed: int = 0, **settings: Any) -> None:
        super().__init__(agents, seed=seed, **settings)
        c = self.cfg
        self.epochs = c.epochs + c.finetune_epochs
        if c.task not in TASKS:
            raise ConfigError(f"arena.task must be one of {TASKS}, got {c.task!r}")
        if c.k < 2:
            raise ConfigError(f"arena.k must be >= 2 (candidates per choice), got {c.k}")
        if c.lr_decay not in LR_DECAYS:
            raise ConfigError(f"arena.lr_decay must be one of {LR_DECAYS}, got {c.lr_decay!r}")
        self.require_agents(*c.chain)
        self.chain = Chain(self.agents, c.chain)
        self.kinds, self.learned = self.chain.kinds, self.chain.learned
        if c.finetune_epochs and len(self.learned) < 2:
            raise ConfigError(
                "arena.finetune_epochs needs a chain with a learned hop after another hop "
                f"(chain {self.chain.hops}); set arena.finetune_epochs=0"
            )
        self.finetune_hop = self.learned[-1] if c.finetune_epochs else None
        unknown = sorted(set(c.hops) - set(self.chain.hops))
        if unknown:
            log.warning("arena.hops: %s not in the chain %s; ignored", unknown, self.chain.hops)
        self.hop_cfg = {h: c.hops.get(h) or CaptionHopConfig() for h in self.learned}
        self.world = self._build_world()
        self._ft: dict[str, Any] | None = None  # fine-tuning inputs, computed once
        self._last_eval_outputs: dict[str, Any] = {}
        self._last_metrics: dict[str, float] = {}

    def _build_world(self) -> Any:
        """The splits (generated data; `.files.FileCaptionArena`: the user's files)."""
        c = self.cfg
        speech = c.speech if self.chain.has(Recognizer) else None
        return build_world(c.task, self.seed, c.k, c.data, speech)

    # ------------------------------------------------------------------ schedule
    @property
    def finetune_n(self) -> int:
        """How many training inputs go through the chain for fine-tuning."""
        w = self.world
        n = len(w.spoken_train) if self.chain.first_kind is Recognizer else len(w.train)
        return min(self.cfg.finetune_size, n)

    def _batch_size(self, hop: str) -> int:
        size = self.hop_cfg[hop].batch_size
        return (32 if self.kinds[hop] is Recognizer else 64) if size is None else int(size)

    def _steps(self, hop: str, n: int) -> int:
        steps = self.hop_cfg[hop].steps
        return int(steps) if steps else -(-n // self._batch_size(hop))

    def _sup_size(self, hop: str) -> int:
        w = self.world
        return len(w.spoken_train) if self.kinds[hop] is Recognizer else len(w.train)

    def _plan(self, epoch: int) -> list[tuple[str, int]]:
        """(hop, updates) for an epoch."""
        if epoch < self.cfg.epochs:
            return [(h, self._steps(h, self._sup_size(h))) for h in self.learned]
        return [(self.finetune_hop, self._steps(self.finetune_hop, self.finetune_n))]

    def steps_per_epoch(self) -> int:
        return sum(n for _, n in self._plan(0))

    def batches(self, epoch: int) -> Iterator[tuple[str, np.ndarray, bool]]:
        finetune = epoch >= self.cfg.epochs
        plan = self._plan(epoch)
        streams = []
        for j, (hop, steps) in enumerate(plan):
            rng = np.random.default_rng([self.seed, epoch, j, BATCH_STREAM])
            n = self.finetune_n if finetune else self._sup_size(hop)
            streams.append(self._index_batches(hop, n, steps, rng))
        # interleave evenly: update i of a hop with n updates sits at (i + 0.5) / n
        events = sorted(
            ((i + 0.5) / steps, j, i) for j, (_, steps) in enumerate(plan) for i in range(steps)
        )
        for _, j, i in events:
            yield plan[j][0], streams[j][i], finetune

    def _index_batches(
        self, hop: str, n: int, steps: int, rng: np.random.Generator
    ) -> list[np.ndarray]:
        bs = self._batch_size(hop)
        need = steps * bs
        idx = np.concatenate([rng.permutation(n) for _ in range(-(-need // n))])[:need]
        batches = idx.reshape(steps, bs)
        spoken = self.world.spoken_train
        if self.kinds[hop] is Recognizer and n == len(spoken):
            # length buckets: within groups of 8 batches, similar lengths go together
            lens = np.array([len(w) for w in spoken.waveforms])[:n]
            out = []
            for g in range(0, steps, 8):
                group = batches[g : g + 8].reshape(-1)
                group = group[np.argsort(lens[group], kind="stable")]
                parts = group.reshape(-1, bs)
                out += [parts[p] for p in rng.permutation(len(parts))]
            batches = np.stack(out)
        return list(batches)

    # ------------------------------------------------------------------ training
    def _set_lr(self, agent: Agent, finetune: bool, hop: str) -> None:
        if self.cfg.lr_decay == "none" or agent.optimizer is None or agent.scheduler is not None:
            return
        if finetune:
            agent.optimizer.set_lr(agent.lr * self.cfg.finetune_lr_scale)
            return
        total = self.cfg.epochs * self._steps(hop, self._sup_size(hop))
        t = min(agent.step_count, total) / max(1, total)
        agent.optimizer.set_lr(agent.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t))))

    def train_step(self, batch: tuple[str, np.ndarray, bool]) -> dict[str, float]:
        hop, idx, finetune = batch
        agent, kind, train = self.agents[hop], self.kinds[hop], self.world.train
        agent.train()
        self._set_lr(agent, finetune, hop)
        if finetune:
            ft = self._finetune_inputs()
            if kind is Listener:
                loss = agent.loss([ft["texts"][i] for i in idx], ft["images"][idx])
            elif kind is Recognizer:  # last learned hop after a speaker: speech of upstream text
                waves = [ft["waveforms"][i] for i in idx]
                loss = agent.loss(agent.prepare(waves, ft["rate"]), [ft["texts"][i] for i in idx])
            else:
                raise RuntimeError(f"fine-tuning a {kind.__name__} is not supported")
        elif kind is Captioner:
            loss = agent.loss(train.images[idx], [train.texts[i] for i in idx])
        elif kind is Listener:
            loss = agent.loss([train.texts[i] for i in idx], train.images[idx])
        else:  # Recognizer
            sp = self.world.spoken_train
            x = agent.prepare([sp.waveforms[i] for i in idx], sp.sample_rate)
            loss = agent.loss(x, [sp.texts[i] for i in idx])
        agent.update(loss)
        value = float(loss)
        return {"loss": value, f"{hop}_loss": value}

    def _finetune_inputs(self) -> dict[str, Any]:
        """What the hops before the fine-tuned one produce for the training inputs (cached):
        ``texts`` (and ``waveforms``/``rate`` for a recognizer), with the matching ``images``."""
        if self._ft is not None:
            return self._ft
        stop = self.chain.hops.index(self.finetune_hop)
        n, train = self.finetune_n, self.world.train
        if self.chain.first_kind is Recognizer:
            sp = self.world.spoken_train
            src = {"speech": (sp.waveforms[:n], sp.sample_rate)}
            texts_np = np.array(train.texts)
            rng = np.random.default_rng([self.seed, FINETUNE_STREAM])
            image_index = np.array(
                [rng.choice(np.flatnonzero(texts_np == t)) for t in sp.texts[:n]], np.int64
            )
        else:
            src = {"images": train.images[:n]}
            image_index = np.arange(n)
        state = self._run(
            src, self.chain.hops[:stop], voices_seed=FINETUNE_VOICES_STREAM, voices="train"
        )
        ft: dict[str, Any] = {"images": train.images[image_index]}
        if self.kinds[self.finetune_hop] is Recognizer:
            ft["waveforms"], ft["rate"] = state["speech"]
            ft["texts"] = state["said"]
        else:
            ft["texts"] = state["text"]
        log.info("fine-tuning %s on %d upstream outputs", self.finetune_hop, n)
        self._ft = ft
        return ft

    def _run(self, src: dict[str, Any], hops: Any = None, **kw: Any) -> dict[str, Any]:
        return self.chain.run(
            src, hops, beam_size=self.cfg.beam_size, batch_size=self.cfg.eval_batch_size, **kw
        )

    # ------------------------------------------------------------------ evaluation
    def chance_level(self) -> float | None:
        """1/K when the chain ends in the listener's choice among K images; None when it
        ends in text (exact match has no useful chance level)."""
        return 1.0 / self.cfg.k if self.kinds[self.cfg.chain[-1]] is Listener else None

    def evaluate(self) -> dict[str, float]:
        w = self.world
        m: dict[str, float] = {"chance": 1.0 / self.cfg.k}
        outputs: dict[str, Any] = {}
        splits = [("", w.test, w.test_cands, w.spoken_test)]
        if w.comp is not None and len(w.comp):
            splits.append(("comp_", w.comp, w.comp_cands, w.spoken_comp))
        for prefix, pairs, cands, spoken in splits:
            m.update(self._eval_hops(prefix, pairs, cands, spoken))
            chain_m, trace = self._eval_chain(prefix, pairs, cands, spoken)
            m.update(chain_m)
            outputs[prefix or "test"] = trace
        self._last_eval_outputs, self._last_metrics = outputs, dict(m)
        return m

    def _eval_hops(
        self, prefix: str, pairs: Pairs, cands: Candidates, spoken: Spoken | None
    ) -> dict[str, float]:
        """Each learned hop alone on ground-truth inputs."""
        m: dict[str, float] = {}
        for h in self.learned:
            kind = self.kinds[h]
            if kind is Listener:
                scores = self.agents[h].scores(
                    pairs.texts, pairs.images[cands.index], batch_size=self.cfg.eval_batch_size
                )
                m[f"{prefix}{h}_recall_at_1"] = float(np.mean(scores.argmax(axis=1) == cands.slot))
            elif kind is Recognizer and spoken is not None:
                hyp = self.agents[h].transcribe(spoken.waveforms, spoken.sample_rate)
                m[f"{prefix}{h}_wer"] = word_error_rate(spoken.texts, hyp)
                m[f"{prefix}{h}_exact_match"] = exact_match(hyp, spoken.texts)
        return m

    def _eval_chain(
        self, prefix: str, pairs: Pairs, cands: Candidates, spoken: Spoken | None
    ) -> tuple[dict[str, float], dict[str, Any]]:
        """The whole chain from the split's inputs; per-hop metrics against what it was given."""
        m: dict[str, float] = {}
        if self.chain.first_kind is Recognizer:
            if spoken is None:
                return m, {}
            targets = spoken.image_index
            src: dict[str, Any] = {"speech": (spoken.waveforms, spoken.sample_rate)}
            truth = spoken.texts
        else:
            targets = np.arange(len(pairs))
            src = {"images": pairs.images}
            truth = pairs.texts
        # candidates for each target image: its own K-set, re-indexed to the target
        cset, cslot = cands.index[targets], cands.slot[targets]
        src["candidates"] = pairs.images[cset]
        state = self._run(src, voices_seed=1 if prefix else 0)
        outs = dict(state["trace"])
        for h, _ in state["trace"]:
            kind = self.kinds[h]
            if kind is Captioner:
                m[f"{prefix}{h}_exact_match"] = exact_match(outs[h], truth)
                m[f"{prefix}{h}_bleu4"] = bleu4(outs[h], truth)
            elif kind is Recognizer and "said" in state:
                m[f"{prefix}chain_{h}_wer"] = word_error_rate(state["said"], outs[h])
        if "choice" in state:
            correct = state["choice"] == cslot
        else:
            correct = np.array([a == b for a, b in zip(state["text"], truth)])
        m[f"{prefix}chain_accuracy"] = float(np.mean(correct))
        waves = state.get("speech")  # the first spoken clip, for VisualDL's audio view
        trace = {
            "speech": (waves[0][0], waves[1]) if waves and len(waves[0]) else None,
            "truth": list(truth),
            "targets": targets,
            "cands": cset,
            "slot": cslot,
            "trace": state["trace"],
            "choice": state.get("choice"),
            "correct": correct,
        }
        return m, trace

    # ------------------------------------------------------------------ artifacts
    def hop_metrics(self, metrics: Mapping[str, float] | None = None) -> dict[str, Any]:
        """The last evaluation's metrics grouped by hop, split and end to end."""
        metrics = metrics if metrics is not None else self._last_metrics
        c = self.cfg
        return group_by_hop(metrics, self.chain.hops, c.task, c.k, self.world.holdout)

    def media(self, rows: int = 4) -> dict[str, Any]:
        """VisualDL at each evaluation: telephone sheet rows, the chain's texts, a spoken hop."""
        tr = self._last_eval_outputs.get("test")
        if not tr:
            return {}
        n = min(rows, len(tr["truth"]))
        sheet = telephone_sheet([(self.world.test.images, tr, i, "test") for i in range(n)])
        hops = [h for h, _ in tr["trace"]]
        lines = ["| truth | " + " | ".join(hops) + " |", "|---" * (1 + len(hops)) + "|"]
        for i in range(n):
            cells = [str(values[i]) for _, values in tr["trace"]]
            lines.append(f"| {tr['truth'][i]} | " + " | ".join(cells) + " |")
        out: dict[str, Any] = {
            "chain/telephone": Image(sheet),
            "chain/texts": Text("\n".join(lines)),
        }
        if tr.get("speech") is not None:
            wave, rate = tr["speech"]
            out["chain/spoken_hop"] = Audio(np.asarray(wave), int(rate))
        return out

    def live_view(self) -> dict[str, Any]:
        """The live page's picture: the last evaluation's telephone sheet (captions next to
        the images) and the chain's texts; nothing before the first evaluation."""
        from ..engine.live.panels import media_panels

        return {"panels": media_panels(self.media())}

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """``telephone.png`` (text at every hop for some test images) and ``hops.json``."""
        import cv2

        if not self._last_eval_outputs:
            self.evaluate()
        out = {}
        rows = []
        for name, n, label in (
            ("test", self.cfg.sheet_rows, "test"),
            ("comp_", self.cfg.sheet_rows // 2, "compositional"),
        ):
            tr = self._last_eval_outputs.get(name)
            if tr:
                images = (self.world.test if name == "test" else self.world.comp).images
                rows += [(images, tr, i, label) for i in range(min(n, len(tr["truth"])))]
        if rows:
            path = Path(run_dir) / "telephone.png"
            cv2.imwrite(str(path), cv2.cvtColor(telephone_sheet(rows), cv2.COLOR_RGB2BGR))
            out["telephone"] = str(path)
        hops_path = Path(run_dir) / "hops.json"
        atomic_write_json(hops_path, self.hop_metrics())
        out["hops"] = str(hops_path)
        return out
