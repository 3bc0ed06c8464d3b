"""Tiny CLIP files for the tests, written here (nothing is downloaded): BPE tokenizer files in
OpenAI's layout and a randomly initialised ``transformers.CLIPModel``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

from paddlecraft.encoders.clip_tokenizer import CLIP_SPLIT, EOT, SOT

CORPUS = [
    "a photo of a red circle", "a blue square on the left", "two green triangles above",
    "the cat's hat isn't here", "numbers 12345 and 3.14", "we'll see what they've done",
]  # fmt: skip


def write_bpe_files(folder: Path, corpus: list[str] = CORPUS) -> Path:
    """``vocab.json`` + ``merges.txt`` in OpenAI's layout: the 256 byte symbols, the same with
    ``</w>``, one piece per merge rule (learnt by tokenizers' BPE trainer on ``corpus``), then
    ``<|startoftext|>`` and ``<|endoftext|>`` last."""
    tok = Tokenizer(models.BPE(end_of_word_suffix="</w>", continuing_subword_prefix=""))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CLIP_SPLIT), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        end_of_word_suffix="</w>", show_progress=False,
    )  # fmt: skip
    tok.train_from_iterator(corpus * 10, trainer)
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [tuple(m.split()) if isinstance(m, str) else tuple(m) for m in merges]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    pieces = alphabet + [c + "</w>" for c in alphabet] + ["".join(m) for m in merges]
    pieces = list(dict.fromkeys(pieces)) + [SOT, EOT]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    lines = ["#version: 0.2"] + [f"{a} {b}" for a, b in merges]
    (folder / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def randomise(model: torch.nn.Module, seed: int = 0) -> None:
    """LayerNorms away from 1/0 and a logit_scale away from its init, so a miss shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
        model.logit_scale.fill_(1.7)


def tiny_clip(
    vocab_size: int = 100, eos: int = 99, bos: int = 98, projection_dim: int = 24,
    image_size: int = 16, patch_size: int = 4,
):  # fmt: skip
    """An eval-mode CLIPModel: 16x16 images in 4-pixel patches (or ``image_size`` /
    ``patch_size``), 16 tokens, both towers 32 wide, 2 blocks, 2 heads, MLP 64; ``eos`` is its
    end token (the highest id, as in CLIP)."""
    torch.manual_seed(0)
    vision = transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        image_size=image_size, patch_size=patch_size,
    )  # fmt: skip
    text = transformers.CLIPTextConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, max_position_embeddings=16, bos_token_id=bos, eos_token_id=eos,
        pad_token_id=0,
    )  # fmt: skip
    cfg = transformers.CLIPConfig(
        text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=projection_dim
    )
    model = transformers.CLIPModel(cfg).eval()
    randomise(model)
    return model


#: the Paddle towers' settings for `tiny_clip` (``vocab_size`` for the text tower apart)
VISION = dict(image_size=16, patch_size=4, width=32, depth=2, heads=2, mlp_dim=64)
TEXT = dict(width=32, depth=2, heads=2, mlp_dim=64, max_len=16)


def state_arrays(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """A torch model's state dict as numpy arrays (copies)."""
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def to_open_clip(sd: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A Hugging Face CLIPModel state dict in open_clip's names (what open_clip saves)."""
    out: dict[str, np.ndarray] = {}
    block = {
        "layer_norm1": "ln_1", "layer_norm2": "ln_2", "mlp.fc1": "mlp.c_fc",
        "mlp.fc2": "mlp.c_proj", "self_attn.out_proj": "attn.out_proj",
    }  # fmt: skip
    for side, prefix in (("vision_model", "visual."), ("text_model", "")):
        layers = sorted({int(k.split(".")[3]) for k in sd if k.startswith(f"{side}.encoder.")})
        for i in layers:
            src, dst = f"{side}.encoder.layers.{i}.", f"{prefix}transformer.resblocks.{i}."
            for kind in ("weight", "bias"):
                qkv = [sd[f"{src}self_attn.{p}_proj.{kind}"] for p in "qkv"]
                out[f"{dst}attn.in_proj_{kind}"] = np.concatenate(qkv, axis=0)
                for old, new in block.items():
                    out[f"{dst}{new}.{kind}"] = sd[f"{src}{old}.{kind}"]
    v = "vision_model."
    out["visual.conv1.weight"] = sd[f"{v}embeddings.patch_embedding.weight"]
    out["visual.class_embedding"] = sd[f"{v}embeddings.class_embedding"]
    out["visual.positional_embedding"] = sd[f"{v}embeddings.position_embedding.weight"]
    for kind in ("weight", "bias"):
        out[f"visual.ln_pre.{kind}"] = sd[f"{v}pre_layrnorm.{kind}"]
        out[f"visual.ln_post.{kind}"] = sd[f"{v}post_layernorm.{kind}"]
        out[f"ln_final.{kind}"] = sd[f"text_model.final_layer_norm.{kind}"]
    out["visual.proj"] = sd["visual_projection.weight"].T  # open_clip: x @ proj, [in, out]
    out["token_embedding.weight"] = sd["text_model.embeddings.token_embedding.weight"]
    out["positional_embedding"] = sd["text_model.embeddings.position_embedding.weight"]
    out["text_projection"] = sd["text_projection.weight"].T
    out["logit_scale"] = sd["logit_scale"]
    return out
