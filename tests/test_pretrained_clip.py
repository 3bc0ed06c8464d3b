"""CLIPVisionEncoder / CLIPTextEncoder load Hugging Face CLIPModel and open_clip files and match.

The reference is a tiny, randomly initialised ``transformers.CLIPModel`` built here (nothing
is downloaded), saved as safetensors; the open_clip file is the same tensors renamed by hand
into open_clip's keys (fused ``in_proj``, ``[in, out]`` projections), so open_clip itself is
not needed. Image embeddings, text embeddings and ``logits_per_image`` agree to 1e-5 in
float32 in eval mode.
"""

from __future__ import annotations

import numpy as np
import paddle
import pytest
import torch
import transformers
from clip_kit import TEXT as KIT_TEXT
from clip_kit import VISION, state_arrays, tiny_clip, to_open_clip
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file

from paddlecraft.agents import ConfigError, Listener
from paddlecraft.encoders import CLIPTextEncoder, CLIPVisionEncoder, PretrainedLoadError
from paddlecraft.encoders.clip_keys import check_pair, clip_logits

ATOL = 1e-5
TEXT = dict(KIT_TEXT, vocab_size=100)
PROJ = 24
EOS = 99  # the highest id, as CLIP's <|endoftext|>


@pytest.fixture(scope="module")
def hf_clip(tmp_path_factory):
    """A tiny CLIPModel (eos_token_id = 99, the highest id): (model, hf file, open_clip file)."""
    model = tiny_clip(vocab_size=100, eos=EOS, bos=98, projection_dim=PROJ)
    folder = tmp_path_factory.mktemp("clip")
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, str(folder / "hf.safetensors"))
    oc = {k: np.ascontiguousarray(v) for k, v in to_open_clip(state_arrays(model)).items()}
    save_numpy(oc, str(folder / "open_clip.safetensors"))  # (a transposed view needs a copy)
    return model, folder / "hf.safetensors", folder / "open_clip.safetensors"


def _inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images [3, 3, 16, 16] and token ids [4, 9]: start 98, words, <eos> 99, 0-padding."""
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(3, 3, 16, 16)).astype(np.float32)
    ids = np.zeros((4, 9), np.int64)
    for row, n in enumerate((7, 3, 5, 1)):
        ids[row, 0] = 98
        ids[row, 1 : 1 + n] = rng.integers(1, 98, n)
        ids[row, 1 + n] = EOS
    return images, ids


def _towers(scope, make_scope, path, **text_kw):
    image = CLIPVisionEncoder(scope, **VISION, projection_dim=PROJ)
    text = CLIPTextEncoder(make_scope(), **TEXT, projection_dim=PROJ, **text_kw)
    reports = image.load_pretrained(path), text.load_pretrained(path)
    image.eval(), text.eval()
    return image, text, reports


def _reference(model, images, ids):
    with torch.no_grad():
        t_img, t_ids = torch.from_numpy(images), torch.from_numpy(ids)
        out = model(pixel_values=t_img, input_ids=t_ids, attention_mask=t_ids != 0)
        vis = model.vision_model(pixel_values=t_img)
        img = model.get_image_features(pixel_values=t_img)  # projected, not normalised
        txt = model.get_text_features(input_ids=t_ids, attention_mask=t_ids != 0)
    img, txt = (getattr(e, "pooler_output", e) for e in (img, txt))  # transformers 5 / 4
    return out, vis, img.numpy(), txt.numpy()


@pytest.mark.parametrize("naming", ["hf", "open_clip"])
@pytest.mark.parametrize("pool", ["argmax", "eos"])
def test_towers_match_transformers_clip(scope, make_scope, hf_clip, naming, pool):
    model, hf_path, oc_path = hf_clip
    path = hf_path if naming == "hf" else oc_path
    image, text, (ri, rt) = _towers(scope, make_scope, path, pool=pool, eos_id=EOS)
    assert (
        ri.ok and rt.ok and ri.source == rt.source == ("hf_clip" if naming == "hf" else "open_clip")
    )
    assert len(ri.matched) == 5 + 2 * 16 + 2 + 1 and len(rt.matched) == 2 + 2 * 16 + 2 + 1 + 1
    images, ids = _inputs()
    ref, vis, ref_img, ref_txt = _reference(model, images, ids)
    img_out, txt_out = image.forward_all(images), text.forward_all(ids)
    assert img_out["pooled"].shape == [3, PROJ] and txt_out["pooled"].shape == [4, PROJ]
    np.testing.assert_allclose(img_out["pooled"].numpy(), ref_img, atol=ATOL, rtol=0)
    np.testing.assert_allclose(txt_out["pooled"].numpy(), ref_txt, atol=ATOL, rtol=0)
    unit = paddle.nn.functional.normalize  # CLIPOutput's embeds are the normalised ones
    np.testing.assert_allclose(unit(img_out["pooled"]).numpy(), ref.image_embeds, atol=ATOL, rtol=0)
    np.testing.assert_allclose(unit(txt_out["pooled"]).numpy(), ref.text_embeds, atol=ATOL, rtol=0)
    logits = clip_logits(img_out["pooled"], txt_out["pooled"], text.logit_scale)
    np.testing.assert_allclose(logits.numpy(), ref.logits_per_image.numpy(), atol=ATOL, rtol=0)
    assert float(text.logit_scale) == pytest.approx(1.7)
    # hidden: every token through the final norm and the projection, pooled among them
    with torch.no_grad():
        tokens = model.visual_projection(model.vision_model.post_layernorm(vis.last_hidden_state))
    np.testing.assert_allclose(img_out["hidden"].numpy(), tokens.numpy(), atol=ATOL, rtol=0)
    last = (ids != 0).sum(1) - 1
    np.testing.assert_allclose(
        txt_out["hidden"].numpy()[np.arange(4), last], txt_out["pooled"].numpy(), atol=0, rtol=0
    )


def test_eos_pool_reads_the_first_eos_and_falls_back_to_the_last_real_token(scope):
    text = CLIPTextEncoder(scope, **TEXT, projection_dim=PROJ, pool="eos", eos_id=2, pad_id=0)
    ids = np.array([[5, 7, 2, 9, 0], [5, 7, 8, 0, 0], [2, 0, 0, 0, 0]], np.int64)
    np.testing.assert_array_equal(text.end_positions(paddle.to_tensor(ids)).numpy(), [2, 2, 0])
    argmax = CLIPTextEncoder(f"{scope}_a", **TEXT, projection_dim=PROJ)
    np.testing.assert_array_equal(argmax.end_positions(paddle.to_tensor(ids)).numpy(), [3, 2, 0])


def test_names_api_freeze_and_logit_scale_is_a_logical_layer(scope, make_scope, hf_clip):
    _, path, _ = hf_clip
    image, text, _ = _towers(scope, make_scope, path)
    assert image.logical_names == [
        "embeddings", "pre_layernorm", "layers.0", "layers.1", "post_layernorm",
        "visual_projection",
    ]  # fmt: skip
    assert text.logical_names[-2:] == ["text_projection", "logit_scale"]
    assert image.feature_dim == text.feature_dim == PROJ
    (p,) = text.get_param("logit_scale")["logit_scale"]
    assert p is text.logit_scale and p.name == f"{text.scope}.logit_scale.w_0" and p.shape == []
    assert all(p.name.startswith(f"{scope}.") for p in image.parameters())
    image.freeze("embeddings")
    text.freeze("logit_scale")
    images, ids = _inputs()
    logits = clip_logits(image(images), text(ids), text.logit_scale)
    paddle.nn.functional.cross_entropy(logits, paddle.arange(3)).backward()
    assert all(q.grad is None for q in image.get_param("embeddings")["embeddings"])
    assert text.logit_scale.grad is None
    assert all(g is not None for g in image.get_gradient("layers.1")["layers.1"])
    text.unfreeze("logit_scale")
    clip_logits(image(images), text(ids), text.logit_scale).sum().backward()
    assert text.logit_scale.grad is not None and float(text.logit_scale.grad.abs()) > 0
    assert "logit_scale" in str(text.summary())


def test_one_line_errors(scope, make_scope, hf_clip, tmp_path):
    _, path, _ = hf_clip
    # a weights file of another model (BERT) into a CLIP tower
    bert = transformers.BertModel(transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        vocab_size=100, max_position_embeddings=16,
    ))  # fmt: skip
    save_file(
        {k: v.contiguous() for k, v in bert.state_dict().items()}, str(tmp_path / "b.safetensors")
    )
    for tower in (CLIPTextEncoder(scope, **TEXT, projection_dim=PROJ),
                  CLIPVisionEncoder(make_scope(), **VISION, projection_dim=PROJ)):  # fmt: skip
        with pytest.raises(PretrainedLoadError, match="not a CLIP model") as e:
            tower.load_pretrained(tmp_path / "b.safetensors")
        assert "\n" not in str(e.value)
    # mismatched projection sizes
    with pytest.raises(PretrainedLoadError, match=r"maps 32 -> 24 .*projection_dim=16") as e:
        CLIPTextEncoder(make_scope(), **TEXT, projection_dim=16).load_pretrained(path)
    assert "\n" not in str(e.value)
    with pytest.raises(PretrainedLoadError, match=r"projection_dim=16"):
        CLIPVisionEncoder(make_scope(), **VISION, projection_dim=16).load_pretrained(path)
    with pytest.raises(ValueError, match="embeds into 24 dimensions but the text tower into 16"):
        check_pair(24, 16)
    # an open_clip ResNet file (RN50) into the ViT tower
    save_numpy({"visual.layer1.0.conv1.weight": np.zeros((4, 4, 1, 1), np.float32),
                "transformer.resblocks.0.ln_1.weight": np.ones(4, np.float32)},
               str(tmp_path / "rn.safetensors"))  # fmt: skip
    with pytest.raises(PretrainedLoadError, match="CLIP's ResNet .*not a ViT"):
        CLIPVisionEncoder(make_scope(), **VISION, projection_dim=PROJ).load_pretrained(
            tmp_path / "rn.safetensors"
        )
    # one tower's file into the other tower
    sd = {k: v for k, v in state_arrays(hf_clip[0]).items() if k.startswith("vision_model.")}
    save_numpy(sd, str(tmp_path / "vision_only.safetensors"))
    with pytest.raises(PretrainedLoadError, match="holds no text tower.*CLIPVisionEncoder"):
        CLIPTextEncoder(make_scope(), **TEXT, projection_dim=PROJ).load_pretrained(
            tmp_path / "vision_only.safetensors"
        )
    # a text tower in an image slot
    text_cfg = {"_target_": "paddlecraft.encoders.CLIPTextEncoder", "size": "tiny"}
    image_cfg = {"_target_": "paddlecraft.encoders.CLIPVisionEncoder", "size": "tiny"}
    with pytest.raises(
        ConfigError,
        match=r"agents\.\w+\.encoder: CLIPTextEncoder reads text \(token ids\), but this agent feeds it images",
    ):
        Listener(make_scope(), text_encoder=text_cfg, encoder=text_cfg, image_shape=[3, 16, 16])
    lis = Listener(make_scope(), text_encoder=text_cfg, encoder=image_cfg, image_shape=[3, 16, 16])
    assert lis.embed_texts(["red circle"]).shape == [1, lis.cfg.dim]


@pytest.mark.parametrize("tower", ["image", pytest.param("text", marks=pytest.mark.slow)])
def test_loaded_tower_exports_to_paddle_inference_and_onnx(scope, hf_clip, tmp_path, tower):
    """agents/export.py's path: paddle.inference and onnxruntime give the eager outputs."""
    from paddlecraft.agents.export import export_layer

    _, path, _ = hf_clip
    if tower == "image":
        enc = CLIPVisionEncoder(
            scope, **VISION, projection_dim=PROJ, normalize=True, pretrained=str(path)
        )
    else:  # probe ids are 0/1: id 1 is the end token, rows without it read the last token
        enc = CLIPTextEncoder(
            scope, **TEXT, projection_dim=PROJ, pool="eos", eos_id=1, pretrained=str(path)
        )
    enc.build()
    record = export_layer(enc, tmp_path, onnx=True)
    assert record["outputs"] == ["pooled", "hidden"]
    assert record["checks"]["paddle_inference_max_abs_diff"] <= ATOL
    assert record["checks"]["onnxruntime_max_abs_diff"] <= ATOL
    assert (tmp_path / "model.onnx").is_file()


def test_towers_plug_into_an_agent_by_the_one_override_form(compose_config):
    """The caption arena's listener with both CLIP towers; the text tower in its image slot
    stops with one line naming the setting."""
    from paddlecraft.arenas.engine.app import build_agents, user_error

    both = (
        "encoder@agents.listener.encoder=clip_vit_tiny",
        "encoder@agents.listener.text_encoder=clip_text_tiny",
    )
    agents = build_agents(compose_config("arena=caption", *both))
    lis = agents["listener"]
    assert type(lis.image_encoder).__name__ == "CLIPVisionEncoder"
    assert type(lis.text_encoder).__name__ == "CLIPTextEncoder"
    assert lis.text_encoder.vocab_size == len(lis.vocab)  # filled in from the agent's words
    images = np.zeros((2, 64, 64, 3), np.uint8)
    assert lis.embed_images(images).shape == [2, lis.cfg.dim]
    assert lis.embed_texts(["red circle above blue square"]).shape == [1, lis.cfg.dim]
    wrong = compose_config("arena=caption", "encoder@agents.listener.encoder=clip_text_tiny")
    with pytest.raises(Exception) as e:
        build_agents(wrong)
    cause = user_error(e.value)  # what run.py prints as its one error line
    assert isinstance(cause, ConfigError) and "\n" not in str(cause)
    assert str(cause).startswith("agents.listener.encoder: CLIPTextEncoder reads text")


def test_towers_build_seed_style_in_static_mode(scope, make_scope):
    """``paddle.enable_static()`` + ``build()``: feeds ``<scope>.input`` / ``<scope>.tokens``."""
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        image = CLIPVisionEncoder(scope, size="tiny", image_size=16, normalize=True).build()
        text = CLIPTextEncoder(make_scope(), size="tiny", vocab_size=20, pool="eos", eos_id=2)
        text.build()
    exe = paddle.static.Executor()
    exe.run(startup)
    feed = {
        f"{image.scope}.input": np.zeros((2, 3, 16, 16), np.float32),
        f"{text.scope}.tokens": np.array([[4, 5, 2, 0], [3, 2, 0, 0], [6, 7, 8, 9]]),
    }
    img, txt = exe.run(main, feed=feed, fetch_list=[image.pooled, text.pooled])
    assert img.shape == (2, 64) and txt.shape == (3, 64) and np.isfinite(txt).all()
