"""Dual encoders (arena=contrastive): the loss against NumPy, recall@k by hand, frozen
towers, loaded towers, resume after SIGKILL, data=captions and the one-line errors."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import paddle
import pytest
from safetensors.numpy import load_file

from paddlecraft.agents import ImageTower, TextTower
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.contrastive import ContrastiveArena, contrastive_loss, positives_mask
from paddlecraft.arenas.contrastive.metrics import distinct, recall_at_k, retrieval_metrics
from paddlecraft.arenas.contrastive.zeroshot import linear_probe, prompts, zero_shot
from tests.data_files import class_image, write_image

ROOT = Path(__file__).resolve().parents[1]
CNN = {"_target_": "paddlecraft.encoders.ImageCNNEncoder", "channels": [4, 8], "embedding_dim": 16}
GRU = {"_target_": "paddlecraft.encoders.TextEncoder", "embed_dim": 8, "hidden_size": 16}
TINY = {"n_train": 48, "n_test": 16, "n_compositional": 12}


def _towers(make_scope, image=None, text=None):
    img = ImageTower(make_scope("img"), encoder=CNN, image_shape=[3, 64, 64],
                     **{"embed_dim": 8, **(image or {})})  # fmt: skip
    txt = TextTower(make_scope("txt"), encoder=GRU, **{"embed_dim": 8, **(text or {})})
    return img, txt


def _arena(img, txt, **kw):
    return ContrastiveArena({img.name: img, txt.name: txt}, batch_size=8, data=TINY,
                            image_agent=img.name, text_agent=txt.name, **kw)  # fmt: skip


# ----------------------------------------------------------------------------- loss, metrics
def _np_loss(i, t, scale, mask):
    i = i / np.linalg.norm(i, axis=1, keepdims=True)
    t = t / np.linalg.norm(t, axis=1, keepdims=True)
    logits = scale * i @ t.T - 1e4 * mask

    def ce(z):  # noqa: E306 (rows: softmax over columns, the diagonal is the target)
        z = z - z.max(axis=1, keepdims=True)
        return float(np.mean(np.log(np.exp(z).sum(axis=1)) - np.diag(z)))

    return 0.5 * (ce(logits) + ce(logits.T))


def test_loss_matches_a_hand_computation():
    rng = np.random.default_rng(0)
    i, t = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)
    texts = ["a b", "c", "A  b", "d", "e"]  # pairs 0 and 2: one caption (case, spaces ignored)
    mask = positives_mask(texts)
    assert mask[0, 2] and mask[2, 0] and mask.sum() == 2
    for m in (np.zeros((5, 5), bool), mask):
        got = contrastive_loss(paddle.to_tensor(i), paddle.to_tensor(t), paddle.to_tensor(14.3), m)
        assert abs(float(got) - _np_loss(i, t, 14.3, m)) < 1e-5
    # a perfect, sharp pairing costs ~0; the same image (index) is masked too
    eye = np.eye(4, dtype=np.float32)
    assert float(contrastive_loss(paddle.to_tensor(eye), paddle.to_tensor(eye),
                                  paddle.to_tensor(100.0))) < 1e-6  # fmt: skip
    assert positives_mask(["x", "y"], np.array([3, 3]))[0, 1]


def test_recall_at_k_on_a_hand_made_similarity_matrix():
    sim = np.array([[0.9, 0.1, 0.5], [0.2, 0.3, 0.8], [0.7, 0.6, 0.1]])
    relevant = np.eye(3, dtype=bool)  # query i's item is i
    # ranks of the relevant item: query 0 -> 1st, query 1 -> 2nd, query 2 -> 3rd
    assert recall_at_k(sim, relevant, 1) == pytest.approx(1 / 3)
    assert recall_at_k(sim, relevant, 2) == pytest.approx(2 / 3)
    assert recall_at_k(sim, relevant, 3) == 1.0
    m = retrieval_metrics(sim, relevant)
    # columns as queries: item 0 -> [0.9, 0.2, 0.7]: query 0 first; item 1 -> 3rd of
    # [0.1, 0.3, 0.6]; item 2 -> 3rd of [0.5, 0.8, 0.1]... (ranks 1, 2, 3 by hand)
    assert m["t2i_recall@1"] == pytest.approx(1 / 3) and m["t2i_recall@5"] == 1.0
    captions, rel = distinct([["a red one"], ["A red  one"], ["b", "c"]])
    assert captions == ["a red one", "b", "c"]
    assert rel.tolist() == [[True, False, False], [True, False, False], [False, True, True]]


def test_zero_shot_and_probe_on_separable_features():
    x = np.array([[1.0, 0.1], [0.9, -0.1], [0.1, 1.0], [-0.1, 0.8]] * 3)
    y = np.array([0, 0, 1, 1] * 3)
    assert zero_shot(x, np.array([[1.0, 0.0], [0.0, 1.0]]), y) == 1.0
    assert zero_shot(x, np.array([[0.0, 1.0], [1.0, 0.0]]), y) == 0.0  # swapped prompts
    assert linear_probe(x[:8], y[:8], x[8:], y[8:]) == 1.0
    assert prompts(["red circle"], "a photo of a {label}") == ["a photo of a red circle"]


# ----------------------------------------------------------------------------- the arena
def test_arena_trains_evaluates_and_resumes_bit_identically(make_scope, tmp_path):
    img, txt = _towers(make_scope)
    arena = _arena(img, txt, epochs=2)
    assert arena.steps_per_epoch() == 6 and arena.world.zeroshot is not None
    passed = check_arena(arena, steps=3)
    assert "resume from a checkpoint is bit-identical" in passed
    m = arena.evaluate()
    for k in ("i2t_recall@1", "i2t_recall@5", "t2i_recall@1", "t2i_recall@5",
              "zeroshot_accuracy", "linear_probe_accuracy"):  # fmt: skip
        assert 0.0 <= m[k] <= 1.0, k
    assert m["i2t_recall@5"] >= m["i2t_recall@1"]
    assert m["zeroshot_chance"] == 1.0 / m["zeroshot_classes"]
    files = arena.artifacts(str(tmp_path))
    assert Path(files["retrieval"]).stat().st_size > 2000
    rows = json.loads(Path(files["retrieval_table"]).read_text())
    assert len(rows) == 8 and len(rows[0]["top"]) == 3


def test_temperature_starts_at_clip_value_learns_and_is_clamped(make_scope):
    img, txt = _towers(make_scope)
    assert float(img.logit_scale()) == pytest.approx(1 / 0.07, rel=1e-6)
    arena = _arena(img, txt)
    before = float(img.logit_scale())
    arena.train_step(next(iter(arena.batches(0))))
    assert float(img.logit_scale()) != before  # learned, by the image agent's optimizer
    assert any(p.name == f"{img.name}.logit_scale.w_0" for p in img.own_parameters())
    img.scale.w.set_value(paddle.full([1], 7.0))
    img.clamp_temperature()
    assert float(img.logit_scale()) == pytest.approx(100.0, rel=1e-5)


@pytest.mark.parametrize("which", ["image", "text"])
def test_a_frozen_tower_does_not_move(which, make_scope):
    img, txt = _towers(make_scope, **{which: {"frozen": True}})
    frozen, live = (img, txt) if which == "image" else (txt, img)
    before = {p.name: p.numpy().copy() for p in frozen.parameters() if "logit_scale" not in p.name}
    other = {p.name: p.numpy().copy() for p in live.parameters()}
    arena = _arena(img, txt)
    for batch in list(arena.batches(0))[:3]:
        arena.train_step(batch)
    for p in frozen.parameters():  # BatchNorm statistics included: a frozen tower stays in eval
        if p.name in before:
            assert p.numpy().tobytes() == before[p.name].tobytes(), p.name
    assert any(p.numpy().tobytes() != other[p.name].tobytes() for p in live.parameters())


def test_a_tower_starts_from_a_loaded_weights_file(make_scope, tmp_path):
    vit = {"_target_": "paddlecraft.encoders.ViTEncoder", "size": None, "dim": 16, "depth": 1,
           "heads": 2, "patch_size": 16}  # fmt: skip
    src = ImageTower(make_scope("src"), encoder=vit, image_shape=[3, 64, 64], seed=5)
    path = tmp_path / "vit.safetensors"
    src.encoder.save_pretrained(path)
    img = ImageTower(make_scope("img"), encoder={**vit, "pretrained": str(path)},
                     image_shape=[3, 64, 64], seed=9, frozen=True, embed_dim=8)  # fmt: skip
    got = {k.split(".", 2)[-1]: p.numpy() for k, p in
           zip([p.name for p in img.encoder.parameters()], img.encoder.parameters())}  # fmt: skip
    want = {p.name.split(".", 2)[-1]: p.numpy() for p in src.encoder.parameters()}
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert all(p.stop_gradient for p in img.encoder.parameters())


# ----------------------------------------------------------------------------- errors
def test_a_text_encoder_in_the_image_slot_is_one_line_error(make_scope):
    with pytest.raises(ConfigError, match=r"agents\.\S+\.encoder: TextEncoder reads text") as e:
        ImageTower(make_scope("img"), encoder=GRU, image_shape=[3, 64, 64])
    assert "\n" not in str(e.value) and "encoder@" in str(e.value)
    with pytest.raises(ConfigError, match="does not read text") as e:
        TextTower(make_scope("txt"), encoder=CNN)
    assert "\n" not in str(e.value) and "gru_text" in str(e.value)


def test_mismatched_embedding_sizes_without_projection_are_refused(make_scope):
    img, txt = _towers(make_scope, image={"embed_dim": None}, text={"embed_dim": None})
    assert (img.embed_dim, txt.embed_dim) == (16, 16)  # same feature widths: no projection needed
    txt2 = TextTower(make_scope("txt"), encoder={**GRU, "hidden_size": 12})
    with pytest.raises(ConfigError, match=f"embeds to 16 and agents.{txt2.name} to 12") as e:
        _arena(img, txt2)
    assert "\n" not in str(e.value) and "embed_dim=64" in str(e.value)
    with pytest.raises(ConfigError, match="needs a ImageTower"):
        _arena(txt, txt2)


def test_errors_on_the_command_line_are_one_line_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "arena=contrastive",
         "encoder@agents.image.encoder=gru_text", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "agents.image.encoder" in errors[0] and "reads text" in errors[0]


# ----------------------------------------------------------------------------- files
def test_contrastive_on_caption_files_with_a_zero_shot_folder(tmp_path, compose_config):
    from paddlecraft.arenas.engine.app import build_agents, build_arena

    rows = []
    colours = ("red", "green", "blue")
    for i in range(24):
        name = f"img/{i:03d}.png"
        write_image(tmp_path / name, class_image(i % 3, i, (12, 12)))
        rows.append(json.dumps({"image": name, "captions": [f"a {colours[i % 3]} square"]}))
    (tmp_path / "captions.jsonl").write_text("\n".join(rows) + "\n")
    for k, c in enumerate(colours):
        for j in range(3):
            write_image(tmp_path / "zs" / f"{c}_square" / f"{j}.png", class_image(k, 100 + j))
    cfg = compose_config(
        "arena=contrastive", "data=captions", f"data.path={tmp_path / 'captions.jsonl'}",
        "data.image_size=16", "arena.batch_size=6", "arena.epochs=1",
        f"arena.zeroshot.folder={tmp_path / 'zs'}", "arena.zeroshot.template='a {label}'",
        "agents.image.encoder.channels=[8]",
    )  # fmt: skip
    agents = build_agents(cfg)
    arena = build_arena(cfg, agents)
    w = arena.world
    assert w.train_images.shape[1:] == (3, 16, 16) and w.zeroshot.classes[0] == "blue square"
    assert set(agents["text"].vocab.itos) >= {"red", "green", "blue", "square"}
    for batch in arena.batches(0):
        arena.train_step(batch)
    m = arena.evaluate()
    assert m["eval_captions"] == 3 and 0 <= m["zeroshot_accuracy"] <= 1


# ----------------------------------------------------------------------------- command line
def _cmd(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), "arena=contrastive", "trainer.progress=false",
            "arena.epochs=3", "arena.batch_size=16", "arena.data.n_train=160",
            "arena.data.n_test=32", "arena.data.n_compositional=16",
            "trainer.checkpoint_every=4", "trainer.keep_checkpoints=20",
            f"hydra.run.dir={run_dir}", *extra]  # fmt: skip


def _final(run_dir: Path) -> dict[str, np.ndarray]:
    newest = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    return {k: v for f in (newest / "agents").glob("*/weights.safetensors")
            for k, v in load_file(f).items()}  # fmt: skip


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    full = tmp_path / "full"
    r = subprocess.run(_cmd(full), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (full / "retrieval.png").is_file()
    run = tmp_path / "run"
    proc = subprocess.Popen(_cmd(run), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 300
    while not list((run / "checkpoints").glob("step_*")) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not (run / "results.json").exists()  # it died mid-run
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), f"resume={run}",
                        f"hydra.run.dir={tmp_path / 'log'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = _final(full), _final(run)
    assert a.keys() == b.keys() and a
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (full, run))
    assert ra["metrics"] == rb["metrics"] and ra["step"] == rb["step"] == 30
    assert ra["headline"] == "i2t_recall@1" and math.isfinite(ra["headline_value"])


# ----------------------------------------------------------------------------- acceptance
@pytest.mark.slow
def test_default_reaches_its_targets(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "arena=contrastive", "trainer.progress=false",
         f"hydra.run.dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "results.json").read_text())["metrics"]
    assert m["i2t_recall@1"] >= 0.9, m
    assert m["zeroshot_accuracy"] >= 5 * m["zeroshot_chance"], m
