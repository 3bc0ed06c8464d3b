"""Loaded CLIP towers across the arenas: one CLIP file in both towers of arena=contrastive
scores pairs as ``transformers.CLIPModel`` does (temperature from the file, CLIP's tokenizer
and its padding id), the clip_finetune preset end to end, the CLIP image tower as a frozen
member of a mixed referential population, and the one-line errors of the command line.

Every file is written here: a tiny random ``transformers.CLIPModel`` (tests/clip_kit.py), BPE
tokenizer files in OpenAI's layout, a few images with their captions.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers
from clip_kit import tiny_clip, write_bpe_files
from safetensors.numpy import load_file
from safetensors.torch import save_file

from paddlecraft.agents.text_agent import tokenizer_of
from paddlecraft.encoders import CLIPTokenizer
from paddlecraft.encoders.clip_vision import CLIP_MEAN, CLIP_STD
from tests.data_files import class_image, write_image

ROOT = Path(__file__).resolve().parents[1]
LOG_SCALE = 1.7  #: clip_kit.randomise's logit_scale (CLIP's init is log(1/0.07) = 2.66)
#: the Paddle towers' sizes of `tiny_clip` (projection 24), as encoder overrides
VISION = ("width=32", "depth=2", "heads=2", "mlp_dim=64", "projection_dim=24")
TEXT = ("width=32", "depth=2", "heads=2", "mlp_dim=64", "projection_dim=24", "max_len=16")
COLOURS = ("red", "green", "blue")


def _save(model: torch.nn.Module, path: Path) -> Path:
    save_file(
        {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}, str(path)
    )
    return path


def _tiny(agent: str, sizes: tuple[str, ...]) -> list[str]:
    return [f"agents.{agent}.encoder.{s}" for s in sizes]


@pytest.fixture(scope="module")
def clip_files(tmp_path_factory):
    """A tiny CLIP file (16x16 images, this tokenizer's vocabulary), its tokenizer files and
    24 captioned 16x16 images (captions.jsonl)."""
    root = tmp_path_factory.mktemp("clip_pairs")
    tok_dir = write_bpe_files(root / "tokenizer")
    tok = CLIPTokenizer.from_files(tok_dir)
    model = tiny_clip(vocab_size=len(tok), eos=tok.eos_id, bos=tok.bos_id)
    rows = []
    for i in range(24):
        name = f"img/{i:03d}.png"
        write_image(root / name, class_image(i % 3, i, (16, 16)))
        rows.append(json.dumps({"image": name, "caption": f"a photo of a {COLOURS[i % 3]} square"}))
    (root / "captions.jsonl").write_text("\n".join(rows) + "\n")
    return SimpleNamespace(
        tok=tok, tok_dir=tok_dir, model=model, weights=_save(model, root / "clip.safetensors"),
        captions=root / "captions.jsonl",
    )  # fmt: skip


# ----------------------------------------------------------------------------- 1. equivalence
def test_one_clip_file_in_both_towers_scores_pairs_as_transformers(clip_files, compose_config):
    from paddlecraft.arenas.engine.app import build_agents, build_arena

    f = clip_files
    cfg = compose_config(
        "arena=contrastive", "data=captions", f"data.path={f.captions}", "data.image_size=16",
        "encoder@agents.image.encoder=clip_vit_tiny", "encoder@agents.text.encoder=clip_text_tiny",
        f"agents.image.encoder.pretrained={f.weights}", f"agents.text.encoder.pretrained={f.weights}",
        "agents.image.encoder.patch_size=4", *_tiny("image", VISION), *_tiny("text", TEXT),
        "agents.image.embed_dim=null", "agents.text.embed_dim=null",
        "agents.image.temperature=from_text", f"agents.text.words={f.tok_dir}", "arena.batch_size=6",
    )  # fmt: skip
    agents = build_agents(cfg)
    arena = build_arena(cfg, agents)
    text = agents["text"]
    # the file's temperature (carried by the text tower) is the arena's starting scale
    assert float(arena.image.logit_scale()) == pytest.approx(math.exp(LOG_SCALE), rel=1e-6)
    # CLIP pads with <|endoftext|>, not 0: the text encoder reads the tokenizer's ids
    assert (text.encoder.pad_id, text.encoder.eos_id) == (f.tok.pad_id, f.tok.eos_id)
    assert f.tok.pad_id == f.tok.eos_id == len(f.tok) - 1
    images = arena.world.test_images[:3]  # float [3, 3, 16, 16] in [0, 1]
    captions = ["a photo of a red square", "a blue square on the left", "two green triangles"]
    hf_tok = transformers.CLIPTokenizer.from_pretrained(str(f.tok_dir))
    ref = hf_tok(
        captions, padding="max_length", truncation=True, max_length=16, return_tensors="np"
    )
    assert np.array_equal(text.tokens(captions), ref["input_ids"])
    mean, std = (np.asarray(v, np.float32).reshape(1, 3, 1, 1) for v in (CLIP_MEAN, CLIP_STD))
    with torch.no_grad():
        want = f.model(
            pixel_values=torch.from_numpy((images - mean) / std),
            input_ids=torch.from_numpy(ref["input_ids"]),
            attention_mask=torch.from_numpy(ref["attention_mask"]),
        ).logits_per_image.numpy()
    got = arena.logits(images, captions)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    # the agent's record keeps the CLIP tokenizer (its padding and context length) whole
    again = tokenizer_of(text.config["words"], "agents.text.words", any_pad=True)
    assert isinstance(again, CLIPTokenizer) and again.pad_id == f.tok.pad_id
    assert np.array_equal(again.encode_batch(captions, max_len=16)[0], ref["input_ids"])


# ----------------------------------------------------------------------------- 2. fine-tuning
def _run(run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "arena=contrastive", "trainer.progress=false",
         f"hydra.run.dir={run_dir}", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_clip_finetune_preset_trains_a_loaded_dual_encoder_end_to_end(clip_files, tmp_path):
    f = clip_files
    tiny = [  # the preset's b32 towers cut to the tiny file's sizes
        "data.image_size=16", "agents.image.encoder.image_size=16",
        "agents.image.encoder.patch_size=4", *_tiny("image", VISION), *_tiny("text", TEXT),
        f"agents.text.encoder.vocab_size={len(f.tok)}",
    ]  # fmt: skip
    r = _run(
        tmp_path, "data=captions", f"data.path={f.captions}", "+experiment=clip_finetune",
        f"agents.image.encoder.pretrained={f.weights}", f"agents.text.words={f.tok_dir}",
        *tiny, "arena.batch_size=6", "arena.epochs=2",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    m = res["metrics"]
    assert res["status"] == "finished" and res["headline"] == "i2t_recall@1"
    for k in ("i2t_recall@1", "i2t_recall@5", "t2i_recall@1", "t2i_recall@5"):
        assert 0.0 <= m[k] <= 1.0, k
    assert m["eval_captions"] == 3  # the test images' distinct captions
    # the run started at the file's temperature and moved it at the preset's low lr
    assert m["logit_scale"] == pytest.approx(math.exp(LOG_SCALE), rel=1e-2)
    assert m["logit_scale"] != pytest.approx(math.exp(LOG_SCALE), rel=1e-9, abs=0)
    # both towers trained: their weights left the file's (matched by shape: patch, tokens)
    newest = sorted((tmp_path / "checkpoints").glob("step_*"))[-1]
    after = {k: v for a in ("image", "text") for k, v in
             load_file(newest / "agents" / a / "weights.safetensors").items()}  # fmt: skip
    sd = f.model.state_dict()
    for key in ("vision_model.embeddings.patch_embedding.weight",
                "text_model.embeddings.token_embedding.weight"):  # fmt: skip
        before = sd[key].numpy()
        same_shape = [v for v in after.values() if v.shape == before.shape]
        assert len(same_shape) == 1, key
        assert not np.array_equal(same_shape[0], before) and np.allclose(
            same_shape[0], before, atol=1e-2
        ), key


# ----------------------------------------------------------------------------- 3. populations
def test_a_frozen_clip_image_tower_in_a_mixed_referential_population(compose_config, tmp_path):
    """The CLIP image tower (clip_vit_tiny at the shapes' 32x32, loaded from a CLIPModel file,
    frozen) as the second speaker/listener pair beside the default CNN pair."""
    from paddlecraft.arenas.engine.app import build_agents, build_arena

    model = tiny_clip(image_size=32, patch_size=8)
    path = _save(model, tmp_path / "clip32.safetensors")
    members = ("speaker_1", "listener_1")
    clip = [f"encoder@agents.{a}.encoder=clip_vit_tiny" for a in members]
    for a in members:
        clip += [f"agents.{a}.encoder.pretrained={path}", f"agents.{a}.frozen_encoder=true",
                 f"agents.{a}.encoder.patch_size=8", *_tiny(a, VISION)]  # fmt: skip
    cfg = compose_config(
        "arena=referential_shapes", "+experiment=referential_mixed", *clip,
        "data.loader.n_train=64", "data.loader.n_test=32", "arena.eval_size=32",
        "arena.analysis_size=16", "arena.epochs=1", "arena.steps_per_epoch=4",
        "arena.batch_size=4", "arena.train_candidates=4",
    )  # fmt: skip
    agents = build_agents(cfg)
    arena = build_arena(cfg, agents)
    families = {type(a.view.encoder).__name__ for a in arena.speakers + arena.listeners}
    assert families == {"ImageCNNEncoder", "CLIPVisionEncoder"}
    want = model.state_dict()["vision_model.embeddings.patch_embedding.weight"].numpy()
    encs = [agents[a].view.encoder for a in members]
    before = [{p.name: p.numpy().copy() for p in e.parameters()} for e in encs]
    for b in before:  # the file's weights
        assert any(v.shape == want.shape and np.array_equal(v, want) for v in b.values())
    for batch in arena.batches(0):
        arena.train_step(batch)
    for e, b in zip(encs, before):  # frozen: bit-equal after training
        assert all(p.numpy().tobytes() == b[p.name].tobytes() for p in e.parameters())
    cnn = agents["speaker"].view.encoder.parameters()[0]
    assert not cnn.stop_gradient  # the CNN member trains
    m = arena.evaluate()
    assert {f"crossplay_{i}_{j}" for i in (0, 1) for j in (0, 1)} <= m.keys()
    assert all(0.0 <= m[f"crossplay_{i}_{j}"] <= 1.0 for i in (0, 1) for j in (0, 1))


# ----------------------------------------------------------------------------- 4. errors
@pytest.mark.parametrize(
    "extra, says",
    [
        (  # the towers' own projections disagree and no shared projection is asked for
            ["encoder@agents.image.encoder=clip_vit_tiny", "encoder@agents.text.encoder=clip_text_tiny",
             "agents.text.encoder.projection_dim=32", "agents.image.embed_dim=null",
             "agents.text.embed_dim=null"],
            "agents.image embeds to 64 and agents.text to 32",
        ),
        (  # a CLIP text tower in the image slot
            ["encoder@agents.image.encoder=clip_text_tiny"],
            "agents.image.encoder: CLIPTextEncoder reads text",
        ),
        (  # the preset without its weights file
            ["data=captions", "data.path=CAPTIONS", "+experiment=clip_finetune"],
            "agents.image.encoder.pretrained is required",
        ),
        (  # a temperature from a text tower that has none
            ["agents.image.temperature=from_text"],
            "agents.image.temperature=from_text but agents.text.encoder (TextEncoder) holds no",
        ),
    ],
)  # fmt: skip
def test_one_line_errors_before_the_run_folder(clip_files, tmp_path, extra, says):
    run_dir = tmp_path / "run"
    r = _run(run_dir, *[x.replace("CAPTIONS", str(clip_files.captions)) for x in extra])
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr and not run_dir.exists()
