"""Language analysis of an emergent protocol: entropy, topographic similarity, disentanglement.

Pure numpy/scipy on integer arrays, so anyone can run them on ``messages.jsonl``:

- ``meanings`` int [N, n_attributes]: each object's attribute values;
- ``messages`` int [N, max_len]: each object's symbols; with ``eos`` set, symbol ``eos``
  ends a message and what follows it is ignored (`trim`).

Definitions follow EGG (Chaabouni et al. 2020, "Compositionality and Generalization in
Emergent Languages"): positional disentanglement gives, per message position, the gap between
the two attributes that position tells most about (mutual information), divided by the
position's entropy, averaged over the positions that are not constant; bag-of-symbols
disentanglement does the same with the count of each symbol (``eos`` excluded) in place of
a position. Entropies are in bits. A language with no informative position (constant) scores
0.0 where EGG's code would divide by zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = [
    "analyse",
    "bosdis",
    "edit_distance",
    "entropy",
    "message_entropy",
    "mutual_information",
    "posdis",
    "topsim",
    "trim",
    "vocab_used",
]


def trim(message: Sequence[int], eos: int | None = 0) -> list[int]:
    """The message up to and including its first ``eos`` (whole message if none or ``eos`` None)."""
    out = [int(s) for s in message]
    if eos is not None and eos in out:
        out = out[: out.index(eos) + 1]
    return out


def entropy(values: Sequence) -> float:
    """Entropy in bits of the empirical distribution of hashable ``values``."""
    counts = np.array(list(Counter(values).values()), np.float64)
    if counts.size == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def mutual_information(xs: Sequence, ys: Sequence) -> float:
    """I(X; Y) in bits from paired samples: H(X) + H(Y) - H(X, Y)."""
    return entropy(list(xs)) + entropy(list(ys)) - entropy(list(zip(xs, ys)))


def message_entropy(messages: np.ndarray, eos: int | None = 0) -> float:
    """Entropy (bits) of whole messages: log2(N) when all N differ, 0 when all are equal."""
    return entropy([tuple(trim(m, eos)) for m in np.asarray(messages)])


def vocab_used(messages: np.ndarray, eos: int | None = 0) -> int:
    """How many distinct symbols appear in the (trimmed) messages, ``eos`` included if used."""
    return len({s for m in np.asarray(messages) for s in trim(m, eos)})


def edit_distance(a: Sequence[int], b: Sequence[int]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions each cost 1)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def topsim(meanings: np.ndarray, messages: np.ndarray, eos: int | None = 0) -> float:
    """Spearman correlation between pairwise meaning distances (Hamming) and message edit
    distances, over all pairs of objects. 1.0: nearer meanings always get nearer messages.
    A constant language (or constant meanings) has no defined correlation: 0.0."""
    meanings = np.asarray(meanings)
    msgs = [trim(m, eos) for m in np.asarray(messages)]
    if len(msgs) < 3:
        return 0.0
    from scipy.spatial.distance import pdist  # here, not at import (every command imports it)
    from scipy.stats import spearmanr

    d_mean = pdist(meanings, metric="hamming")  # [N (N - 1) / 2] share of differing attributes
    d_msg = np.array(
        [
            edit_distance(msgs[i], msgs[j])
            for i in range(len(msgs))
            for j in range(i + 1, len(msgs))
        ],
        np.float64,
    )
    if np.ptp(d_mean) == 0 or np.ptp(d_msg) == 0:
        return 0.0
    return float(spearmanr(d_mean, d_msg).statistic)


def _information_gap(meanings: np.ndarray, representation: np.ndarray) -> float:
    """Mean over non-constant columns r of (top MI - second MI with an attribute) / H(r)."""
    n_attr = meanings.shape[1]
    gaps = []
    for j in range(representation.shape[1]):
        col = representation[:, j].tolist()
        h = entropy(col)
        if h <= 0.0:
            continue
        mi = sorted(
            (mutual_information(meanings[:, i].tolist(), col) for i in range(n_attr)), reverse=True
        )
        second = mi[1] if n_attr > 1 else 0.0
        gaps.append((mi[0] - second) / h)
    return float(np.mean(gaps)) if gaps else 0.0


def posdis(meanings: np.ndarray, messages: np.ndarray) -> float:
    """Positional disentanglement: does each position speak of one attribute only?"""
    return _information_gap(np.asarray(meanings), np.asarray(messages))


def bosdis(
    meanings: np.ndarray, messages: np.ndarray, vocab_size: int, eos: int | None = 0
) -> float:
    """Bag-of-symbols disentanglement: does each symbol's count speak of one attribute only?"""
    msgs = np.asarray(messages)
    counts = np.stack([(msgs == v).sum(axis=1) for v in range(vocab_size)], axis=1)  # [N, V]
    if eos is not None:
        counts = np.delete(counts, eos, axis=1)
    return _information_gap(np.asarray(meanings), counts)


def analyse(
    meanings: np.ndarray | None, messages: np.ndarray, vocab_size: int, eos: int | None = 0
) -> dict[str, float]:
    """Every measure at once; the meaning-based ones only when ``meanings`` are known."""
    out = {
        "message_entropy": message_entropy(messages, eos),
        "vocab_used": float(vocab_used(messages, eos)),
        "distinct_messages": float(len({tuple(trim(m, eos)) for m in np.asarray(messages)})),
    }
    if meanings is not None:
        out["topsim"] = topsim(meanings, messages, eos)
        out["posdis"] = posdis(meanings, messages)
        out["bosdis"] = bosdis(meanings, messages, vocab_size, eos)
    return out
