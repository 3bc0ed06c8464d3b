"""What the two CLIP towers share: the file namings they read, and scoring a pair of them.

Two namings of one CLIP checkpoint are read (``CLIPVisionEncoder`` and ``CLIPTextEncoder``
each take their half of the same file and skip the other half on purpose):

- ``hf_clip``: Hugging Face ``CLIPModel`` (``openai/clip-vit-base-patch32``): ``vision_model.*``,
  ``text_model.*``, ``visual_projection.weight``, ``text_projection.weight``, ``logit_scale``;
  ``CLIPVisionModelWithProjection`` / ``CLIPTextModelWithProjection`` files too.
- ``open_clip``: open_clip / OpenAI's original ``state_dict``: ``visual.*`` (``conv1``,
  ``class_embedding``, ``positional_embedding``, ``ln_pre``, ``transformer.resblocks.N``,
  ``ln_post``, ``proj``) and the text side at the top level (``token_embedding``,
  ``positional_embedding``, ``transformer.resblocks.N``, ``ln_final``, ``text_projection``,
  ``logit_scale``); fused ``attn.in_proj_weight`` is split into q/k/v here, and the
  ``[in, out]`` projections are turned to torch's ``[out, in]`` so the loader's transpose
  applies to them like to every Linear.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import paddle

from .pretrained import PretrainedLoadError

HF_CLIP, OPEN_CLIP = "hf_clip", "open_clip"
#: keys of OpenAI's original files that carry no weights (sizes, a causal-mask buffer)
OPEN_CLIP_EXTRA = ("input_resolution", "context_length", "vocab_size", "attn_mask")

#: Hugging Face block names -> `PreNormBlock`'s
_HF_BLOCK = [
    ("self_attn.", "self_attn."),
    ("layer_norm1.", "self_attn_layer_norm."),
    ("mlp.fc1.", "fc1."),
    ("mlp.fc2.", "fc2."),
    ("layer_norm2.", "final_layer_norm."),
]
#: open_clip block names (after the q/k/v split) -> `PreNormBlock`'s
_OPEN_BLOCK = [
    ("attn.q_proj.", "self_attn.q_proj."),
    ("attn.k_proj.", "self_attn.k_proj."),
    ("attn.v_proj.", "self_attn.v_proj."),
    ("attn.out_proj.", "self_attn.out_proj."),
    ("ln_1.", "self_attn_layer_norm."),
    ("mlp.c_fc.", "fc1."),
    ("mlp.c_proj.", "fc2."),
    ("ln_2.", "final_layer_norm."),
]


def detect_clip_source(who: str, keys: list[str]) -> str:
    """``hf_clip`` or ``open_clip`` from the key patterns; a one-line error for other models."""
    if any(k.startswith(("vision_model.", "text_model.")) for k in keys):
        return HF_CLIP
    if any(k.startswith(("visual.", "transformer.resblocks.", "ln_final.")) for k in keys):
        return OPEN_CLIP
    raise PretrainedLoadError(
        f"{who}: this file is not a CLIP model (keys {sorted(keys)[:3]} ...): expected Hugging "
        "Face CLIPModel keys (vision_model.*, text_model.*) or open_clip keys (visual.*, "
        "transformer.resblocks.*, ln_final.*); load other models into their own encoders"
    )


def block_key(rest: str, source: str) -> str | None:
    """Our `PreNormBlock` key for the part of a block key after ``layers.N.`` / ``resblocks.N.``."""
    for old, new in _HF_BLOCK if source == HF_CLIP else _OPEN_BLOCK:
        if rest.startswith(old):
            return new + rest[len(old) :]
    return None


def split_in_proj(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """open_clip's fused ``attn.in_proj_weight`` [3D, D] / ``in_proj_bias`` [3D] as q/k/v."""
    out: dict[str, np.ndarray] = {}
    for key, value in arrays.items():
        m = re.fullmatch(r"(.*\.attn\.)in_proj_(weight|bias)", key)
        if m is None:
            out[key] = value
            continue
        for part, chunk in zip("qkv", np.split(np.asarray(value), 3, axis=0)):
            out[f"{m.group(1)}{part}_proj.{m.group(2)}"] = chunk
    return out


def check_projection(who: str, key: str, value: np.ndarray, width: int, dim: int) -> None:
    """One-line error when the file's projection (torch layout [out, in]) is not width -> dim."""
    shape = tuple(np.shape(value))
    if shape != (dim, width):
        raise PretrainedLoadError(
            f"{who}: the file's {key} maps {shape[-1] if shape else '?'} -> "
            f"{shape[0] if shape else '?'} but the tower is built for width={width} -> "
            f"projection_dim={dim}; build it with the file's sizes (width, projection_dim)"
        )


def check_pair(image_dim: int, text_dim: int, what: str = "CLIP towers") -> None:
    """Raise ValueError when an image and a text tower do not embed into one space."""
    if image_dim != text_dim:
        raise ValueError(
            f"{what}: the image tower embeds into {image_dim} dimensions but the text tower "
            f"into {text_dim}; give both the same projection_dim"
        )


def clip_logits(
    image_embeds: paddle.Tensor, text_embeds: paddle.Tensor, logit_scale: paddle.Tensor
) -> paddle.Tensor:
    """``logits_per_image`` [N_img, N_txt]: cosine similarity times ``exp(logit_scale)``.

    ``image_embeds`` [N_img, P] and ``text_embeds`` [N_txt, P] are the towers' ``pooled``
    outputs (not normalised); ``logit_scale`` is the text tower's `CLIPTextEncoder.logit_scale`
    (a log scale, as CLIP stores it). ``logits_per_text`` is the transpose.
    """
    check_pair(int(image_embeds.shape[-1]), int(text_embeds.shape[-1]))
    img = paddle.nn.functional.normalize(image_embeds, axis=-1)  # [N_img, P]
    txt = paddle.nn.functional.normalize(text_embeds, axis=-1)  # [N_txt, P]
    return paddle.exp(logit_scale) * img @ txt.T  # [N_img, N_txt]
