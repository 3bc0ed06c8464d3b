"""The symmetric contrastive (InfoNCE) loss of a dual encoder over in-batch negatives."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F

__all__ = ["contrastive_loss", "positives_mask"]

MASKED = 1e4  #: subtracted from the logit of an in-batch pair that is not a negative


def positives_mask(texts: list[str], images: np.ndarray | None = None) -> np.ndarray:
    """bool [B, B]: off-diagonal pairs that are NOT negatives (the same caption text, case
    and spacing ignored, or the same image index in ``images`` int64 [B])."""
    keys = np.array([" ".join(t.lower().split()) for t in texts])
    same = keys[:, None] == keys[None, :]
    if images is not None:
        img = np.asarray(images)
        same |= img[:, None] == img[None, :]
    return same & ~np.eye(len(keys), dtype=bool)


def contrastive_loss(
    image_emb: paddle.Tensor,
    text_emb: paddle.Tensor,
    logit_scale: paddle.Tensor,
    not_negative: np.ndarray | None = None,
) -> paddle.Tensor:
    """CLIP's loss: mean of image->text and text->image cross-entropy over the batch.

    ``image_emb`` [B, D] and ``text_emb`` [B, D] (un-normalised; pair i matches), the scale
    exp(logit_scale) [1]; ``not_negative`` bool [B, B] (`positives_mask`) removes pairs that
    also match from the softmax. Logits: scale * cos(image_i, text_j).
    """
    i = F.normalize(image_emb, axis=-1)
    t = F.normalize(text_emb, axis=-1)
    logits = logit_scale * paddle.matmul(i, t, transpose_y=True)  # [B, B]: image x text
    if not_negative is not None and not_negative.any():
        mask = paddle.to_tensor(not_negative.astype(np.float32) * MASKED, place=logits.place)
        logits = logits - mask
    target = paddle.arange(logits.shape[0], dtype="int64")
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
