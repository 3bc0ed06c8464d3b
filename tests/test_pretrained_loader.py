"""paddlecraft.encoders.pretrained: safe .pdparams reading, generic key handling, strict/non-strict reports."""

from __future__ import annotations

import builtins
import os
import pickle

import numpy as np
import paddle
import pytest
from paddle import nn
from safetensors.numpy import save_file

from paddlecraft.encoders import (
    Encoder,
    InputSpec,
    LayerSpec,
    LoadReport,
    PretrainedLoadError,
    load_pretrained,
    read_weights,
)
from paddlecraft.encoders.pretrained import KeyMapping, copy_pretrained, rename_prefix


class TinyNet(nn.Layer):
    """Linear -> BatchNorm1D, named like a torch module (``fc``, ``bn``)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.bn = nn.BatchNorm1D(n_out)

    def forward(self, x):
        return self.bn(self.fc(x))


class TinyEncoder(Encoder):
    """One logical layer ``body``; external keys ``net.fc.*`` / ``net.bn.*``."""

    def __init__(self, scope: str, n_in: int = 4, n_out: int = 3) -> None:
        super().__init__(scope)
        self.declare("body", LayerSpec(lambda: TinyNet(n_in, n_out), ("tiny", n_in, n_out)))
        self.declare_input("input", InputSpec((n_in,)))
        self.declare_outputs("embedding")

    def _forward(self, x):
        return {"embedding": self.layers["body"](x)}

    @classmethod
    def detect_source(cls, keys: list[str]) -> str:
        return "paddle" if any(k.endswith("._mean") for k in keys) else "torch"

    def pretrained_key(self, key: str, source: str) -> str | None:
        return rename_prefix(key, [("net.", "layers.body.")])


def _torch_style(rng, n_in=4, n_out=3) -> dict[str, np.ndarray]:
    f = lambda *s: rng.standard_normal(s).astype("float32")
    return {
        "net.fc.weight": f(n_out, n_in),  # torch layout [out, in]
        "net.fc.bias": f(n_out),
        "net.bn.weight": f(n_out),
        "net.bn.bias": f(n_out),
        "net.bn.running_mean": f(n_out),
        "net.bn.running_var": np.abs(f(n_out)) + 0.5,
        "net.bn.num_batches_tracked": np.array(7, dtype="int64"),
    }


def test_torch_names_are_renamed_transposed_and_counters_ignored(scope, tmp_path):
    arrays = _torch_style(np.random.default_rng(0))
    path = tmp_path / "tiny.safetensors"
    save_file(arrays, str(path))
    enc = TinyEncoder(scope)
    report = enc.load_pretrained(path)
    assert report.ok and report.source == "torch"
    assert report.ignored == ["net.bn.num_batches_tracked"]
    sd = enc.state_dict()
    np.testing.assert_array_equal(sd["layers.body.fc.weight"].numpy(), arrays["net.fc.weight"].T)
    np.testing.assert_array_equal(sd["layers.body.bn._mean"].numpy(), arrays["net.bn.running_mean"])
    np.testing.assert_array_equal(
        sd["layers.body.bn._variance"].numpy(), arrays["net.bn.running_var"]
    )
    assert "(source format: torch): 6 matched" in str(report)


def test_paddle_save_file_roundtrips_through_restricted_unpickler(scope, tmp_path):
    src = TinyNet(4, 3)
    path = tmp_path / "tiny.pdparams"
    paddle.save(src.state_dict(), str(path))
    got = read_weights(path)
    assert set(got) == set(src.state_dict())  # Paddle's name table is not a weight
    enc = TinyEncoder(scope)
    report = load_pretrained(enc, {f"net.{k}": v for k, v in got.items()})
    assert report.ok and report.source == "paddle"
    x = paddle.randn([5, 4])
    src.eval(), enc.eval()
    np.testing.assert_allclose(enc(x).numpy(), src(x).numpy(), rtol=0, atol=1e-6)


def test_the_loader_takes_data_a_state_dict_and_a_key_mapping_not_an_encoder():
    """copy_pretrained fills any ``state_dict()`` (here a bare nn.Linear's) from the family's
    `KeyMapping`; `KeyMapping.of` reads only the contract's members an encoder has."""
    lin = nn.Linear(4, 3)
    w = np.arange(12, dtype="float32").reshape(3, 4)  # torch layout [out, in]
    b = np.ones(3, "float32")
    keys = KeyMapping(pretrained_key=lambda key, source: rename_prefix(key, [("net.", "")]))
    report = copy_pretrained(
        {"net.weight": w, "net.bias": b},
        lin.state_dict(),
        {"weight"},
        keys,
        "Linear",
        True,
        "torch",
    )
    assert report.ok and report.matched == ["weight", "bias"]
    np.testing.assert_array_equal(lin.weight.numpy(), w.T)
    np.testing.assert_array_equal(lin.bias.numpy(), b)
    mapping = KeyMapping.of(TinyEncoder)
    assert mapping.detect_source is not None and mapping.pretrained_key is not None
    assert mapping.convert_pretrained is None and mapping.paddle_layout_sources == ("paddle",)


class _Shell:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Writer:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


@pytest.mark.parametrize("payload", [_Shell, _Writer])
def test_crafted_pdparams_is_refused_and_runs_nothing(tmp_path, payload):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pdparams"
    with open(path, "wb") as f:
        pickle.dump({"fc.weight": np.zeros(3, "float32"), "x": payload(str(marker))}, f)
    with pytest.raises(PretrainedLoadError, match=r"refusing to load .*evil\.pdparams.*global"):
        read_weights(path)
    assert not marker.exists()


def test_strict_mismatch_reports_both_shapes_and_loads_nothing(scope, tmp_path):
    arrays = _torch_style(np.random.default_rng(1), n_out=5)
    enc = TinyEncoder(scope).build()
    before = enc.state_dict()["layers.body.fc.bias"].numpy().copy()
    with pytest.raises(PretrainedLoadError) as err:
        load_pretrained(enc, arrays)
    report = err.value.report
    assert isinstance(report, LoadReport) and not report.ok
    assert ("layers.body.fc.weight", (4, 3), (4, 5)) in report.mismatched
    assert "layers.body.fc.weight: [4, 3] vs [4, 5]" in str(err.value)
    np.testing.assert_array_equal(enc.state_dict()["layers.body.fc.bias"].numpy(), before)


def test_non_strict_loads_what_matches_and_lists_the_rest(scope):
    arrays = _torch_style(np.random.default_rng(2), n_out=3)
    arrays["net.fc.weight"] = np.zeros((9, 4), "float32")  # a different head
    arrays["extra.thing"] = np.ones(2, "float32")
    enc = TinyEncoder(scope).build()
    head_before = enc.state_dict()["layers.body.fc.weight"].numpy().copy()
    report = load_pretrained(enc, arrays, strict=False)
    assert report.unexpected == ["extra.thing"]
    assert [k for k, _, _ in report.mismatched] == ["layers.body.fc.weight"]
    assert "layers.body.fc.bias" in report.matched and report.missing == []
    np.testing.assert_array_equal(enc.state_dict()["layers.body.fc.weight"].numpy(), head_before)
    np.testing.assert_array_equal(
        enc.state_dict()["layers.body.bn.weight"].numpy(), arrays["net.bn.weight"]
    )


def test_unknown_suffix_and_missing_file_are_clear(tmp_path):
    with pytest.raises(PretrainedLoadError, match="does not exist"):
        read_weights(tmp_path / "nope.safetensors")
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"x")
    with pytest.raises(PretrainedLoadError, match=r"\.safetensors or \.pdparams"):
        read_weights(bad)
