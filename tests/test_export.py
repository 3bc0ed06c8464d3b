"""Export for deployment: paddle.jit.save -> paddle.inference (no PaddleCraft) and ONNX."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import paddle
import pytest

from paddlecraft.agents import Captioner, Classifier, Policy
from paddlecraft.agents.export import ExportError, export_layer, probe_inputs, read_record
from paddlecraft.arenas.engine.export import (
    ExportConfigError,
    ExportSettings,
    export_run,
    parse_settings,
)

ROOT = Path(__file__).resolve().parents[1]
TINY_CNN = {
    "_target_": "paddlecraft.encoders.ImageCNNEncoder",
    "in_channels": 3,
    "image_size": 16,
    "channels": [8],
    "embedding_dim": 8,
}
TINY_DEC = {
    "_target_": "paddlecraft.encoders.TextDecoder",
    "embed_dim": 8,
    "hidden_size": 8,
    "max_len": 6,
}

# runs paddle.inference with every PaddleCraft package made unimportable
NO_PADDLECRAFT = r"""
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"agents", "encoders", "arenas", "craftdata"}:
            raise ImportError(f"PaddleCraft package {name} must not be needed")
sys.meta_path.insert(0, Block())
import numpy as np
from paddle import inference
out = {}
for d in sys.argv[1:]:
    data = np.load(f"{d}/probe.npz")
    cfg = inference.Config(f"{d}/model.json", f"{d}/model.pdiparams")
    cfg.disable_gpu()
    pred = inference.create_predictor(cfg)
    xs = [data[f"in{i}"] for i in range(len(pred.get_input_names()))]
    for name, x in zip(pred.get_input_names(), xs):
        h = pred.get_input_handle(name); h.reshape(list(x.shape)); h.copy_from_cpu(x)
    pred.run()
    got = [pred.get_output_handle(n).copy_to_cpu() for n in pred.get_output_names()]
    out[d] = [float(np.abs(g - data[f"out{i}"]).max()) for i, g in enumerate(got)]
print(json.dumps(out))
"""


def _models(make_scope):
    clf = Classifier(
        make_scope("clf"),
        encoder={"_target_": "paddlecraft.encoders.ImageCNNEncoder", "image_size": 8},
        seed=0,
    )
    policy = Policy(
        make_scope("policy"),
        encoder={
            "_target_": "paddlecraft.encoders.ImageMLPEncoder",
            "input_size": 18,
            "hidden_size": 32,
            "num_classes": 32,
        },
        obs_shape=[3, 3, 2],
        num_actions=9,
        seed=0,
    )
    cap = Captioner(make_scope("cap"), encoder=TINY_CNN, decoder=TINY_DEC, seed=0)
    # (layer, eager function giving the outputs the export promises)
    return {
        "classifier": (clf, lambda x: [clf(x)]),
        "policy": (policy, lambda x: list(policy(x))),
        "captioner_image": (cap.encoder, lambda x: [cap.embed(x)]),
    }


def _eager_probe(layer, fn, d: Path) -> None:
    """Save the probe inputs and eager outputs (computed here, not by the exporter)."""
    record = read_record(d)
    xs = probe_inputs({i["name"]: (tuple(i["shape"][1:]), i["dtype"]) for i in record["inputs"]})
    layer.eval()
    with paddle.no_grad():
        outs = [t.numpy() for t in fn(xs[0])]
    np.savez(
        d / "probe.npz",
        **{f"in{i}": x for i, x in enumerate(xs)},
        **{f"out{i}": o for i, o in enumerate(outs)},
    )


def test_exported_models_run_in_paddle_inference_without_paddlecraft(make_scope, tmp_path):
    dirs = []
    for name, (layer, fn) in _models(make_scope).items():
        d = tmp_path / name
        record = export_layer(layer, d)
        assert record["inputs"][0]["shape"][0] is None  # dynamic batch
        assert record["checks"]["paddle_inference_max_abs_diff"] <= 1e-5
        _eager_probe(layer, fn, d)
        dirs.append(str(d))
    assert read_record(tmp_path / "policy")["outputs"] == ["logits", "value"]
    assert read_record(tmp_path / "captioner_image")["outputs"] == ["pooled"]
    r = subprocess.run(
        [sys.executable, "-I", "-c", NO_PADDLECRAFT, *dirs],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    diffs = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(diffs) == set(dirs)
    assert [len(v) for v in diffs.values()] == [1, 2, 1]  # logits; logits + value; embedding
    assert max(max(v) for v in diffs.values()) <= 1e-5, diffs


@pytest.mark.slow  # ~5 s of conversion per model; ~30 s on a loaded 2-core machine
def test_classifier_onnx_matches_eager(make_scope, tmp_path):
    layer, fn = _models(make_scope)["classifier"]
    record = export_layer(layer, tmp_path, onnx=True)
    assert (tmp_path / "model.onnx").is_file()
    import onnxruntime as ort

    _eager_probe(layer, fn, tmp_path)
    data = np.load(tmp_path / "probe.npz")
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape[0] not in (1, 3)  # batch axis left dynamic
    (got,) = session.run(None, {session.get_inputs()[0].name: data["in0"]})
    assert np.abs(got - data["out0"]).max() <= 1e-5
    assert record["checks"]["onnxruntime_max_abs_diff"] <= 1e-5


@pytest.mark.slow
def test_policy_and_captioner_encoder_onnx_match_eager(make_scope, tmp_path):
    for name in ("policy", "captioner_image"):
        layer, fn = _models(make_scope)[name]
        record = export_layer(layer, tmp_path / name, onnx=True)
        assert record["checks"]["onnxruntime_max_abs_diff"] <= 1e-5


class _Eigh(paddle.nn.Layer):
    """A layer with an operator paddle2onnx cannot convert (symmetric eigendecomposition)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = paddle.nn.Linear(4, 4)

    def forward(self, x):
        h = self.linear(x)  # [B, 4]
        return paddle.linalg.eigh(h.T @ h)[0]  # [4]

    def export_signature(self):
        return {"x": ((4,), "float32")}, ["eigenvalues"]


def test_unconvertible_operator_is_named(tmp_path):
    with pytest.raises(ExportError, match=r"no converter for pd_op\.eigh"):
        export_layer(_Eigh(), tmp_path, onnx=True)
    # the paddle.inference export of the same layer still works
    assert export_layer(_Eigh(), tmp_path / "pd")["checks"]["paddle_inference_max_abs_diff"] < 1e-5


class _NumpyForward(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.linear = paddle.nn.Linear(4, 4)

    def forward(self, x):
        return paddle.to_tensor(np.sort(self.linear(x).numpy(), axis=-1))

    def export_signature(self):
        return {"x": ((4,), "float32")}, ["sorted"]


def test_untraceable_forward_names_the_line(tmp_path):
    with pytest.raises(ExportError, match=r"cannot be traced(.|\n)*np\.sort"):
        export_layer(_NumpyForward(), tmp_path)


def test_export_settings_are_checked():
    s = parse_settings(["export=runs/x", "export.agent=clf", "export.onnx=true"])
    assert (s.run, s.agent, s.onnx, s.part) == ("runs/x", "clf", True, None)
    with pytest.raises(ExportConfigError, match="unknown setting 'export.agnt'"):
        parse_settings(["export=runs/x", "export.agnt=clf"])
    with pytest.raises(ExportConfigError, match="export.onnx='yes'"):
        parse_settings(["export=runs/x", "export.onnx=yes"])
    with pytest.raises(ExportConfigError, match="training settings belong to a run"):
        parse_settings(["export=runs/x", "arena=gan"])


def test_run_py_exports_an_agent_from_a_run(tmp_path):
    """The command's ``export=<run>`` on a run it trained, and its one-line error for an
    agent the run has not, through the command's own ``main`` (the installed ``paddlecraft
    export=`` as a process is tests/test_wheel.py's)."""
    from tests.mistake_driver import run_case

    run_dir, cwd = tmp_path / "run", tmp_path / "cwd"
    cwd.mkdir()
    train = ["arena=classify", "trainer.max_steps=2", "trainer.progress=false"]
    r = run_case([*train, f"hydra.run.dir={run_dir}"], str(cwd))
    assert r["rc"] == 0, r["stderr"][-3000:]
    r = run_case([f"export={run_dir}", "export.agent=classifier"], str(cwd))
    assert r["rc"] == 0, r["stderr"][-3000:]
    record = read_record(run_dir / "export" / "classifier")
    assert record["inputs"] == [{"name": "input", "shape": [None, 64], "dtype": "float32"}]
    assert record["checks"]["paddle_inference_max_abs_diff"] <= 1e-5
    bad = run_case([f"export={run_dir}", "export.agent=nobody"], str(cwd))
    assert bad["rc"] == 2 and "the run's agents are ['classifier']" in bad["stderr"]
    assert bad["stderr"].count("error:") == 1 and bad["left"] == []


def test_export_part_of_a_saved_agent(make_scope, tmp_path):
    cap = Captioner(make_scope("cap"), encoder=TINY_CNN, decoder=TINY_DEC, seed=0)
    cap.save(tmp_path / "captioner")
    record = export_run(ExportSettings(run=str(tmp_path / "captioner"), part="encoder"))
    assert record["outputs"] == ["pooled"]
    assert record["inputs"] == [{"name": "input", "shape": [None, 3, 16, 16], "dtype": "float32"}]
    assert (tmp_path / "captioner" / "export" / f"{cap.name}.encoder" / "model.pdiparams").is_file()
    with pytest.raises(
        ExportConfigError, match=r"export.part='speller'.*parts are \['encoder', 'decoder'\]"
    ):
        export_run(ExportSettings(run=str(tmp_path / "captioner"), part="speller"))


def test_vit_exports_with_a_dynamic_batch(make_scope, tmp_path):
    """The class token is broadcast to the batch without reading its size: a traced
    program's batch is -1, and ``expand([-1, ...])`` then broke the concat."""
    from paddlecraft.encoders import ViTEncoder

    paddle.seed(0)
    enc = ViTEncoder(
        make_scope("vit"),
        image_size=8,
        patch_size=4,
        in_channels=1,
        dim=16,
        depth=1,
        heads=2,
        num_classes=3,
    )
    enc.build()
    enc.eval()
    record = export_layer(enc, tmp_path)
    assert record["inputs"][0]["shape"][0] is None  # dynamic batch
    assert record["checks"]["paddle_inference_max_abs_diff"] <= 1e-5
