"""GAN quality metrics on feature-net outputs (numpy in, floats out; see `.featnet`).

Metrics (all functions take numpy arrays):

- `fid`: Fréchet distance between Gaussians fitted to two feature sets
  (classifier-FID: the feature net's ``embedding`` output instead of Inception pool3).
- `inception_score`: ``exp(E_x KL(p(y|x) || p(y)))`` with the feature net's
  softmax (classifier Inception Score; at most the number of classes).
- `prdc`: precision, recall, density and coverage of Naeem et al. 2020
  ("Reliable Fidelity and Diversity Metrics for Generative Models"), k-NN balls, k = 5.
- `class_histogram`, `normalized_entropy`: how the feature net labels the
  generated samples, and the entropy of that histogram divided by ``log(num_classes)``
  (1 = all classes equally often, 0 = one class: mode collapse).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "class_histogram",
    "classes_generated",
    "collapse_message",
    "fid",
    "frechet_distance",
    "inception_score",
    "normalized_entropy",
    "prdc",
    "quality",
    "summary_line",
    "versus_untrained",
]

#: metrics hold the class histogram (``class_share_<k>``) up to this many classes
MAX_CLASS_SHARES = 32


# ----------------------------------------------------------------------------- metrics
def frechet_distance(
    mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray
) -> float:
    """``|mu1 - mu2|^2 + Tr(S1) + Tr(S2) - 2 Tr(sqrt(S1 S2))`` in float64.

    ``Tr(sqrt(S1 S2))`` is computed as ``Tr(sqrt(A S2 A))`` with ``A = sqrt(S1)``: the
    same value (the two products are similar matrices), but ``A S2 A`` is symmetric
    positive semi-definite, so ``scipy.linalg.eigh`` gives it exactly, with no complex
    parts and no warning when a covariance is singular (dead ReLU features of the
    feature net make it so; ``scipy.linalg.sqrtm(S1 @ S2)`` then warns and may lose
    accuracy). Tiny negative eigenvalues from rounding are clipped to 0.
    """
    mu1, mu2 = np.atleast_1d(mu1).astype(np.float64), np.atleast_1d(mu2).astype(np.float64)
    s1, s2 = np.atleast_2d(sigma1).astype(np.float64), np.atleast_2d(sigma2).astype(np.float64)
    from scipy import linalg  # here, not at import: every command imports this module

    diff = mu1 - mu2
    w, v = linalg.eigh((s1 + s1.T) / 2)
    root1 = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T  # sqrt(S1)
    inner = root1 @ s2 @ root1
    tr_covmean = np.sqrt(np.clip(linalg.eigvalsh((inner + inner.T) / 2), 0.0, None)).sum()
    value = diff @ diff + np.trace(s1) + np.trace(s2) - 2.0 * tr_covmean
    return float(max(value, 0.0))


def fid(real: np.ndarray, fake: np.ndarray) -> float:
    """Fréchet distance between two feature sets [N, F] and [M, F]."""
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    return frechet_distance(
        real.mean(0), np.cov(real, rowvar=False), fake.mean(0), np.cov(fake, rowvar=False)
    )


def inception_score(probs: np.ndarray, eps: float = 1e-12) -> float:
    """``exp(mean_x KL(p(y|x) || p(y)))`` for class probabilities [N, K] (one split)."""
    p = np.asarray(probs, np.float64)
    marginal = p.mean(0, keepdims=True)
    kl = (p * (np.log(p + eps) - np.log(marginal + eps))).sum(1)
    return float(np.exp(kl.mean()))


def _sq_norms(x: np.ndarray) -> np.ndarray:
    return (x * x).sum(1)


def _distances(a: np.ndarray, b: np.ndarray, a_sq: np.ndarray, b_sq: np.ndarray) -> np.ndarray:
    d2 = a_sq[:, None] + b_sq[None, :] - 2.0 * (a @ b.T)
    return np.sqrt(np.maximum(d2, 0.0))


def _kth_neighbour_radii(x: np.ndarray, k: int, chunk: int) -> np.ndarray:
    """Distance from each row to its k-th nearest other row (self excluded)."""
    sq = _sq_norms(x)
    out = np.empty(len(x))
    for i in range(0, len(x), chunk):
        d = _distances(x[i : i + chunk], x, sq[i : i + chunk], sq)
        # the row itself is at distance ~0: the k-th neighbour is the (k+1)-th smallest
        out[i : i + chunk] = np.partition(d, k, axis=1)[:, k]
    return out


def prdc(real: np.ndarray, fake: np.ndarray, k: int = 5, chunk: int = 2048) -> dict[str, float]:
    """Precision, recall, density, coverage (Naeem et al. 2020) of ``fake`` against ``real``.

    Each point's ball has the radius of its k-th nearest neighbour in its own set.
    precision: share of fakes inside some real ball; recall: share of reals inside some
    fake ball; density: mean count of real balls holding a fake, divided by k;
    coverage: share of real balls holding at least one fake. Computed in float64 in
    row chunks (memory ~ chunk x max(N, M)).
    """
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    if len(real) <= k or len(fake) <= k:
        raise ValueError(f"prdc needs more than k={k} real and fake samples")
    r_rad = _kth_neighbour_radii(real, k, chunk)
    f_rad = _kth_neighbour_radii(fake, k, chunk)
    r_sq, f_sq = _sq_norms(real), _sq_norms(fake)
    inside_real = np.zeros(len(fake), np.int64)  # per fake: how many real balls hold it
    recall_hits = coverage_hits = 0
    for i in range(0, len(real), chunk):
        d = _distances(real[i : i + chunk], fake, r_sq[i : i + chunk], f_sq)  # [n, M]
        in_real_ball = d < r_rad[i : i + chunk, None]
        inside_real += in_real_ball.sum(0)
        recall_hits += int((d < f_rad[None, :]).any(1).sum())
        coverage_hits += int(in_real_ball.any(1).sum())
    return {
        "precision": float((inside_real > 0).mean()),
        "recall": recall_hits / len(real),
        "density": float(inside_real.sum() / (k * len(fake))),
        "coverage": coverage_hits / len(real),
    }


def class_histogram(labels_or_probs: np.ndarray, num_classes: int) -> np.ndarray:
    """Counts per class (int64 [K]) of predicted labels [N] or class probabilities [N, K]."""
    a = np.asarray(labels_or_probs)
    labels = a.argmax(1) if a.ndim == 2 else a.astype(np.int64)
    return np.bincount(labels, minlength=num_classes).astype(np.int64)


def normalized_entropy(counts: np.ndarray) -> float:
    """Entropy of a histogram divided by ``log(K)``: 1 for uniform, 0 for a single class."""
    counts = np.asarray(counts, np.float64)
    if len(counts) < 2 or counts.sum() <= 0:
        return 0.0
    p = counts / counts.sum()
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum() / np.log(len(counts)))


def classes_generated(counts: np.ndarray, min_share: float = 0.2) -> int:
    """Classes that get at least ``min_share / K`` of the samples (0.2: 2 % of them for K = 10)."""
    counts = np.asarray(counts, np.float64)
    if counts.sum() <= 0:
        return 0
    return int((counts / counts.sum() >= min_share / len(counts)).sum())


# ----------------------------------------------------------------------------- reports
def quality(
    ref_feats: np.ndarray,
    feats: np.ndarray,
    probs: np.ndarray,
    num_classes: int,
    labels: np.ndarray | None = None,
) -> dict[str, float]:
    """Every quality metric of generated samples' features/probabilities against real features.

    ``labels``: the classes the samples were asked for (conditional GAN: ``cond_accuracy``).
    """
    hist = class_histogram(probs, num_classes)
    out = {"fid": fid(ref_feats, feats), "inception_score": inception_score(probs)}
    out.update(prdc(ref_feats, feats, k=5))
    out["class_entropy"] = normalized_entropy(hist)
    out["classes_generated"] = float(classes_generated(hist))
    if labels is not None:
        out["cond_accuracy"] = float((probs.argmax(1) == labels).mean())
    shares = hist / max(hist.sum(), 1)
    out["top_class"], out["top_class_share"] = float(shares.argmax()), float(shares.max())
    if num_classes <= MAX_CLASS_SHARES:  # the histogram itself, one metric per class
        out.update({f"class_share_{k}": float(v) for k, v in enumerate(shares)})
    return out


def collapse_message(
    m: dict[str, float], min_coverage: float, min_entropy: float, num_classes: int
) -> str | None:
    """Why these metrics look like mode collapse (coverage or class entropy too low), or None."""
    low = []
    if m["coverage"] < min_coverage:
        low.append(f"coverage {m['coverage']:.3f} < {min_coverage}")
    if m["class_entropy"] < min_entropy:
        low.append(f"class-histogram entropy {m['class_entropy']:.3f} < {min_entropy}")
    if not low:
        return None
    return (
        f"{', '.join(low)} ({int(m['classes_generated'])} of {num_classes} classes generated; "
        f"class {int(m['top_class'])} takes {100 * m['top_class_share']:.0f}% of samples)"
    )


def versus_untrained(fid_value: float, fid_untrained: float) -> str:
    """How the FID compares with the untrained generator's, in the right direction:
    ``"30.2x lower"`` when training helped, ``"1.3x higher"`` when it made things worse."""
    if fid_value <= fid_untrained:
        return f"{fid_untrained / max(fid_value, 1e-12):.1f}x lower"
    return f"{fid_value / max(fid_untrained, 1e-12):.1f}x higher"


def summary_line(m: dict[str, float], num_classes: int) -> str:
    """The run's closing line: ``GAN final: classifier-FID ... recall ... IS ...``."""
    cond = f", conditional accuracy {m['cond_accuracy']:.3f}" if "cond_accuracy" in m else ""
    versus = versus_untrained(m["fid"], m["fid_untrained"])
    return (
        f"GAN final: classifier-FID {m['fid']:.3f} (untrained generator {m['fid_untrained']:.2f}: "
        f"{versus}; real test split {m['fid_real']:.3f}), recall "
        f"{m['recall']:.3f}, precision {m['precision']:.3f}, coverage {m['coverage']:.3f}, "
        f"density {m['density']:.3f}, class-histogram entropy {m['class_entropy']:.3f} "
        f"({int(m['classes_generated'])}/{num_classes} classes), IS "
        f"{m['inception_score']:.2f}{cond}"
    )
