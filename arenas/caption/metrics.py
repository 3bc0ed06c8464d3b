"""Scores of a caption chain: exact match, BLEU-4, word error rate, and metrics grouped by hop."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["bleu4", "exact_match", "group_by_hop", "word_error_rate"]


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


def group_by_hop(
    metrics: Mapping[str, float],
    chain: Sequence[str],
    task: str,
    k: int,
    holdout: Sequence[str] = (),
) -> dict[str, Any]:
    """Flat metrics (``captioner_exact_match``, ``comp_chain_listener_...``) grouped by
    split, then hop, then ``end_to_end`` (what ``hops.json`` holds).

    A hop's metrics on its own test data keep their name; its metrics inside the chain
    (``chain_<hop>_<m>``) become ``in_chain_<m>``.
    """
    out: dict[str, Any] = {"chain": list(chain), "task": task, "k": k}
    for split, prefix in (("test", ""), ("compositional", "comp_")):
        group: dict[str, Any] = {}
        for h in chain:
            keys = {
                key[len(prefix) + len(h) + 1 :]: v
                for key, v in metrics.items()
                if key.startswith(f"{prefix}{h}_") and (prefix or not key.startswith("comp_"))
            }
            chain_keys = {
                key[len(prefix) + len("chain_") + len(h) + 1 :]: v
                for key, v in metrics.items()
                if key.startswith(f"{prefix}chain_{h}_")
            }
            if keys or chain_keys:
                group[h] = {**keys, **{f"in_chain_{m}": v for m, v in chain_keys.items()}}
        if f"{prefix}chain_accuracy" in metrics:
            group["end_to_end"] = {"chain_accuracy": metrics[f"{prefix}chain_accuracy"]}
        if group:
            out[split] = group
    out["chance"] = 1.0 / k
    if holdout:
        out["compositional_holdout"] = list(holdout)
    return out
