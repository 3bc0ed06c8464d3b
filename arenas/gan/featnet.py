"""The GAN metrics' feature net: a small classifier the toolkit trains itself, cached on disk.

Nothing is downloaded: instead of Inception weights, an `ImageCNNEncoder`
classifier is trained on the real training split the first time it is needed and cached
(safetensors) under ``$PADDLECRAFT_CACHE/featnet/<key>/`` (default ``~/.cache/paddlecraft``);
``key`` hashes the training images and labels, the architecture, the training settings
and the seed, so every run on the same data reuses the same network and the numbers are
comparable.

In memory, loaded nets live in a `FeatureNetCache` that its owner (the GAN arena)
forgets on ``close()``: no process-wide state. Every copy of a net has the scope
``featnet_<key>``; each is trained by its own optimizer (or not at all), so copies in one
process do not clash, and the file stores the same names.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle
import paddle.nn.functional as F

from paddlecraft.arenas.engine.rng import capture_rng, restore_rng
from paddlecraft.encoders.tensorio import (
    CheckpointError,
    assign_by_name,
    atomic_write_json,
    load_tensors,
    save_tensors,
    sha256_file,
)

log = logging.getLogger("paddlecraft")

__all__ = ["FeatureNet", "FeatureNetCache", "FeatureNetConfig", "cache_root", "load_feature_net"]

FORMAT = "paddlecraft-featnet-1"


@dataclass
class FeatureNetConfig:
    """The metrics' feature net (``arena.featnet``); cached on disk per settings and data."""

    channels: list[int] = field(default_factory=lambda: [32, 64])  #: conv blocks
    embedding_dim: int = 64  #: feature size used for FID / PRDC
    epochs: int = 15  #: training passes
    lr: float = 1e-3  #: Adam learning rate
    batch_size: int = 64  #: training minibatch
    seed: int = 0  #: its own seed (not the run's: runs with other seeds share it)
    max_train: Optional[int] = 20000  #: train on at most this many images  # noqa: UP045


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
            feats.append(out["pooled"].numpy())
            probs.append(F.softmax(out["prediction"], axis=-1).numpy())
        return np.concatenate(feats).astype(np.float64), np.concatenate(probs).astype(np.float64)


class FeatureNetCache:
    """Feature nets loaded by one owner, by key; `close` forgets them."""

    def __init__(self) -> None:
        self._nets: dict[str, FeatureNet] = {}

    def get(
        self,
        train_x: np.ndarray,
        train_y: np.ndarray,
        test_x: np.ndarray,
        test_y: np.ndarray,
        num_classes: int,
        settings: FeatureNetConfig | None = None,
    ) -> FeatureNet:
        """The feature net for this data and settings: from memory, the disk cache, or trained."""
        cfg = settings or FeatureNetConfig()
        ident = _identity(train_x, train_y, test_x, test_y, num_classes, cfg)
        key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
        if key not in self._nets:
            self._nets[key] = _load_or_train(key, ident, train_x, train_y, test_x, test_y, cfg)
        return self._nets[key]

    def close(self) -> None:
        """Forget every net (their memory goes with the last reference); safe to call twice."""
        self._nets.clear()


def load_feature_net(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    num_classes: int,
    **settings: Any,
) -> FeatureNet:
    """One feature net (``settings``: `FeatureNetConfig` fields), outside any cache object."""
    return FeatureNetCache().get(
        train_x, train_y, test_x, test_y, num_classes, FeatureNetConfig(**settings)
    )


# ----------------------------------------------------------------------------- internals
def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _identity(train_x, train_y, test_x, test_y, num_classes: int, cfg: FeatureNetConfig) -> dict:
    image_shape = tuple(int(s) for s in train_x.shape[1:])
    if len(image_shape) != 3:
        raise ValueError(f"feature net: images must be [N, C, H, W], got {train_x.shape}")
    arch = {
        "in_channels": image_shape[0],
        "image_size": list(image_shape[1:]),
        "channels": [int(c) for c in cfg.channels],
        "embedding_dim": int(cfg.embedding_dim),
        "num_classes": int(num_classes),
        "arch": "lenet",
    }
    train = {k: v for k, v in asdict(cfg).items() if k not in ("channels", "embedding_dim")}
    return {
        "format": FORMAT,
        "arch": arch,
        "train": train,
        "data": _digest(train_x, train_y, test_x, test_y),
    }


def _load_or_train(key, ident, train_x, train_y, test_x, test_y, cfg) -> FeatureNet:
    folder = cache_root() / "featnet" / key
    rng_state = capture_rng()
    try:
        paddle.seed(cfg.seed)
        from paddlecraft.encoders import ImageCNNEncoder

        # its own optimizer, so one scope per key serves every copy in the process
        enc = ImageCNNEncoder(f"featnet_{key}", **ident["arch"]).build()
        meta = _read_cache(folder, enc)
        if meta is None:
            acc = _train(enc, train_x, train_y, test_x, test_y, cfg)
            folder.mkdir(parents=True, exist_ok=True)
            tensors = {p.name: p for p in enc.parameters()}
            digest = save_tensors(folder / "weights.safetensors", tensors, {"format": FORMAT})
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
    return FeatureNet(enc, key, folder, float(meta["test_accuracy"]), ident["arch"]["num_classes"])


def _read_cache(folder: Path, enc: Any) -> dict | None:
    meta_file, weights = folder / "meta.json", folder / "weights.safetensors"
    if not (meta_file.is_file() and weights.is_file()):
        return None
    try:
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT or sha256_file(weights) != meta.get("weights_sha256"):
            raise CheckpointError("checksum or format mismatch")
        arrays, _ = load_tensors(weights)
        assign_by_name(enc.parameters(), arrays, what=f"feature net {folder}")
    except (OSError, ValueError, CheckpointError) as e:
        log.warning("feature net cache %s is unusable (%s); retraining it", folder, e)
        return None
    return meta


def _train(enc: Any, train_x, train_y, test_x, test_y, cfg: FeatureNetConfig) -> float:
    rng = np.random.default_rng(cfg.seed)
    if cfg.max_train and len(train_x) > cfg.max_train:
        keep = np.sort(rng.permutation(len(train_x))[: cfg.max_train])
        train_x, train_y = train_x[keep], train_y[keep]
    opt = paddle.optimizer.Adam(learning_rate=cfg.lr, parameters=enc.parameters())
    bs = cfg.batch_size
    enc.train()
    for _ in range(cfg.epochs):
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
