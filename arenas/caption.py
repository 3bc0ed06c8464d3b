"""CaptionArena: chains of agents that pass a message across image, text and speech.

A chain is a list of hops, each an agent name: ``[captioner, listener]`` (image -> text ->
image choice), ``[captioner, speaker, recognizer, listener]`` (image -> text -> speech ->
text -> image choice), ``[recognizer, listener]`` (spoken digit -> digit image choice).
Each hop's input must be the previous hop's output:

=============  ==================  =================
agent class    takes               gives
=============  ==================  =================
Captioner      image               text
Speaker        text                speech
Recognizer     speech              text
Listener       text (+ K images)   image choice
=============  ==================  =================

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
"telephone" sheet (``telephone.png``: test images with the text at every hop) and
``hops.json`` (the metrics grouped by hop).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np

from agents import Agent, Captioner, Listener, Recognizer, Speaker
from agents.base import AgentConfig
from encoders.tensorio import atomic_write_json

from .engine import Arena

log = logging.getLogger("paddlecraft")

# modality each kind of hop takes and gives
_IO = {Captioner: ("image", "text"), Speaker: ("text", "speech"), Recognizer: ("speech", "text")}
_IO[Listener] = ("text", "choice")


@dataclass
class _Pairs:
    """Images (uint8 [N, H, W, C]) and their texts."""

    images: np.ndarray
    texts: list[str]

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class _Spoken:
    """Clips (int16, one array each) with their texts and the index of the matching image."""

    waveforms: list[np.ndarray]
    texts: list[str]
    image_index: np.ndarray
    sample_rate: int
    voices: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)


def _as_int(x: Any, default: int) -> int:
    return default if x is None else int(x)


class CaptionArena(Arena):
    """Image / text / speech chains; headline ``chain_accuracy`` (end-to-end, test split).

    Args:
        agents: the agents named in ``chain`` (a Captioner, Speaker, Recognizer, Listener).
        chain: hop order, by agent name.
        task: ``shapes`` (captioned shapes, :func:`craftdata.load_shapes`) or ``digits``
            (sklearn digit images named by their spoken word, "seven").
        epochs: supervised epochs.
        finetune_epochs: epochs in which the last learned hop trains on upstream outputs.
        hops: per learned hop: ``steps`` per epoch (None: one pass over its data) and
            ``batch_size``.
        k: candidates per listener choice (chance = 1/k).
        beam_size: captioner decoding in evaluation (1 = greedy).
        lr_decay: ``cosine`` (each hop's learning rate decays to 5% over its supervised
            updates; fine-tuning runs at ``finetune_lr_scale`` x lr) or ``none``.
        finetune_lr_scale: learning-rate factor while fine-tuning.
        finetune_size: training inputs sent through the chain for fine-tuning.
        data: shapes split sizes (``n_train``, ``n_test``, ``n_compositional``); digits
            use ``n_test`` (test images, taken from sklearn's test split).
        speech: spoken data: ``n_train`` clips from training voices, ``n_test`` and
            ``n_compositional`` from held-out voices, ``sample_rate``, ``voice_seed``,
            ``test_fraction`` (share of voices held out), ``wav_dir`` (digits: a folder
            of ``<digit>_<speaker>_<n>.wav`` recordings, split by speaker, instead of
            eSpeak).
        sheet_rows: test rows on the telephone sheet (plus half as many compositional).
        seed: run seed (data generation, order, distractors).
    """

    headline = "chain_accuracy"

    def __init__(
        self,
        agents: Mapping[str, Agent],
        chain: Sequence[str] = ("captioner", "listener"),
        task: str = "shapes",
        epochs: int = 8,
        finetune_epochs: int = 0,
        hops: Mapping[str, Any] | None = None,
        k: int = 4,
        beam_size: int = 1,
        lr_decay: str = "cosine",
        finetune_lr_scale: float = 0.3,
        finetune_size: int = 2000,
        data: Mapping[str, Any] | None = None,
        speech: Mapping[str, Any] | None = None,
        sheet_rows: int = 8,
        eval_batch_size: int = 256,
        seed: int = 0,
    ) -> None:
        super().__init__(agents, epochs=epochs + finetune_epochs, seed=seed)
        if task not in ("shapes", "digits"):
            raise ValueError(f"arena.task must be 'shapes' or 'digits', got {task!r}")
        if k < 2:
            raise ValueError(f"arena.k must be >= 2 (candidates per choice), got {k}")
        if lr_decay not in ("cosine", "none"):
            raise ValueError(f"arena.lr_decay must be 'cosine' or 'none', got {lr_decay!r}")
        self.chain = [str(h) for h in chain]
        self.require_agents(*self.chain)
        self.task, self.k, self.beam_size, self.lr_decay = task, int(k), int(beam_size), lr_decay
        self.supervised_epochs, self.finetune_epochs = int(epochs), int(finetune_epochs)
        self.finetune_lr_scale, self.finetune_size = float(finetune_lr_scale), int(finetune_size)
        self.sheet_rows, self.eval_batch_size = int(sheet_rows), int(eval_batch_size)
        self.kinds = self._check_chain()
        self.learned = [h for h in self.chain if self.kinds[h] is not Speaker]
        if finetune_epochs and len(self.learned) < 2:
            raise ValueError(
                "arena.finetune_epochs needs a chain with a learned hop after another hop "
                f"(chain {self.chain}); set arena.finetune_epochs=0"
            )
        self.finetune_hop = self.learned[-1] if finetune_epochs else None
        hops = {str(h): dict(v or {}) for h, v in (hops or {}).items()}
        unknown = sorted(set(hops) - set(self.chain))
        if unknown:
            log.warning("arena.hops: %s not in the chain %s; ignored", unknown, self.chain)
        self.hop_cfg = {h: hops.get(h, {}) for h in self.learned}
        self.data_cfg = dict(data or {})
        self.speech_cfg = dict(speech or {})
        self._build_world()
        self._ft_texts: list[str] | None = None  # fine-tuning inputs, computed once
        self._last_eval_outputs: dict[str, Any] = {}
        self._last_metrics: dict[str, float] = {}

    # ------------------------------------------------------------------ set-up
    def _check_chain(self) -> dict[str, type]:
        if not self.chain:
            raise ValueError("arena.chain is empty; e.g. arena.chain=[captioner,listener]")
        kinds: dict[str, type] = {}
        for h in self.chain:
            kind = next((k for k in _IO if isinstance(self.agents[h], k)), None)
            if kind is None:
                raise ValueError(
                    f"arena.chain hop {h!r} is a {type(self.agents[h]).__name__}; hops must be "
                    "a Captioner, Speaker, Recognizer or Listener"
                )
            kinds[h] = kind
        first = _IO[kinds[self.chain[0]]][0]
        if first not in ("image", "speech"):
            raise ValueError(
                f"arena.chain must start from an image (captioner) or speech (recognizer); "
                f"{self.chain[0]!r} takes {first}"
            )
        for a, b in zip(self.chain, self.chain[1:]):
            gives, takes = _IO[kinds[a]][1], _IO[kinds[b]][0]
            if gives != takes:
                raise ValueError(
                    f"arena.chain: {a!r} gives {gives} but {b!r} takes {takes}; "
                    "e.g. [captioner, listener] or [captioner, speaker, recognizer, listener]"
                )
        return kinds

    def _has(self, kind: type) -> bool:
        return any(k is kind for k in self.kinds.values())

    def _build_world(self) -> None:
        d = self.data_cfg
        if self.task == "shapes":
            from craftdata.shapes import load_shapes

            data = load_shapes(
                self.seed,
                n_train=_as_int(d.get("n_train"), 6000),
                n_test=_as_int(d.get("n_test"), 500),
                n_compositional=_as_int(d.get("n_compositional"), 300),
            )
            self.train = _Pairs(data.train.images, data.train.captions)
            self.test = _Pairs(data.test.images, data.test.captions)
            self.comp: _Pairs | None = _Pairs(
                data.compositional.images, data.compositional.captions
            )
            self.holdout = [" ".join(t) for t in data.holdout]
        else:
            from craftdata import load_digits
            from craftdata.speech import DIGIT_WORDS

            digits = load_digits(self.seed)

            def pairs(split: Any, n: int | None = None) -> _Pairs:
                x = np.round(split.x[:n, 0] * 255).astype(np.uint8)[..., None]  # [N, 8, 8, 1]
                return _Pairs(x, [DIGIT_WORDS[int(y)] for y in split.y[:n]])

            self.train = pairs(digits.train)
            self.test = pairs(
                digits.test, _as_int(d.get("n_test"), None) if d.get("n_test") else None
            )
            self.comp = None
            self.holdout = []
        rng = np.random.default_rng([self.seed, 0xE1])
        self.test_cands = self._candidates(self.test, rng)
        self.comp_cands = self._candidates(self.comp, rng) if self.comp is not None else None
        self.spoken_train = self.spoken_test = self.spoken_comp = None
        if self._has(Recognizer):
            self._build_speech()

    def _candidates(self, pairs: _Pairs, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """For each item: K image indices (the item itself + K-1 with other texts), and its slot."""
        texts = np.array(pairs.texts)
        n, k = len(texts), self.k
        cands = np.zeros((n, k), np.int64)
        for i in range(n):
            pool = np.flatnonzero(texts != texts[i])
            if len(pool) < k - 1:
                raise ValueError(f"arena.k={k}: too few distinct texts to draw {k - 1} distractors")
            cands[i, 0] = i
            cands[i, 1:] = rng.choice(pool, k - 1, replace=False)
        order = np.argsort(rng.random((n, k)), axis=1)
        cands = np.take_along_axis(cands, order, axis=1)
        return cands, np.argmax(cands == np.arange(n)[:, None], axis=1)

    def _build_speech(self) -> None:
        from craftdata.speech import cache_root, split_voices, spoken_split

        s = self.speech_cfg
        rate = _as_int(s.get("sample_rate"), 16000)
        train_voices, test_voices = split_voices(
            _as_int(s.get("voice_seed"), 0), float(s.get("test_fraction") or 0.2)
        )
        n_train = _as_int(s.get("n_train"), 3000)
        n_test = min(_as_int(s.get("n_test"), 500), len(self.test))
        if s.get("wav_dir"):
            self._build_wav_speech(str(s["wav_dir"]), rate, n_test)
            return
        t0 = time.perf_counter()
        rng = np.random.default_rng([self.seed, 0x5C])
        texts = [self.train.texts[i] for i in rng.integers(0, len(self.train), n_train)]
        tr = spoken_split(texts, train_voices, [self.seed, 0x51], rate)
        te = spoken_split(self.test.texts[:n_test], test_voices, [self.seed, 0x52], rate)
        self.spoken_train = _Spoken(tr.waveforms, tr.texts, np.zeros(0, np.int64), rate, tr.voices)
        self.spoken_test = _Spoken(te.waveforms, te.texts, np.arange(n_test), rate, te.voices)
        if self.comp is not None:
            n_comp = min(_as_int(s.get("n_compositional"), 300), len(self.comp))
            co = spoken_split(self.comp.texts[:n_comp], test_voices, [self.seed, 0x53], rate)
            self.spoken_comp = _Spoken(co.waveforms, co.texts, np.arange(n_comp), rate, co.voices)
        log.info(
            "spoken data: %d training clips (%d voices), %d test clips (%d held-out voices) "
            "in %.1f s (eSpeak NG, cached under %s)",
            len(tr),
            len(train_voices),
            len(te),
            len(test_voices),
            time.perf_counter() - t0,
            cache_root() / "speech",
        )

    def _build_wav_speech(self, folder: str, rate: int, n_test: int) -> None:
        from craftdata.wav import load_wav_folder, split_by_speaker

        if self.task != "digits":
            raise ValueError(
                "arena.speech.wav_dir holds spoken digits: use it with arena.task=digits"
            )
        train, test = split_by_speaker(load_wav_folder(folder, rate), seed=self.seed)
        self.spoken_train = _Spoken(
            train.waveforms, train.texts, np.zeros(0, np.int64), rate, train.voices
        )
        # each test clip is matched with a test image of the same digit
        rng = np.random.default_rng([self.seed, 0x5D])
        texts = np.array(self.test.texts)
        match = np.array([rng.choice(np.flatnonzero(texts == t)) for t in test.texts], np.int64)
        self.spoken_test = _Spoken(test.waveforms, test.texts, match, rate, test.voices)
        log.info(
            "speech from %s: %d train clips, %d test clips (speakers %s)",
            folder,
            len(train),
            len(test),
            sorted(set(test.voices)),
        )

    # ------------------------------------------------------------------ schedule
    @property
    def finetune_n(self) -> int:
        """How many training inputs go through the chain for fine-tuning."""
        first = self.kinds[self.chain[0]]
        n = len(self.spoken_train) if first is Recognizer else len(self.train)
        return min(self.finetune_size, n)

    def _batch_size(self, hop: str) -> int:
        default = 32 if self.kinds[hop] is Recognizer else 64
        return _as_int(self.hop_cfg[hop].get("batch_size"), default)

    def _steps(self, hop: str, n: int) -> int:
        steps = self.hop_cfg[hop].get("steps")
        return int(steps) if steps else -(-n // self._batch_size(hop))

    def _plan(self, epoch: int) -> list[tuple[str, int]]:
        """(hop, updates) for an epoch."""
        if epoch < self.supervised_epochs:
            return [(h, self._steps(h, self._sup_size(h))) for h in self.learned]
        return [(self.finetune_hop, self._steps(self.finetune_hop, self.finetune_n))]

    def _sup_size(self, hop: str) -> int:
        return len(self.spoken_train) if self.kinds[hop] is Recognizer else len(self.train)

    def steps_per_epoch(self) -> int:
        return sum(n for _, n in self._plan(0))

    def batches(self, epoch: int) -> Iterator[tuple[str, np.ndarray, bool]]:
        finetune = epoch >= self.supervised_epochs
        plan = self._plan(epoch)
        streams = []
        for j, (hop, steps) in enumerate(plan):
            rng = np.random.default_rng([self.seed, epoch, j, 0xB7])
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
        if self.kinds[hop] is Recognizer and n == len(self.spoken_train):
            # length buckets: within groups of 8 batches, similar lengths go together
            lens = np.array([len(w) for w in self.spoken_train.waveforms])[:n]
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
        if self.lr_decay == "none" or agent.optimizer is None or agent.scheduler is not None:
            return
        if finetune:
            agent.optimizer.set_lr(agent.lr * self.finetune_lr_scale)
            return
        total = self.supervised_epochs * self._steps(hop, self._sup_size(hop))
        t = min(agent.step_count, total) / max(1, total)
        agent.optimizer.set_lr(agent.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t))))

    def train_step(self, batch: tuple[str, np.ndarray, bool]) -> dict[str, float]:
        hop, idx, finetune = batch
        agent = self.agents[hop]
        kind = self.kinds[hop]
        agent.train()
        self._set_lr(agent, finetune, hop)
        if finetune:
            texts = self._finetune_inputs()
            images = self._finetune_images()
            if kind is Listener:
                loss = agent.loss([texts[i] for i in idx], images[idx])
            elif kind is Recognizer:  # last learned hop after a speaker: speech of upstream text
                waves, wtexts = self._ft_speech
                loss = agent.loss(
                    agent.prepare([waves[i] for i in idx], self._ft_rate), [wtexts[i] for i in idx]
                )
            else:
                raise RuntimeError(f"fine-tuning a {kind.__name__} is not supported")
        elif kind is Captioner:
            loss = agent.loss(self.train.images[idx], [self.train.texts[i] for i in idx])
        elif kind is Listener:
            loss = agent.loss([self.train.texts[i] for i in idx], self.train.images[idx])
        else:  # Recognizer
            sp = self.spoken_train
            x = agent.prepare([sp.waveforms[i] for i in idx], sp.sample_rate)
            loss = agent.loss(x, [sp.texts[i] for i in idx])
        agent.update(loss)
        value = float(loss)
        return {"loss": value, f"{hop}_loss": value}

    # ------------------------------------------------------------------ fine-tuning inputs
    def _finetune_images(self) -> np.ndarray:
        if self.kinds[self.chain[0]] is Recognizer:
            return self.train.images[self._ft_image_index]
        return self.train.images[: self.finetune_n]

    def _finetune_inputs(self) -> list[str]:
        """What the hops before the fine-tuned one produce for the training inputs (cached)."""
        if self._ft_texts is not None:
            return self._ft_texts
        stop = self.chain.index(self.finetune_hop)
        n = self.finetune_n
        if self.kinds[self.chain[0]] is Recognizer:
            sp = self.spoken_train
            src = {"speech": (sp.waveforms[:n], sp.sample_rate)}
            texts_np = np.array(self.train.texts)
            rng = np.random.default_rng([self.seed, 0xF7])
            self._ft_image_index = np.array(
                [rng.choice(np.flatnonzero(texts_np == t)) for t in sp.texts[:n]], np.int64
            )
        else:
            src = {"images": self.train.images[:n]}
        trace = self._run_hops(self.chain[:stop], src, voices_seed=0xF1, voices="train")
        if self.kinds[self.finetune_hop] is Recognizer:
            waves, rate = trace["speech"]
            self._ft_speech = (waves, trace["said"])
            self._ft_rate = rate
            self._ft_texts = trace["said"]
        else:
            self._ft_texts = trace["text"]
        log.info("fine-tuning %s on %d upstream outputs", self.finetune_hop, n)
        return self._ft_texts

    # ------------------------------------------------------------------ running a chain
    def _run_hops(
        self, hops: Sequence[str], src: dict[str, Any], voices_seed: int = 0, voices: Any = None
    ) -> dict:
        """Send inputs through ``hops``; return the last value of each modality and a trace.

        ``voices`` overrides the speakers' voices (fine-tuning speaks with training voices,
        so no held-out voice is ever trained on).
        """
        state: dict[str, Any] = dict(src)
        state["trace"] = []
        for h in hops:
            agent, kind = self.agents[h], self.kinds[h]
            if kind is Captioner:
                state["text"] = agent.caption(
                    state["images"], beam_size=self.beam_size, batch_size=self.eval_batch_size
                )
                state["trace"].append((h, list(state["text"])))
            elif kind is Speaker:
                said = list(state["text"])
                spoken = agent.speak_split(said, seed=voices_seed, voices=voices)
                rate = agent.sample_rate
                state["speech"] = (spoken.waveforms, rate)
                state["said"] = said
                notes = [
                    f"(voice {v}, {len(w) / rate:.1f} s)"
                    for v, w in zip(spoken.voices, spoken.waveforms)
                ]
                state["trace"].append((h, notes))
            elif kind is Recognizer:
                waves, rate = state["speech"]
                state["text"] = agent.transcribe(waves, rate, batch_size=64)
                state["trace"].append((h, list(state["text"])))
            else:  # Listener: needs candidates, given in src
                cands = state["candidates"]
                scores = agent.scores(state["text"], cands, batch_size=self.eval_batch_size)
                state["choice"] = scores.argmax(axis=1)
                state["trace"].append(
                    (h, [f"picked {c + 1} of {cands.shape[1]}" for c in state["choice"]])
                )
        return state

    # ------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict[str, float]:
        m: dict[str, float] = {"chance": 1.0 / self.k}
        outputs: dict[str, Any] = {}
        splits = [("", self.test, self.test_cands, self.spoken_test)]
        if self.comp is not None and len(self.comp):
            splits.append(("comp_", self.comp, self.comp_cands, self.spoken_comp))
        for prefix, pairs, (cands, slot), spoken in splits:
            m.update(self._eval_hops(prefix, pairs, cands, slot, spoken))
            chain_m, trace = self._eval_chain(prefix, pairs, cands, slot, spoken)
            m.update(chain_m)
            outputs[prefix or "test"] = trace
        self._last_eval_outputs, self._last_metrics = outputs, dict(m)
        return m

    def _eval_hops(self, prefix, pairs, cands, slot, spoken) -> dict[str, float]:
        """Each learned hop alone on ground-truth inputs."""
        m: dict[str, float] = {}
        for h in self.learned:
            kind = self.kinds[h]
            if kind is Listener:
                scores = self.agents[h].scores(
                    pairs.texts, pairs.images[cands], batch_size=self.eval_batch_size
                )
                choice = scores.argmax(axis=1)
                m[f"{prefix}{h}_recall_at_1"] = float(np.mean(choice == slot))
            elif kind is Recognizer and spoken is not None:
                hyp = self.agents[h].transcribe(spoken.waveforms, spoken.sample_rate)
                m[f"{prefix}{h}_wer"] = word_error_rate(spoken.texts, hyp)
                m[f"{prefix}{h}_exact_match"] = exact_match(hyp, spoken.texts)
        return m

    def _eval_chain(self, prefix, pairs, cands, slot, spoken) -> tuple[dict[str, float], dict]:
        """The whole chain from the split's inputs; per-hop metrics against what it was given."""
        m: dict[str, float] = {}
        first = self.kinds[self.chain[0]]
        if first is Recognizer:
            if spoken is None:
                return m, {}
            targets = spoken.image_index
            src = {"speech": (spoken.waveforms, spoken.sample_rate)}
            truth = spoken.texts
        else:
            targets = np.arange(len(pairs))
            src = {"images": pairs.images}
            truth = pairs.texts
        # candidates for each target image: its own K-set, re-indexed to the target
        cset, cslot = cands[targets], slot[targets]
        src["candidates"] = pairs.images[cset]
        state = self._run_hops(self.chain, src, voices_seed=1 if prefix else 0)
        said = None
        for h, _ in state["trace"]:
            kind = self.kinds[h]
            if kind is Captioner:
                out = dict(state["trace"])[h]
                m[f"{prefix}{h}_exact_match"] = exact_match(out, truth)
                m[f"{prefix}{h}_bleu4"] = bleu4(out, truth)
            elif kind is Speaker:
                said = state["said"]
            elif kind is Recognizer and said is not None:
                out = dict(state["trace"])[h]
                m[f"{prefix}chain_{h}_wer"] = word_error_rate(said, out)
        if "choice" in state:
            correct = state["choice"] == cslot
            m[f"{prefix}chain_accuracy"] = float(np.mean(correct))
        else:
            correct = np.array([a == b for a, b in zip(state["text"], truth)])
            m[f"{prefix}chain_accuracy"] = float(np.mean(correct))
        trace = {
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
    def artifacts(self, run_dir: str) -> dict[str, str]:
        """``telephone.png`` (text at every hop for some test images) and ``hops.json``."""
        if not self._last_eval_outputs:
            self.evaluate()
        out = {}
        path = Path(run_dir) / "telephone.png"
        import cv2

        rows = []
        for name, n in (("test", self.sheet_rows), ("comp_", self.sheet_rows // 2)):
            tr = self._last_eval_outputs.get(name)
            if tr:
                pairs = self.test if name == "test" else self.comp
                for i in range(min(n, len(tr["truth"]))):
                    rows.append(
                        self._sheet_row(pairs, tr, i, "compositional" if name != "test" else "test")
                    )
        if rows:
            cv2.imwrite(str(path), cv2.cvtColor(np.concatenate(rows, axis=0), cv2.COLOR_RGB2BGR))
            out["telephone"] = str(path)
        hops_path = Path(run_dir) / "hops.json"
        atomic_write_json(hops_path, self.hop_metrics())
        out["hops"] = str(hops_path)
        return out

    def hop_metrics(self, metrics: Mapping[str, float] | None = None) -> dict[str, Any]:
        """The last evaluation's metrics grouped by hop, split and end to end."""
        metrics = dict(metrics if metrics is not None else self._last_metrics)
        out: dict[str, Any] = {"chain": self.chain, "task": self.task, "k": self.k}
        for split, prefix in (("test", ""), ("compositional", "comp_")):
            group: dict[str, Any] = {}
            for h in self.chain:
                keys = {
                    k[len(prefix) + len(h) + 1 :]: v
                    for k, v in metrics.items()
                    if k.startswith(f"{prefix}{h}_") and (prefix or not k.startswith("comp_"))
                }
                chain_keys = {
                    k[len(prefix) + len("chain_") + len(h) + 1 :]: v
                    for k, v in metrics.items()
                    if k.startswith(f"{prefix}chain_{h}_")
                }
                if keys or chain_keys:
                    group[h] = {**keys, **{f"in_chain_{k}": v for k, v in chain_keys.items()}}
            if f"{prefix}chain_accuracy" in metrics:
                group["end_to_end"] = {"chain_accuracy": metrics[f"{prefix}chain_accuracy"]}
            if group:
                out[split] = group
        out["chance"] = 1.0 / self.k
        if self.holdout:
            out["compositional_holdout"] = self.holdout
        return out

    def _sheet_row(self, pairs: _Pairs, tr: dict, i: int, label: str) -> np.ndarray:
        import cv2

        text_w = 560
        target = tr["targets"][i]
        img = pairs.images[target]
        img = np.repeat(img, 3, axis=-1) if img.shape[-1] == 1 else img
        side = 128
        big = cv2.resize(img, (side, side), interpolation=cv2.INTER_NEAREST)
        cands = pairs.images[tr["cands"][i]] if tr.get("cands") is not None else None
        lines = [f"[{label}] truth: {tr['truth'][i]}"] + [
            f"{h}: {outs[i]}" for h, outs in tr["trace"]
        ]
        thumb = 44
        y0 = 20 + 16 * len(lines) + 10  # thumbnails below the text, "target" label above them
        row_h = max(side + 12, y0 + thumb + 8)
        row = np.full((row_h, side + text_w, 3), 255, np.uint8)
        row[6 : 6 + side, 0:side] = big
        ok = bool(tr["correct"][i])
        for j, line in enumerate(lines):
            color = (0, 0, 0) if j else (90, 90, 90)
            cv2.putText(
                row,
                line[:70],
                (side + 8, 20 + 16 * j),
                cv2.FONT_HERSHEY_SIMPLEX,
                0.42,
                color,
                1,
                cv2.LINE_AA,
            )
        if cands is not None and tr.get("choice") is not None:
            for c in range(len(cands)):
                im = cands[c]
                im = np.repeat(im, 3, axis=-1) if im.shape[-1] == 1 else im
                x0 = side + 8 + c * (thumb + 8)
                row[y0 : y0 + thumb, x0 : x0 + thumb] = cv2.resize(
                    im, (thumb, thumb), interpolation=cv2.INTER_AREA
                )
                if c == tr["choice"][i]:
                    cv2.rectangle(
                        row,
                        (x0 - 2, y0 - 2),
                        (x0 + thumb + 1, y0 + thumb + 1),
                        (0, 160, 0) if ok else (220, 0, 0),
                        2,
                    )
                if c == tr["slot"][i]:
                    cv2.putText(
                        row,
                        "target",
                        (x0, y0 - 5),
                        cv2.FONT_HERSHEY_SIMPLEX,
                        0.35,
                        (0, 0, 0),
                        1,
                        cv2.LINE_AA,
                    )
        mark = "ok" if ok else "WRONG"
        cv2.putText(
            row,
            mark,
            (side + text_w - 70, row_h - 12),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.55,
            (0, 140, 0) if ok else (200, 0, 0),
            1,
            cv2.LINE_AA,
        )
        row[-1] = 200
        return row


# ----------------------------------------------------------------------------- metrics
def exact_match(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Share of hypotheses equal to their reference (whitespace/case normalised)."""
    if not refs:
        return math.nan
    return float(
        np.mean(
            [" ".join(a.lower().split()) == " ".join(b.lower().split()) for a, b in zip(hyps, refs)]
        )
    )


def bleu4(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus BLEU-4 (sacrebleu, 13a tokenisation) in [0, 1]."""
    import sacrebleu

    if not refs:
        return math.nan
    return float(sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score) / 100.0


def word_error_rate(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Corpus word error rate (jiwer): (substitutions + deletions + insertions) / reference words."""
    import jiwer

    if not refs:
        return math.nan
    return float(jiwer.wer(list(refs), list(hyps)))


# ----------------------------------------------------------------------------- Hydra schemas
@dataclass
class TextEncoderConfig:
    """encoders.TextEncoder (the listener's text side); ``vocab_size`` comes from ``words``."""

    _target_: str = "encoders.TextEncoder"
    vocab_size: Optional[int] = None  #: filled in by the agent  # noqa: UP045
    embed_dim: int = 32  #: token embedding size
    hidden_size: int = 64  #: sentence embedding size
    arch: str = "gru"  #: gru | transformer
    num_layers: int = 1  #: recurrent / transformer layers
    num_heads: int = 4  #: transformer heads
    max_len: int = 64  #: transformer positions
    num_classes: Optional[int] = None  #: unused by the listener  # noqa: UP045
    dropout: float = 0.0  #: dropout between layers


@dataclass
class TextDecoderConfig:
    """encoders.TextDecoder; ``vocab_size`` and ``cond_dim`` are filled in by the agent."""

    _target_: str = "encoders.TextDecoder"
    vocab_size: Optional[int] = None  #: filled in by the agent  # noqa: UP045
    cond_dim: Optional[int] = None  #: filled in by the agent  # noqa: UP045
    embed_dim: int = 32  #: token embedding size
    hidden_size: int = 128  #: GRU state size
    max_len: int = 12  #: longest decoded text (tokens, <eos> included)


@dataclass
class SpeechEncoderConfig:
    """encoders.SpeechEncoder (the recognizer's front end and frames)."""

    _target_: str = "encoders.SpeechEncoder"
    sample_rate: int = 16000  #: input rate (other rates are resampled by the recognizer)
    n_mels: int = 40  #: mel bands
    n_fft: int = 640  #: FFT size (40 ms)
    hop_length: int = 320  #: frame hop (20 ms); each conv block halves the frame rate
    channels: list[int] = field(default_factory=lambda: [64, 64])  #: stride-2 conv blocks
    hidden_size: int = 96  #: GRU size per direction
    embedding_dim: int = 128  #: pooled embedding (seq2seq head)
    num_classes: Optional[int] = None  #: unused by the recognizer  # noqa: UP045
    max_seconds: Optional[float] = None  #: reject longer clips  # noqa: UP045
    bidirectional: bool = True  #: bidirectional GRU
    pool: str = "last"  #: mean | last (pooled embedding, seq2seq head)
    normalize: bool = True  #: unit RMS per utterance


def _shapes_cnn() -> dict[str, Any]:
    # a plain dict (not ImageCNNEncoderConfig): every agent config keeps an untyped
    # ``encoder`` slot, so any agent composes where another's encoder was
    return {
        "_target_": "encoders.ImageCNNEncoder",
        "in_channels": 3,
        "image_size": 64,
        "channels": [16, 32, 64, 64],
        "embedding_dim": 128,
        "num_classes": None,
    }


@dataclass
class CaptionerConfig(AgentConfig):
    """agents.Captioner: ImageCNNEncoder + TextDecoder."""

    _target_: str = "agents.Captioner"
    encoder: Any = field(default_factory=_shapes_cnn)  #: ImageCNNEncoder config
    decoder: TextDecoderConfig = field(default_factory=TextDecoderConfig)  #: TextDecoder config
    words: Any = "shapes"  #: vocabulary: shapes | digits | a list of words
    beam_size: int = 1  #: default decoding: 1 = greedy


@dataclass
class ListenerConfig(AgentConfig):
    """agents.Listener: TextEncoder + ImageCNNEncoder, cosine scores over K candidates."""

    _target_: str = "agents.Listener"
    text_encoder: TextEncoderConfig = field(default_factory=TextEncoderConfig)  #: text side
    encoder: Any = field(default_factory=_shapes_cnn)  #: image side: ImageCNNEncoder config
    words: Any = "shapes"  #: vocabulary: shapes | digits | a list of words
    dim: int = 64  #: joint embedding size
    temperature: float = 0.1  #: softmax temperature of cosine scores


@dataclass
class RecognizerConfig(AgentConfig):
    """agents.Recognizer: SpeechEncoder + CTC (or a seq2seq TextDecoder)."""

    _target_: str = "agents.Recognizer"
    encoder: Any = field(default_factory=lambda: asdict(SpeechEncoderConfig()))  #: SpeechEncoder
    decoder: TextDecoderConfig = field(default_factory=TextDecoderConfig)  #: head=seq2seq only
    head: str = "ctc"  #: ctc | seq2seq
    words: Any = "shapes"  #: vocabulary: shapes | digits | a list of words


@dataclass
class SpeakerConfig(AgentConfig):
    """agents.Speaker: eSpeak NG text to speech (no parameters)."""

    _target_: str = "agents.Speaker"
    encoder: Any = None  #: unused: eSpeak NG does the work (every agent config has the slot)
    voices: Any = "test"  #: train | test | all | a list of voice variants
    sample_rate: int = 16000  #: output rate
    voice_seed: int = 0  #: seed of the train/test voice split
    test_fraction: float = 0.2  #: share of voices held out


@dataclass
class CaptionHopConfig:
    """Training of one learned hop."""

    steps: Optional[int] = None  #: updates per epoch; None = one pass over its data  # noqa: UP045
    batch_size: Optional[int] = None  #: None = 64 (32 for a recognizer)  # noqa: UP045


@dataclass
class CaptionDataConfig:
    """Split sizes (shapes; digits use n_test)."""

    n_train: int = 6000  #: training images
    n_test: int = 500  #: in-distribution test images
    n_compositional: int = 300  #: images of held-out combinations


@dataclass
class CaptionSpeechConfig:
    """Spoken data for a recognizer hop."""

    n_train: int = 3000  #: clips from training voices
    n_test: int = 500  #: clips from held-out voices (the first test texts)
    n_compositional: int = 300  #: held-out voices speaking compositional captions
    sample_rate: int = 16000  #: clip rate
    voice_seed: int = 0  #: seed of the train/test voice split
    test_fraction: float = 0.2  #: share of voices held out
    wav_dir: Optional[str] = None  #: digits: FSDD-layout WAV folder instead of eSpeak  # noqa: UP045


@dataclass
class CaptionArenaConfig:
    """arenas.CaptionArena: chains across image, text and speech."""

    _target_: str = "arenas.CaptionArena"
    chain: list[str] = field(default_factory=lambda: ["captioner", "listener"])  #: hops
    task: str = "shapes"  #: shapes | digits
    epochs: int = 8  #: supervised epochs
    finetune_epochs: int = 0  #: epochs of the last learned hop on upstream outputs
    hops: dict[str, CaptionHopConfig] = field(default_factory=dict)  #: per learned hop
    k: int = 4  #: candidates per listener choice
    beam_size: int = 1  #: captioner decoding in evaluation
    lr_decay: str = "cosine"  #: cosine | none
    finetune_lr_scale: float = 0.3  #: lr factor while fine-tuning
    finetune_size: int = 2000  #: training inputs sent through the chain for fine-tuning
    data: CaptionDataConfig = field(default_factory=CaptionDataConfig)  #: split sizes
    speech: CaptionSpeechConfig = field(default_factory=CaptionSpeechConfig)  #: spoken data
    sheet_rows: int = 8  #: test rows on the telephone sheet
    eval_batch_size: int = 256  #: evaluation batch


SCHEMAS: dict[str, dict[str, type]] = {
    "schema/agent": {
        "captioner": CaptionerConfig,
        "listener": ListenerConfig,
        "recognizer": RecognizerConfig,
        "speaker": SpeakerConfig,
    },
    "schema/arena": {"caption": CaptionArenaConfig},
}
