"""Print how far the CLIP towers and tokenizer are from transformers' CLIPModel / CLIPTokenizer.

    python scripts/clip_equivalence.py

Writes a tiny randomly initialised ``transformers.CLIPModel`` (test extras: torch,
transformers) and CLIP BPE files into a temporary folder (nothing is downloaded), loads the
file in Hugging Face and in open_clip naming into `CLIPVisionEncoder` / `CLIPTextEncoder`,
and prints JSON: the max absolute difference of the image embeddings, the text embeddings and
``logits_per_image`` (float32, eval mode) per naming, and how many of the tokenizer test
strings give ids identical to ``transformers.CLIPTokenizer``'s. The tests bound the same
figures (tests/test_pretrained_clip.py, tests/test_clip_tokenizer.py).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny-file writers the tests use

TEXTS = [
    "A photo of a RED circle!", "  two\tgreen\n\ntriangles  ", "the cat's hat isn't HERE",
    "Café naïve 12345 3.14", "<|endoftext|> in the middle", "emoji 🙂 and ünïcödé ß", "",
    "Don't SHOUT... ok?!", "circle " * 100,
]  # fmt: skip


def main() -> None:
    import torch
    import transformers
    from clip_kit import TEXT, VISION, state_arrays, tiny_clip, to_open_clip, write_bpe_files
    from safetensors.numpy import save_file

    from paddlecraft.encoders import CLIPTextEncoder, CLIPTokenizer, CLIPVisionEncoder
    from paddlecraft.encoders.clip_keys import clip_logits

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_bpe_files(Path(tmp) / "tokenizer")
        tok = CLIPTokenizer.from_files(folder, context_length=16)
        hf_tok = transformers.CLIPTokenizer.from_pretrained(str(folder))
        want = hf_tok(TEXTS, padding="max_length", truncation=True, max_length=77)["input_ids"]
        mine = CLIPTokenizer.from_files(folder).encode_batch(TEXTS)[0]
        same = int(sum(list(row) == w for row, w in zip(mine.tolist(), want)))

        model = tiny_clip(vocab_size=len(tok), eos=tok.eos_id, bos=tok.bos_id)
        arrays = state_arrays(model)
        files = {"hf_clip": Path(tmp) / "hf.safetensors", "open_clip": Path(tmp) / "oc.safetensors"}
        save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(files["hf_clip"]))
        oc = {k: np.ascontiguousarray(v) for k, v in to_open_clip(arrays).items()}
        save_file(oc, str(files["open_clip"]))

        images = np.random.default_rng(0).normal(size=(4, 3, 16, 16)).astype(np.float32)
        ids, mask = tok.encode_batch(["a photo of a red circle", "two green triangles", ""])
        with torch.no_grad():
            t_img, t_ids = torch.from_numpy(images), torch.from_numpy(ids)
            ref = model(pixel_values=t_img, input_ids=t_ids, attention_mask=torch.from_numpy(mask))
            ref_img = model.get_image_features(pixel_values=t_img)
            ref_txt = model.get_text_features(input_ids=t_ids)
        ref_img, ref_txt = (getattr(e, "pooler_output", e).numpy() for e in (ref_img, ref_txt))
        out = {"tokenizer_identical_rows": f"{same} of {len(TEXTS)}"}
        for naming, path in files.items():
            image = CLIPVisionEncoder(f"image_{naming}", **VISION, projection_dim=24)
            text = CLIPTextEncoder(f"text_{naming}", **TEXT, vocab_size=len(tok), projection_dim=24)
            ok = image.load_pretrained(path).ok and text.load_pretrained(path).ok
            image.eval(), text.eval()
            img, txt = image(images), text(ids)
            logits = clip_logits(img, txt, text.logit_scale).numpy()
            out[naming] = {
                "report_ok": ok,
                "image_embeds_max_abs_diff": float(np.abs(img.numpy() - ref_img).max()),
                "text_embeds_max_abs_diff": float(np.abs(txt.numpy() - ref_txt).max()),
                "logits_per_image_max_abs_diff": float(
                    np.abs(logits - ref.logits_per_image.numpy()).max()
                ),
            }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
