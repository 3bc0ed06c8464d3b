"""Retrieval and classification measures of a dual encoder, from similarity matrices."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["cosine", "distinct", "recall_at_k", "retrieval_metrics"]

KS = (1, 5)  #: the recall@k reported


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[N, M] cosine similarities of rows of ``a`` [N, D] and ``b`` [M, D]."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def distinct(refs: Sequence[Sequence[str]]) -> tuple[list[str], np.ndarray]:
    """The distinct captions of a split (first-seen order) and ``relevant`` bool [N, M]:
    caption j is one of image i's own (case and spacing ignored)."""
    norm = [[" ".join(r.lower().split()) for r in rs] for rs in refs]
    index: dict[str, int] = {}
    texts: list[str] = []
    for rs, raw in zip(norm, refs):
        for r, t in zip(rs, raw):
            if r not in index:
                index[r] = len(texts)
                texts.append(t)
    relevant = np.zeros((len(refs), len(texts)), bool)
    for i, rs in enumerate(norm):
        relevant[i, [index[r] for r in rs]] = True
    return texts, relevant


def recall_at_k(sim: np.ndarray, relevant: np.ndarray, k: int) -> float:
    """Share of queries (rows of ``sim`` [Q, C]) with a relevant item (``relevant`` bool
    [Q, C]) among their ``k`` top-scored ones (ties broken by the lower index)."""
    if len(sim) == 0:
        return float("nan")
    top = np.argsort(-sim, axis=1, kind="stable")[:, :k]  # [Q, k]
    return float(np.mean(np.take_along_axis(relevant, top, axis=1).any(axis=1)))


def retrieval_metrics(sim: np.ndarray, relevant: np.ndarray) -> dict[str, float]:
    """``i2t_recall@k`` (each image among the distinct captions) and ``t2i_recall@k`` (each
    distinct caption among the images: a hit when a top-k image is one it describes)."""
    out = {}
    for k in KS:
        out[f"i2t_recall@{k}"] = recall_at_k(sim, relevant, k)
        out[f"t2i_recall@{k}"] = recall_at_k(sim.T, relevant.T, k)
    return out
