"""The caption arena on your own files: captioned images (``data=captions``), speech with
transcripts (``data=speech``).

`FileCaptionArena` is the `CaptionArena` with its splits read from
files (``arena.files``, the data config's loader: `paddlecraft.craftdata.load_captions` or
`paddlecraft.craftdata.load_transcripts`, which check every file before training starts).
Training batches are decoded lazily by ``data.workers`` processes (`BatchLoader`);
only file names and texts live in memory. Each learned hop reads the training split in
its own seeded order, ``hops.<name>.steps`` batches per epoch (continuing through passes),
and ``batches(epoch, start)`` begins mid-epoch without decoding the batches before it, so
a resumed run is bit-identical. The split is recorded in ``<run>/data_split.tsv`` (or
adopted from there), so a resumed run or a re-evaluation uses the same one.

(One class: the lazy splits, their seeded per-hop order and the recorded split
must agree for resume to stay bit-identical; the chain itself lives in ``arena.py``.)

Evaluation holds the first ``arena.data.n_test`` test images (or clips) in memory:

- captions: the captioner's corpus BLEU-4 against every reference caption of an image
  (sacrebleu) and its exact match with any of them; the listener's recall@1 among
  ``arena.k`` test images given a reference caption; ``chain_accuracy``: the listener's
  recall@1 from the captioner's caption.
- speech: the recognizer's word and character error rates (jiwer) and exact match
  (``chain_accuracy``).
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents import Captioner, Listener, Recognizer
from paddlecraft.agents.instantiate import safe_instantiate
from paddlecraft.agents.settings import ConfigError
from paddlecraft.craftdata import BatchLoader
from paddlecraft.craftdata.badfiles import check_audio_file, check_image_file
from paddlecraft.craftdata.captions import CaptionFileData, CaptionFileSplit
from paddlecraft.craftdata.images import decode_image
from paddlecraft.craftdata.loader import LazySplit
from paddlecraft.craftdata.transcripts import TranscriptData, TranscriptSplit, read_audio
from paddlecraft.encoders.tensorio import atomic_write_json

from .arena import CaptionArena
from .data import Candidates
from .metrics import exact_match, group_by_hop, word_error_rate

__all__ = ["SPLIT_FILE", "FileCaptionArena", "bleu_multi", "char_error_rate"]

log = logging.getLogger("paddlecraft")

SPLIT_FILE = "data_split.tsv"  #: the recorded split in a run folder: split, file, text


LOADER_STREAM = 0xF11  #: random-stream id: each hop's loader seed
EVAL_STREAM = 0xE1  #: random-stream id: the evaluation data


def bleu_multi(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU-4 (sacrebleu) in [0, 1] of ``hyps`` against every reference of each."""
    import sacrebleu

    if not hyps:
        return float("nan")
    depth = max(len(r) for r in refs)
    streams = [[r[j] if j < len(r) else None for r in refs] for j in range(depth)]
    return float(sacrebleu.corpus_bleu(list(hyps), streams).score) / 100.0


def char_error_rate(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Corpus character error rate (jiwer)."""
    import jiwer

    return float(jiwer.cer(list(refs), list(hyps))) if refs else float("nan")


def _any_match(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """Share of hypotheses equal to one of their references (case/whitespace normalised)."""
    if not hyps:
        return float("nan")
    norm = [{" ".join(r.lower().split()) for r in rs} for rs in refs]
    return float(np.mean([" ".join(h.lower().split()) in n for h, n in zip(hyps, norm)]))


def _candidates(refs: Sequence[Sequence[str]], k: int, rng: np.random.Generator) -> Candidates:
    """K test images per image: itself and K-1 others, preferring images that its first
    reference caption does not also describe (fewer when too few such images exist)."""
    norm = [{" ".join(r.lower().split()) for r in rs} for rs in refs]
    n = len(refs)
    index = np.zeros((n, k), np.int64)
    for i in range(n):
        others = np.array([j for j in range(n) if j != i])
        clear = np.array([j for j in others if not norm[i] & norm[j]], np.int64)
        pool = clear if len(clear) >= k - 1 else others
        index[i, 0], index[i, 1:] = i, rng.choice(pool, k - 1, replace=False)
    order = np.argsort(rng.random((n, k)), axis=1)
    index = np.take_along_axis(index, order, axis=1)
    return Candidates(index, np.argmax(index == np.arange(n)[:, None], axis=1))


class _Images(LazySplit):
    """Image files decoded in workers: example ``i`` is file ``paths[y[i]]``; gives (image, i)."""

    def __init__(self, paths: np.ndarray, which: np.ndarray, transform: Any) -> None:
        self.paths, self.y, self.transform = paths, np.asarray(which, np.int64), transform

    def path(self, i: int) -> str:
        return os.fsdecode(self.paths[self.y[i]])

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        img = self.transform(decode_image(self.path(i), self.transform.channels), rng)
        return img, np.int64(i)  # [C, S, S], example index

    def empty_item(self) -> tuple[np.ndarray, ...]:
        return np.zeros(self.transform.shape, np.float32), np.int64(0)


class _Clips(LazySplit):
    """Audio files decoded (and resampled) in workers; gives (waves [B, T], lengths [B], i [B])."""

    def __init__(self, split: TranscriptSplit, n: int | None = None) -> None:
        self.split, self.y = split, np.arange(len(split) if n is None else n)

    def path(self, i: int) -> str:
        return self.split.path(i)

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        return read_audio(self.path(i), self.split.sample_rate), np.int64(i)

    def empty_item(self) -> tuple[np.ndarray, ...]:
        return np.zeros(0, np.float32), np.int64(0)

    def collate(self, items: Sequence[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        waves, idx = zip(*items)
        lens = np.array([len(w) for w in waves], np.int64)
        out = np.zeros((len(waves), max(1, int(lens.max(initial=0)))), np.float32)
        for k, w in enumerate(waves):
            out[k, : len(w)] = w
        return out, lens, np.array(idx, np.int64)


class FileCaptionArena(CaptionArena):
    """The caption arena on the user's captioned images or transcribed speech (``arena.files``).

    Args:
        agents: the chain's agents (captioner/listener for captions; a recognizer for speech).
        seed: run seed (split, order, distractors).
        source: the dataset ``files`` builds, when already built (the app builds it once:
            the agents' words come from it); None builds it here.
        **settings: `CaptionConfig` fields; ``files`` is required.
    """

    def __init__(
        self, agents: Mapping[str, Any], seed: int = 0, source: Any = None, **settings: Any
    ) -> None:
        self._given_source = source
        super().__init__(agents, seed=seed, **settings)

    def _build_world(self) -> Any:
        c = self.cfg
        if not c.files:
            raise ConfigError("arena.files is not set: use data=captions or data=speech")
        if c.finetune_epochs:
            raise ConfigError("arena.finetune_epochs is not supported with data=captions|speech")
        given, self._given_source = self._given_source, None
        self.source: CaptionFileData | TranscriptData = (
            given if given is not None else safe_instantiate(c.files)
        )
        self.speech = isinstance(self.source, TranscriptData)
        kinds = set(self.chain.kinds.values())
        want = {Recognizer} if self.speech else {Captioner, Listener}
        if not kinds <= want:
            data, chain = ("speech", "chain=asr") if self.speech else ("captions", "chain=default")
            raise ConfigError(
                f"data={data} feeds {sorted(k.__name__ for k in want)} hops, but arena.chain is "
                f"{self.chain.hops}; use {chain}"
            )
        self._check_vocab()
        n_eval = min(int(c.data.n_test), len(self.source.test.images)) if not self.speech else c.k
        if n_eval < c.k:
            raise ConfigError(
                f"arena.k={c.k} candidates need at least {c.k} test images; {n_eval} are "
                "evaluated (raise data.loader.test_fraction or arena.data.n_test)"
            )
        self._bound: str | None = None
        self._loaders: dict[str, BatchLoader] = {}
        self._eval: dict[str, Any] | None = None
        self._rows: list[tuple[str, str, str]] = []
        return None

    def _check_vocab(self) -> None:
        for h in self.learned:
            agent = self.agents[h]
            if self.speech:
                missing = sorted(set(self.source.alphabet) - set(agent.cfg.words))
                if missing or not getattr(agent, "chars", False):
                    raise ConfigError(
                        f"agents.{h} must write characters (units=chars) covering the training "
                        f"transcripts' {self.source.alphabet!r} (missing {missing}); data=speech "
                        "sets both"
                    )
                if agent.sample_rate != self.source.sample_rate:
                    raise ConfigError(
                        f"data.loader.sample_rate={self.source.sample_rate} but agents.{h} hears "
                        f"{agent.sample_rate} Hz; set it to ${{agents.{h}.encoder.sample_rate}}"
                    )
            elif getattr(agent.vocab, "itos", None) != getattr(self.source.vocab, "itos", None):
                log.warning("agents.%s.words differ from the training captions' words", h)

    # ------------------------------------------------------------------ splits
    def setup(self, run_dir: str) -> None:
        """The train/test split is recorded in the run folder (or adopted from it)."""
        super().setup(run_dir)
        if self._bound != self.run_dir:
            self._bound = self.run_dir
            self._use_record(Path(self.run_dir) / SPLIT_FILE)

    def _splits(self) -> Mapping[str, Any]:
        """The train/test splits (recorded in the run folder by `setup`)."""
        return {"train": self.source.train, "test": self.source.test}

    def _use_record(self, record: Path) -> None:
        s = self.source
        if not record.is_file():
            record.parent.mkdir(parents=True, exist_ok=True)
            tmp = record.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f, delimiter="\t", lineterminator="\n")
                for name in ("train", "test"):
                    sp = getattr(s, name)
                    for i in range(len(sp)):
                        text = sp.text(i) if self.speech else sp.caption(i)
                        w.writerow((name, sp.path(i), text))
            os.replace(tmp, record)
            return
        rows: dict[str, list[tuple[str, str]]] = {"train": [], "test": []}
        with open(record, newline="", encoding="utf-8") as f:
            for name, path, text in csv.reader(f, delimiter="\t"):
                rows[name].append((path, text))
        check = check_audio_file if self.speech else check_image_file
        bad = {p for name in rows for p, _ in rows[name] if check(p) is not None}
        for p in sorted(bad):
            s.bad_files.found(p, f"{check(p)} (listed in {record})")
        for name, rs in rows.items():
            rs = [r for r in rs if r[0] not in bad]
            setattr(s, name, self._split_of(rs, getattr(s, name)))
        self._loaders, self._eval = {}, None
        log.info("data split adopted from %s", record)

    def _split_of(self, rows: list[tuple[str, str]], like: Any) -> Any:
        enc = [(os.fsencode(p), t.encode("utf-8")) for p, t in rows]
        if self.speech:
            return TranscriptSplit(
                np.array([p for p, _ in enc], bytes), np.array([t for _, t in enc], bytes),
                like.alphabet, like.sample_rate,
            )  # fmt: skip
        index: dict[bytes, int] = {}
        for p, _ in enc:
            index.setdefault(p, len(index))
        return CaptionFileSplit(
            np.array(list(index), bytes), np.array([index[p] for p, _ in enc], np.int64),
            np.array([t for _, t in enc], bytes), like.encode, like.max_len, like.transform,
        )  # fmt: skip

    def _loader(self, hop: str) -> BatchLoader:
        train = self._splits()["train"]
        if hop not in self._loaders:
            j = self.learned.index(hop)
            split = (
                _Clips(train) if self.speech else _Images(train.images, train.y, train.transform)
            )
            self._loaders[hop] = BatchLoader(
                split, self._batch_size(hop),
                seed=int(np.random.default_rng([self.seed, j, LOADER_STREAM]).integers(2**31)),
                workers=self.source.workers, prefetch=self.source.prefetch,
                bad_files=self.source.bad_files,
            )  # fmt: skip
        return self._loaders[hop]

    # ------------------------------------------------------------------ schedule
    def _sup_size(self, hop: str) -> int:
        return len(self._splits()["train"])

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[str, tuple, bool]]:
        plan = self._plan(epoch)
        events = sorted(
            ((i + 0.5) / steps, j, i) for j, (_, steps) in enumerate(plan) for i in range(steps)
        )
        first = [steps for _, steps in plan]  # each hop's first batch from ``start`` on
        for _, j, i in events[start:]:
            first[j] = min(first[j], i)
        streams = [self._stream(h, epoch, first[j], steps) for j, (h, steps) in enumerate(plan)]
        for _, j, _ in events[start:]:
            yield plan[j][0], next(streams[j]), False

    def _stream(self, hop: str, epoch: int, begin: int, steps: int) -> Iterator[tuple]:
        """Batches ``begin..steps-1`` of ``hop`` in ``epoch``: loader passes continue across
        epochs (batch ``b`` of epoch ``e`` is number ``e * steps + b`` of the hop's passes)."""
        loader = self._loader(hop)
        per_pass = max(1, len(loader))
        g, end = epoch * steps + begin, (epoch + 1) * steps
        while g < end:
            p, b = divmod(g, per_pass)
            for fields in loader.epoch(p, start=b):
                yield fields
                g += 1
                if g == end:
                    return

    # ------------------------------------------------------------------ training
    def train_step(self, batch: tuple[str, tuple, bool]) -> dict[str, float]:
        hop, fields, _ = batch
        agent, kind = self.agents[hop], self.kinds[hop]
        train = self._splits()["train"]
        agent.train()
        self._set_lr(agent, False, hop)
        if kind is Recognizer:
            waves, lens, idx = fields
            x = agent.prepare([w[:n] for w, n in zip(waves, lens)], train.sample_rate)
            loss = agent.loss(x, [train.text(int(i)) for i in idx])
        else:
            images, idx = fields  # [B, C, S, S], [B]
            texts = [train.caption(int(i)) for i in idx]
            loss = agent.loss(images, texts) if kind is Captioner else agent.loss(texts, images)
        agent.update(loss)
        value = float(loss)
        return {"loss": value, f"{hop}_loss": value}

    # ------------------------------------------------------------------ evaluation
    def _eval_data(self) -> dict[str, Any]:
        """The first ``arena.data.n_test`` test images (with all their captions) or clips."""
        test = self._splits()["test"]
        if self._eval is not None:
            return self._eval
        n = min(int(self.cfg.data.n_test), len(test.images) if not self.speech else len(test))
        split = (
            _Clips(test, n) if self.speech else _Images(test.images, np.arange(n), test.transform)
        )
        loader = BatchLoader(split, self.cfg.eval_batch_size, shuffle=False,
                             workers=self.source.workers, bad_files=self.source.bad_files)  # fmt: skip
        parts = list(loader.epoch(0))
        idx = np.concatenate([p[-1] for p in parts]) if parts else np.zeros(0, np.int64)
        if self.speech:
            waves = [w[:k] for p in parts for w, k in zip(p[0], p[1])]
            ev = {"waves": waves, "refs": [test.text(int(i)) for i in idx], "index": idx,
                  "files": [test.path(int(i)) for i in idx]}  # fmt: skip
        else:
            refs_all = test.references()
            refs = [refs_all[int(i)] for i in idx]
            images = np.concatenate([p[0] for p in parts]) if parts else None
            rng = np.random.default_rng([self.seed, EVAL_STREAM])
            ev = {"images": images, "refs": refs, "files": [split.path(int(i)) for i in idx],
                  "cands": _candidates(refs, self.cfg.k, rng)}  # fmt: skip
        self._eval = ev
        return ev

    def evaluate(self) -> dict[str, float]:
        ev = self._eval_data()
        c = self.cfg
        m: dict[str, float] = {"chance": 1.0 / c.k} if not self.speech else {}
        rows: list[tuple[str, str, str]] = []  # file, reference(s), output
        if self.speech:
            (h,) = self.learned
            hyps = self.agents[h].transcribe(ev["waves"], self.source.sample_rate)
            m[f"{h}_wer"] = word_error_rate(ev["refs"], hyps)
            m[f"{h}_cer"] = char_error_rate(ev["refs"], hyps)
            m[f"{h}_exact_match"] = m["chain_accuracy"] = exact_match(hyps, ev["refs"])
            rows = list(zip(ev["files"], ev["refs"], hyps))
        else:
            cands, refs = ev["cands"], ev["refs"]
            cand_images = ev["images"][cands.index]  # [N, K, C, S, S]
            for h in self.learned:
                if self.kinds[h] is Listener:
                    s = self.agents[h].scores([r[0] for r in refs], cand_images, c.eval_batch_size)
                    m[f"{h}_recall_at_1"] = float(np.mean(s.argmax(1) == cands.slot))
            state = self._run({"images": ev["images"], "candidates": cand_images})
            outs = dict(state["trace"])
            for h, _ in state["trace"]:
                if self.kinds[h] is Captioner:
                    m[f"{h}_bleu4"] = bleu_multi(outs[h], refs)
                    m[f"{h}_exact_match"] = _any_match(outs[h], refs)
                    rows = [(f, " | ".join(r), o) for f, r, o in zip(ev["files"], refs, outs[h])]
            if "choice" in state:
                m["chain_accuracy"] = float(np.mean(state["choice"] == cands.slot))
            else:
                m["chain_accuracy"] = m.get(f"{self.chain.hops[-1]}_exact_match", float("nan"))
        m["eval_items"] = float(len(ev["refs"]))
        m["bad_files_skipped"] = float(len(self.source.bad_files))
        self._last_metrics, self._rows = dict(m), rows
        return m

    # ------------------------------------------------------------------ state, artifacts
    def arena_state(self) -> dict:
        """The files skipped so far (a resumed run keeps counting them)."""
        return {"bad_files": dict(self.source.bad_files.skipped)}

    def load_arena_state(self, state: dict) -> None:
        self.source.bad_files.skipped.update(state.get("bad_files", {}))

    def hop_metrics(self, metrics: Mapping[str, float] | None = None) -> dict[str, Any]:
        metrics = metrics if metrics is not None else self._last_metrics
        return group_by_hop(metrics, self.chain.hops, self.source.name, self.cfg.k)

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """``hops.json`` (metrics by hop) and ``test_outputs.tsv`` (file, references, output)."""
        if not self._last_metrics:
            self.evaluate()
        hops = Path(run_dir) / "hops.json"
        atomic_write_json(hops, self.hop_metrics())
        table = Path(run_dir) / "test_outputs.tsv"
        with open(table, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            w.writerow(("file", "reference", "output"))
            w.writerows(self._rows)
        return {"hops": str(hops), "test_outputs": str(table)}

    def close(self) -> None:
        for loader in self._loaders.values():
            loader.close()
