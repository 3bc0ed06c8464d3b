"""GAN quality metrics computed offline, from a feature network the toolkit trains itself.

Nothing is downloaded: instead of Inception weights, a small
:class:`~encoders.ImageCNNEncoder` classifier is trained on the real training split the
first time it is needed and cached (safetensors) under
``$PADDLECRAFT_CACHE/featnet/<key>/`` (default ``~/.cache/paddlecraft``); ``key`` hashes
the training images and labels, the architecture, the training settings and the seed,
so every run on the same data reuses the same network and the numbers are comparable.

Metrics (all functions take numpy arrays):

- :func:`fid`: Fréchet distance between Gaussians fitted to two feature sets
  (classifier-FID: the feature net's ``embedding`` output instead of Inception pool3).
- :func:`inception_score`: ``exp(E_x KL(p(y|x) || p(y)))`` with the feature net's
  softmax (classifier Inception Score; at most the number of classes).
- :func:`prdc`: precision, recall, density and coverage of Naeem et al. 2020
  ("Reliable Fidelity and Diversity Metrics for Generative Models"), k-NN balls, k = 5.
- :func:`class_histogram`, :func:`normalized_entropy`: how the feature net labels the
  generated samples, and the entropy of that histogram divided by ``log(num_classes)``
  (1 = all classes equally often, 0 = one class: mode collapse).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from scipy import linalg

from encoders.tensorio import CheckpointError, atomic_write_json, load_tensors, sha256_file

from .engine.rng import capture_rng, restore_rng

log = logging.getLogger("paddlecraft")

__all__ = [
    "FeatureNet",
    "cache_root",
    "class_histogram",
    "classes_generated",
    "fid",
    "frechet_distance",
    "inception_score",
    "load_feature_net",
    "normalized_entropy",
    "prdc",
]

FORMAT = "paddlecraft-featnet-1"


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


# ----------------------------------------------------------------------------- feature net
def cache_root() -> Path:
    """``$PADDLECRAFT_CACHE`` or ``~/.cache/paddlecraft``."""
    env = os.environ.get("PADDLECRAFT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "paddlecraft"


@dataclass
class FeatureNet:
    """A trained classifier used as a fixed feature extractor (never trained further)."""

    encoder: Any
    key: str
    path: Path
    test_accuracy: float
    num_classes: int

    @paddle.no_grad()
    def __call__(self, x: np.ndarray, batch_size: int = 1000) -> tuple[np.ndarray, np.ndarray]:
        """``(embedding [N, F] float64, class probabilities [N, K] float64)`` for images [N, C, H, W]."""
        self.encoder.eval()
        feats, probs = [], []
        for i in range(0, len(x), batch_size):
            out = self.encoder.forward_all(paddle.to_tensor(np.asarray(x[i : i + batch_size])))
            feats.append(out["embedding"].numpy())
            probs.append(F.softmax(out["prediction"], axis=-1).numpy())
        return np.concatenate(feats).astype(np.float64), np.concatenate(probs).astype(np.float64)


#: feature nets already loaded in this process, by key (one scope per key)
_LOADED: dict[str, FeatureNet] = {}


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def load_feature_net(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    num_classes: int,
    *,
    channels: tuple[int, ...] | list[int] = (32, 64),
    embedding_dim: int = 64,
    epochs: int = 15,
    lr: float = 1e-3,
    batch_size: int = 64,
    seed: int = 0,
    max_train: int | None = 20000,
) -> FeatureNet:
    """The cached feature net for this data and settings; trained and cached on first use.

    Training uses its own seeds and leaves the global random streams as they were.
    The cache folder holds ``weights.safetensors`` and ``meta.json`` (written last,
    atomically, with the weights' SHA-256), so a crash mid-write is simply retrained.
    """
    image_shape = tuple(int(s) for s in train_x.shape[1:])
    if len(image_shape) != 3:
        raise ValueError(f"feature net: images must be [N, C, H, W], got {train_x.shape}")
    arch = {
        "in_channels": image_shape[0],
        "image_size": list(image_shape[1:]),
        "channels": [int(c) for c in channels],
        "embedding_dim": int(embedding_dim),
        "num_classes": int(num_classes),
        "arch": "lenet",
    }
    settings = {
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "seed": seed,
        "max_train": max_train,
    }
    ident = {
        "format": FORMAT,
        "arch": arch,
        "train": settings,
        "data": _digest(train_x, train_y, test_x, test_y),
    }
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    if key in _LOADED:
        return _LOADED[key]
    from encoders import ImageCNNEncoder

    folder = cache_root() / "featnet" / key
    rng_state = capture_rng()
    try:
        paddle.seed(seed)
        enc = ImageCNNEncoder(f"featnet_{key}", **arch).build()
        meta = _read_cache(folder, enc)
        if meta is None:
            acc = _train(enc, train_x, train_y, test_x, test_y, settings)
            folder.mkdir(parents=True, exist_ok=True)
            digest = enc.save(folder / "weights.safetensors")
            meta = {**ident, "key": key, "test_accuracy": acc, "weights_sha256": digest}
            atomic_write_json(folder / "meta.json", meta)
            log.info("feature net trained (test accuracy %.3f) and cached in %s", acc, folder)
        else:
            log.info(
                "feature net loaded from %s (test accuracy %.3f)", folder, meta["test_accuracy"]
            )
    finally:
        restore_rng(rng_state)
    enc.eval()
    net = FeatureNet(enc, key, folder, float(meta["test_accuracy"]), int(num_classes))
    _LOADED[key] = net
    return net


def _read_cache(folder: Path, enc: Any) -> dict | None:
    meta_file, weights = folder / "meta.json", folder / "weights.safetensors"
    if not (meta_file.is_file() and weights.is_file()):
        return None
    try:
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT or sha256_file(weights) != meta.get("weights_sha256"):
            raise CheckpointError("checksum or format mismatch")
        arrays, _ = load_tensors(weights)
        from encoders.tensorio import assign_by_name

        assign_by_name(enc.parameters(), arrays, what=f"feature net {folder}")
    except (OSError, ValueError, CheckpointError) as e:
        log.warning("feature net cache %s is unusable (%s); retraining it", folder, e)
        return None
    return meta


def _train(
    enc: Any,
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    settings: dict,
) -> float:
    rng = np.random.default_rng(settings["seed"])
    if settings["max_train"] and len(train_x) > settings["max_train"]:
        keep = np.sort(rng.permutation(len(train_x))[: settings["max_train"]])
        train_x, train_y = train_x[keep], train_y[keep]
    opt = paddle.optimizer.Adam(learning_rate=settings["lr"], parameters=enc.parameters())
    bs = settings["batch_size"]
    enc.train()
    for _ in range(settings["epochs"]):
        order = rng.permutation(len(train_x))
        for i in range(0, len(order) - bs + 1, bs):
            idx = order[i : i + bs]
            logits = enc(paddle.to_tensor(train_x[idx]))
            loss = F.cross_entropy(logits, paddle.to_tensor(train_y[idx].astype(np.int64)))
            loss.backward()
            opt.step()
            opt.clear_grad(set_to_zero=False)
    enc.eval()
    with paddle.no_grad():
        pred = np.concatenate(
            [
                enc(paddle.to_tensor(test_x[i : i + 1000])).numpy().argmax(-1)
                for i in range(0, len(test_x), 1000)
            ]
        )
    return float((pred == test_y).mean()) if len(test_y) else float("nan")
