"""Fine-tuning: PaddleCraft's own scope-free weights load into a new encoder with a new head."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from paddlecraft.encoders import ResNetEncoder
from paddlecraft.encoders.pretrained import PretrainedLoadError


def _tiny(scope: str, classes: int) -> ResNetEncoder:
    return ResNetEncoder(
        scope, depth=18, width=4, in_channels=1, small_input=True, num_classes=classes
    ).build()


def test_save_pretrained_then_new_head_loads_the_backbone(make_scope, tmp_path):
    paddle.seed(0)
    src = _tiny(make_scope("src"), 5)
    opt = paddle.optimizer.Adam(1e-2, parameters=src.parameters())
    x = paddle.randn([8, 1, 8, 8])
    for _ in range(3):  # move the weights and BN statistics away from their init
        loss = src(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
    path = tmp_path / "backbone.safetensors"
    src.save_pretrained(path)

    dst = _tiny(make_scope("dst"), 3)  # another scope, another head
    head_before = {k: v.numpy().copy() for k, v in dst.layers["prediction"].state_dict().items()}
    report = dst.load_pretrained(path, strict=False)
    assert report.source == "paddlecraft" and not report.unexpected
    assert {k for k, _, _ in report.mismatched} == {
        "layers.prediction.weight",
        "layers.prediction.bias",
    }
    s, d = src.state_dict(), dst.state_dict()
    backbone = [k for k in s if not k.startswith("layers.prediction.")]
    assert len(backbone) > 20 and any(k.endswith("_mean") for k in backbone)
    for k in backbone:
        np.testing.assert_array_equal(d[k].numpy(), s[k].numpy(), err_msg=k)
    for k, v in dst.layers["prediction"].state_dict().items():
        np.testing.assert_array_equal(v.numpy(), head_before[k])  # new head left as built

    with pytest.raises(PretrainedLoadError) as e:
        _tiny(make_scope("strict"), 3).load_pretrained(path, strict=True)
    assert "layers.prediction.weight" in str(e.value) and "strict=False" in str(e.value)
