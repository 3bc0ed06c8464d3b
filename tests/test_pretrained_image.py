"""ResNetEncoder / ViTEncoder load files made by torch (transformers), paddle.vision and timm naming.

Reference models are tiny, randomly initialised ones built here (nothing is downloaded);
outputs must agree with the reference to 1e-4 in eval mode on the same random input
(relative to the output's largest magnitude where that exceeds 1).
"""

from __future__ import annotations

import numpy as np
import paddle
import pytest
import torch
import transformers
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch

from paddlecraft.encoders import PretrainedLoadError, read_weights
from paddlecraft.encoders.resnet import ResNetEncoder
from paddlecraft.encoders.vit import ViTEncoder

ATOL = 1e-4


def _randomise_norm_stats(model: torch.nn.Module, seed: int = 0) -> None:
    """BatchNorm running stats and affine params away from their 0/1 defaults (a real check)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(0.2 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))


def _max_err(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a - b).max())


# ----------------------------------------------------------------------------- ResNet: HF


@pytest.mark.parametrize(
    ("depth", "layer_type", "depths", "hidden", "v1"),
    [
        (18, "basic", [2, 2, 2, 2], [8, 16, 32, 64], False),
        (50, "bottleneck", [3, 4, 6, 3], [16, 32, 64, 128], False),
        (50, "bottleneck", [3, 4, 6, 3], [16, 32, 64, 128], True),  # stride on the 1x1 conv
    ],
)
def test_resnet_matches_transformers(scope, tmp_path, depth, layer_type, depths, hidden, v1):
    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(
        num_channels=3,
        embedding_size=hidden[0] // (4 if layer_type == "bottleneck" else 1),
        hidden_sizes=hidden,
        depths=depths,
        layer_type=layer_type,
        num_labels=5,
        downsample_in_bottleneck=v1,
    )
    ref = transformers.ResNetForImageClassification(cfg).eval()
    _randomise_norm_stats(ref)
    ref.save_pretrained(tmp_path)  # the file a hub download gives: model.safetensors
    path = tmp_path / "model.safetensors"

    enc = ResNetEncoder(
        scope, depth=depth, num_classes=5, width=cfg.embedding_size, stride_in_1x1=v1
    )
    report = enc.load_pretrained(path)
    assert report.ok and report.source == "hf_resnet"
    enc.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 40, 40)).astype("float32")
    with torch.no_grad():
        out = ref(torch.from_numpy(x), output_hidden_states=False)
        pooled = ref.resnet(torch.from_numpy(x)).pooler_output.flatten(1)
    got = enc.forward_all(paddle.to_tensor(x))
    assert _max_err(got["prediction"].numpy(), out.logits.numpy()) <= ATOL
    # pooled features reach ~100 here: float32 rounding alone is ~1e-6 of that
    assert _max_err(got["pooled"].numpy(), pooled.numpy()) <= ATOL * max(
        1.0, np.abs(pooled.numpy()).max()
    )


# ----------------------------------------------------------------------------- ResNet: paddle.vision


@pytest.fixture(scope="module")
def paddle_resnet18(tmp_path_factory):
    """paddle.vision resnet18(num_classes=7), saved with paddle.save; returns (model, path)."""
    paddle.seed(0)
    model = paddle.vision.models.resnet18(num_classes=7)
    for name, t in model.state_dict().items():  # BN stats away from 0/1
        if name.endswith("_mean") or name.endswith("_variance"):
            t.set_value(np.random.default_rng(1).uniform(0.1, 0.9, t.shape).astype("float32"))
    model.eval()
    path = tmp_path_factory.mktemp("r18") / "resnet18.pdparams"
    paddle.save(model.state_dict(), str(path))
    return model, path


def test_resnet18_from_paddle_vision_pdparams(scope, paddle_resnet18):
    model, path = paddle_resnet18
    enc = ResNetEncoder(scope, depth=18, num_classes=7)
    report = enc.load_pretrained(path)
    assert report.ok and report.source == "paddle" and len(report.matched) == 102
    enc.eval()
    x = paddle.randn([2, 3, 32, 32])
    assert _max_err(enc(x).numpy(), model(x).numpy()) <= ATOL


def _torchvision_names(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """paddle.vision keys/layouts -> torchvision's (running_mean/var, fc [out, in])."""
    out = {}
    for k, v in arrays.items():
        k = k.replace("._mean", ".running_mean").replace("._variance", ".running_var")
        out[k] = np.ascontiguousarray(v.T) if k == "fc.weight" else v
        if k.endswith("running_var"):
            out[k[: -len("running_var")] + "num_batches_tracked"] = np.array(3, dtype="int64")
    return out


def test_resnet18_from_torchvision_named_safetensors(scope, tmp_path, paddle_resnet18):
    model, path = paddle_resnet18
    tv_path = tmp_path / "resnet18_torchvision.safetensors"
    save_numpy(_torchvision_names(read_weights(path)), str(tv_path))
    enc = ResNetEncoder(scope, depth=18, num_classes=7)
    report = enc.load_pretrained(tv_path)
    assert report.ok and report.source == "torchvision"
    assert len(report.ignored) == 20  # num_batches_tracked of the 20 BatchNorms
    enc.eval()
    x = paddle.randn([2, 3, 32, 32])
    assert _max_err(enc(x).numpy(), model(x).numpy()) <= ATOL


def test_resnet_wrong_head_strict_fails_naming_both_shapes(scope, paddle_resnet18):
    _, path = paddle_resnet18
    enc = ResNetEncoder(scope, depth=18, num_classes=3)
    with pytest.raises(
        PretrainedLoadError, match=r"layers\.prediction\.weight: \[512, 3\] vs \[512, 7\]"
    ):
        enc.load_pretrained(path)


def test_resnet_new_head_non_strict_loads_backbone_only(scope, paddle_resnet18):
    model, path = paddle_resnet18
    enc = ResNetEncoder(scope, depth=18, num_classes=3).build()
    head = {k: v.numpy().copy() for k, v in enc.layers["prediction"].state_dict().items()}
    report = enc.load_pretrained(path, strict=False)
    assert {k for k, _, _ in report.mismatched} == {
        "layers.prediction.weight",
        "layers.prediction.bias",
    }
    assert not report.missing and not report.unexpected
    file = read_weights(path)
    np.testing.assert_array_equal(
        enc.layers["layer3"][1].conv2.weight.numpy(), file["layer3.1.conv2.weight"]
    )
    np.testing.assert_array_equal(enc.layers["stem"].bn1._variance.numpy(), file["bn1._variance"])
    for k, v in enc.layers["prediction"].state_dict().items():
        np.testing.assert_array_equal(v.numpy(), head[k])


# ----------------------------------------------------------------------------- ResNet: names API


def test_resnet_names_api(scope):
    enc = ResNetEncoder(scope, depth=18, num_classes=4, in_channels=1, small_input=True, width=8)
    x = paddle.rand([3, 1, 8, 8])
    out = enc.forward_all(x)
    assert out["prediction"].shape == [3, 4] and out["pooled"].shape == [3, 64]
    assert enc.logical_names == [
        "stem",
        "layer1",
        "layer2",
        "layer3",
        "layer4",
        "pool",
        "prediction",
    ]
    layer3 = enc.get_param("layer3")["layer3"]
    assert layer3 and all(p.name.startswith(f"{scope}.layer3.") for p in layer3)

    enc.freeze("stem"), enc.freeze("layer1")
    assert enc.is_frozen("stem") and enc.is_frozen("layer1") and not enc.is_frozen("layer2")
    loss = paddle.nn.functional.cross_entropy(enc(x), paddle.to_tensor([0, 1, 2]))
    loss.backward()
    assert all(p.grad is None for p in enc.get_param("layer1")["layer1"])
    assert enc.get_gradient("pooled")["pooled"][0].shape == [3, 64]
    assert enc.get_gradient("layer2")["layer2"][0].shape == list(
        enc.get_param("layer2")["layer2"][0].shape
    )
    enc.unfreeze("stem"), enc.unfreeze("layer1")
    assert not enc.is_frozen("stem") and not enc.is_frozen("layer1")

    table = enc.summary()
    assert [r["logical"] for r in table] == enc.logical_names
    for row in table:
        assert all(name.startswith(f"{scope}.{row['logical']}.") for name in row["physical"])
    assert f"{scope}.layer1." in str(table)


def test_resnet_pretrained_setting_loads_on_build(scope, paddle_resnet18):
    model, path = paddle_resnet18
    enc = ResNetEncoder(scope, depth=18, num_classes=7, pretrained=str(path)).build()
    enc.eval()
    x = paddle.randn([1, 3, 32, 32])
    assert _max_err(enc(x).numpy(), model(x).numpy()) <= ATOL


def test_resnet_sizes_match_the_published_parameter_counts(make_scope):
    # torchvision resnet18 / resnet50: 11,689,512 / 25,557,032 parameters (1000 classes)
    for depth, count in ((18, 11_689_512), (50, 25_557_032)):
        enc = ResNetEncoder(make_scope(), depth=depth).build()
        assert sum(int(np.prod(p.shape)) for p in enc.parameters() if not p.stop_gradient) == count


# ----------------------------------------------------------------------------- ViT


def _tiny_hf_vit(eps: float = 1e-12) -> transformers.ViTForImageClassification:
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        num_labels=5,
        layer_norm_eps=eps,
    )
    ref = transformers.ViTForImageClassification(cfg).eval()
    with torch.no_grad():  # HF initialises with std 0.02: spread weights so errors would show
        for p in ref.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return ref


def _tiny_vit(scope: str, **kw) -> ViTEncoder:
    return ViTEncoder(
        scope,
        image_size=32,
        patch_size=8,
        dim=32,
        depth=2,
        heads=2,
        mlp_ratio=2,
        num_classes=5,
        **kw,
    )


def _vit_reference(ref, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        logits = ref(torch.from_numpy(x)).logits.numpy()
        pooled = ref.vit(torch.from_numpy(x)).last_hidden_state[:, 0].numpy()
    return logits, pooled


def test_vit_matches_transformers_hub_file(scope, tmp_path):
    ref = _tiny_hf_vit()
    ref.save_pretrained(tmp_path)  # hub layout: vit.encoder.layer.N.attention.attention.query
    enc = _tiny_vit(scope)
    report = enc.load_pretrained(tmp_path / "model.safetensors")
    assert report.ok and report.source == "hf_vit" and len(report.matched) == 40
    assert enc.layers["norm"]._epsilon == 1e-12  # eps=None follows the reference
    enc.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype("float32")
    logits, pooled = _vit_reference(ref, x)
    got = enc.forward_all(paddle.to_tensor(x))
    assert _max_err(got["prediction"].numpy(), logits) <= ATOL
    assert _max_err(got["pooled"].numpy(), pooled) <= ATOL
    assert np.abs(logits).max() > 0.5  # the comparison is not between near-zero outputs


def test_vit_loads_transformers5_in_memory_names(scope, tmp_path):
    ref = _tiny_hf_vit()
    path = tmp_path / "sd.safetensors"
    save_torch({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    assert any(".q_proj." in k for k in read_weights(path))
    enc = _tiny_vit(scope)
    assert enc.load_pretrained(path).ok
    enc.eval()
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype("float32")
    assert _max_err(enc(paddle.to_tensor(x)).numpy(), _vit_reference(ref, x)[0]) <= ATOL


def _timm_names(hf: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Hugging Face ViT hub keys -> timm's (fused qkv [3D, D], head, norm)."""
    out = {
        "cls_token": hf["vit.embeddings.cls_token"],
        "pos_embed": hf["vit.embeddings.position_embeddings"],
        "patch_embed.proj.weight": hf["vit.embeddings.patch_embeddings.projection.weight"],
        "patch_embed.proj.bias": hf["vit.embeddings.patch_embeddings.projection.bias"],
        "norm.weight": hf["vit.layernorm.weight"],
        "norm.bias": hf["vit.layernorm.bias"],
        "head.weight": hf["classifier.weight"],
        "head.bias": hf["classifier.bias"],
    }
    names = {
        "norm1": "layernorm_before",
        "norm2": "layernorm_after",
        "attn.proj": "attention.output.dense",
        "mlp.fc1": "intermediate.dense",
        "mlp.fc2": "output.dense",
    }
    for i in range(2):
        src = f"vit.encoder.layer.{i}."
        for p in ("weight", "bias"):
            for timm, hf_name in names.items():
                out[f"blocks.{i}.{timm}.{p}"] = hf[f"{src}{hf_name}.{p}"]
            out[f"blocks.{i}.attn.qkv.{p}"] = np.concatenate(
                [hf[f"{src}attention.attention.{n}.{p}"] for n in ("query", "key", "value")]
            )
    return out


def test_vit_loads_timm_names_with_fused_qkv(scope, tmp_path):
    ref = _tiny_hf_vit(eps=1e-6)  # timm's LayerNorm epsilon
    ref.save_pretrained(tmp_path)
    timm_path = tmp_path / "timm_vit.safetensors"
    save_numpy(_timm_names(read_weights(tmp_path / "model.safetensors")), str(timm_path))
    enc = _tiny_vit(scope)
    report = enc.load_pretrained(timm_path)
    assert report.ok and report.source == "timm" and enc.layers["norm"]._epsilon == 1e-6
    enc.eval()
    x = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype("float32")
    assert _max_err(enc(paddle.to_tensor(x)).numpy(), _vit_reference(ref, x)[0]) <= ATOL


def test_vit_new_head_non_strict_and_names(scope, tmp_path):
    ref = _tiny_hf_vit()
    ref.save_pretrained(tmp_path)
    enc = ViTEncoder(
        scope, image_size=32, patch_size=8, dim=32, depth=2, heads=2, mlp_ratio=2, num_classes=3
    )
    report = enc.load_pretrained(tmp_path / "model.safetensors", strict=False)
    assert {k for k, _, _ in report.mismatched} == {
        "layers.prediction.weight",
        "layers.prediction.bias",
    }
    np.testing.assert_array_equal(
        enc.layers["block_1"].attn.k.weight.numpy(),
        ref.state_dict()["vit.layers.1.attention.k_proj.weight"].numpy().T,
    )
    assert enc.logical_names == ["patch_embed", "block_0", "block_1", "norm", "prediction"]
    assert all(p.name.startswith(f"{scope}.block_1.") for p in enc.get_param("block_1")["block_1"])
    out = enc.forward_all(paddle.rand([4, 3, 32, 32]))
    assert out["pooled"].shape == [4, 32] and out["hidden"].shape == [4, 17, 32]


def test_vit_tiny_matches_the_published_parameter_count(scope):
    # timm vit_tiny_patch16_224 (1000 classes): 5,717,416 parameters
    enc = ViTEncoder(scope, size="tiny", num_classes=1000).build()
    assert sum(int(np.prod(p.shape)) for p in enc.parameters()) == 5_717_416


def test_vit_size_contradiction_is_a_clear_error(scope):
    with pytest.raises(ValueError, match=r"dim=256 contradicts size='small' \(dim=384\)"):
        ViTEncoder(scope, size="small", dim=256)
    assert ViTEncoder(scope, size="small").dim == 384


# ----------------------------------------------------------------------------- Hydra


def test_encoder_config_pretrained_key_loads_the_file(scope, tmp_path, compose_config):
    from paddlecraft.arenas.engine.app import build_agents

    src = ResNetEncoder(scope, depth=18, num_classes=10, in_channels=1, small_input=True, width=8)
    src.build()
    # paddle.vision naming: our state_dict keys without the "layers." / logical-layer prefixes
    flat = {}
    for k, v in src.state_dict().items():
        k = k.removeprefix("layers.").replace("stem.", "").replace("prediction.", "fc.")
        flat[k] = v.numpy()
    path = tmp_path / "digits_resnet.pdparams"
    paddle.save(flat, str(path))
    cfg = compose_config(
        "arena=classify",
        "encoder@agents.classifier.encoder=resnet18",
        "agents.classifier.encoder.width=8",
        f"agents.classifier.encoder.pretrained={path}",
    )
    agents = build_agents(cfg)
    enc = agents["classifier"].encoder
    np.testing.assert_array_equal(
        enc.layers["layer4"][1].conv2.weight.numpy(), flat["layer4.1.conv2.weight"]
    )
    np.testing.assert_array_equal(enc.layers["prediction"].weight.numpy(), flat["fc.weight"])
