"""CLIPResNetEncoder loads open_clip's ModifiedResNet (RN50 layout) and matches it.

open_clip is not installed (it would pull torchvision, which does not import against the CPU
torch), so the reference is its ``ModifiedResNet`` transcribed into torch below, randomly
initialised and saved under open_clip's keys (``visual.*``). Outputs agree to 1e-5 in eval
mode (BatchNorm statistics randomised, so a missed or swapped one shows).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from paddlecraft.encoders import CLIPResNetEncoder, PretrainedLoadError

ATOL = 1e-5


class Bottleneck(nn.Module):  # open_clip/modified_resnet.py
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.avgpool = nn.AvgPool2d(stride) if stride > 1 else nn.Identity()
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample = None
        if stride > 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(OrderedDict([
                ("-1", nn.AvgPool2d(stride)),
                ("0", nn.Conv2d(inplanes, planes * 4, 1, stride=1, bias=False)),
                ("1", nn.BatchNorm2d(planes * 4)),
            ]))  # fmt: skip

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(self.avgpool(out)))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class AttentionPool2d(nn.Module):
    def __init__(self, spacial_dim, embed_dim, num_heads, output_dim):
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.randn(spacial_dim**2 + 1, embed_dim))
        self.k_proj, self.q_proj, self.v_proj = (nn.Linear(embed_dim, embed_dim) for _ in "kqv")
        self.c_proj = nn.Linear(embed_dim, output_dim)
        self.num_heads = num_heads

    def forward(self, x):
        x = x.reshape(x.shape[0], x.shape[1], x.shape[2] * x.shape[3]).permute(2, 0, 1)
        x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)
        x = x + self.positional_embedding[:, None, :].to(x.dtype)
        x, _ = F.multi_head_attention_forward(
            query=x, key=x, value=x, embed_dim_to_check=x.shape[-1], num_heads=self.num_heads,
            q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight,
            v_proj_weight=self.v_proj.weight, in_proj_weight=None,
            in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
            out_proj_weight=self.c_proj.weight, out_proj_bias=self.c_proj.bias,
            use_separate_proj_weight=True, training=self.training, need_weights=False,
        )  # fmt: skip
        return x  # [HW + 1, N, output_dim]


class ModifiedResNet(nn.Module):
    def __init__(self, layers, output_dim, heads, image_size, width):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width // 2, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width // 2)
        self.conv2 = nn.Conv2d(width // 2, width // 2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width // 2)
        self.conv3 = nn.Conv2d(width // 2, width, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(width)
        self.avgpool = nn.AvgPool2d(2)
        self._inplanes = width
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(width * 8, layers[3], stride=2)
        self.attnpool = AttentionPool2d(image_size // 32, width * 32, heads, output_dim)

    def _make_layer(self, planes, blocks, stride=1):
        layers = [Bottleneck(self._inplanes, planes, stride)]
        self._inplanes = planes * 4
        layers += [Bottleneck(self._inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.avgpool(F.relu(self.bn3(self.conv3(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.attnpool(x).permute(1, 0, 2)  # [N, HW + 1, output_dim]


@pytest.fixture(scope="module")
def open_clip_rn(tmp_path_factory):
    """(model, file): layers (1, 2, 1, 1), width 16, 4 heads, 24-d space, 64x64 images."""
    torch.manual_seed(0)
    model = ModifiedResNet((1, 2, 1, 1), output_dim=24, heads=4, image_size=64, width=16)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
                m.running_mean.copy_(0.2 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(1 + 0.3 * torch.rand(m.running_var.shape, generator=g))
    model.eval()
    sd = {f"visual.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    sd["logit_scale"] = torch.tensor(2.0)  # a whole CLIP file: the text half is skipped
    sd["ln_final.weight"] = torch.ones(8)
    path = tmp_path_factory.mktemp("rn") / "rn.safetensors"
    save_file(sd, str(path))
    return model, path


def test_resnet_tower_matches_open_clip_modified_resnet(scope, open_clip_rn):
    model, path = open_clip_rn
    enc = CLIPResNetEncoder(scope, image_size=64, layers=(1, 2, 1, 1), width=16, heads=4,
                            projection_dim=24)  # fmt: skip
    report = enc.load_pretrained(path)
    assert report.ok and report.source == "open_clip"
    assert report.ignored and all(k.endswith("num_batches_tracked") for k in report.ignored)
    enc.eval()
    x = np.random.default_rng(0).normal(size=(2, 3, 64, 64)).astype(np.float32)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()  # [2, 5, 24]
    out = enc.forward_all(x)
    assert out["pooled"].shape == [2, 24] and enc.feature_dim == 24
    np.testing.assert_allclose(out["hidden"].numpy(), ref, atol=ATOL, rtol=0)
    np.testing.assert_allclose(out["pooled"].numpy(), ref[:, 0], atol=ATOL, rtol=0)
    assert enc.logical_names == ["stem", "layer1", "layer2", "layer3", "layer4", "attnpool"]
    assert all(p.name.startswith(f"{scope}.") for p in enc.parameters())


def test_resnet_tower_errors(make_scope, open_clip_rn, tmp_path):
    _, path = open_clip_rn
    with pytest.raises(PretrainedLoadError, match=r"maps 512 -> 24 .*projection_dim=32"):
        CLIPResNetEncoder(make_scope(), image_size=64, layers=(1, 2, 1, 1), width=16,
                          projection_dim=32).load_pretrained(path)  # fmt: skip
    with pytest.raises(ValueError, match="divisible by 32"):
        CLIPResNetEncoder(make_scope(), image_size=40, size="tiny")
    tiny = CLIPResNetEncoder(make_scope(), image_size=32, size="tiny", normalize=True)
    assert tiny(np.zeros((1, 3, 32, 32), np.float32)).shape == [1, 64]
    vit_file = tmp_path / "vit.safetensors"
    save_file({"vision_model.embeddings.class_embedding": torch.zeros(4)}, str(vit_file))
    with pytest.raises(PretrainedLoadError, match="a ViT CLIP: use CLIPVisionEncoder"):
        CLIPResNetEncoder(make_scope(), image_size=32, size="tiny").load_pretrained(vit_file)


@pytest.mark.slow
def test_resnet_tower_exports_to_paddle_inference_and_onnx(scope, open_clip_rn, tmp_path):
    from paddlecraft.agents.export import export_layer

    _, path = open_clip_rn
    enc = CLIPResNetEncoder(scope, image_size=64, layers=(1, 2, 1, 1), width=16, heads=4,
                            projection_dim=24, normalize=True, pretrained=str(path))  # fmt: skip
    enc.build()
    record = export_layer(enc, tmp_path, onnx=True)
    assert record["checks"]["paddle_inference_max_abs_diff"] <= ATOL
    assert record["checks"]["onnxruntime_max_abs_diff"] <= ATOL
