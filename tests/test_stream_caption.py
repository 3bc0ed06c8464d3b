"""arena=caption data=stream: the composed config builds the stream caption arena; pairs
POSTed while it trains are learned by the captioner and the listener; predict answers a
caption; a label where a caption belongs is refused."""

from __future__ import annotations

import cv2
import numpy as np

from paddlecraft.arenas.engine.app import build_agents, build_arena, build_data
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.stream import StreamCaptionArena
from paddlecraft.craftdata.shapes import all_scenes, caption_of, draw_scene
from tests.stream_kit import StreamRun


def test_caption_stream_trains_evaluates_and_predicts(compose_config, tmp_path):
    cfg = compose_config(
        "arena=caption", "data=stream", "data.loader.live=true", "data.image_size=16",
        "data.loader.warmup=16", "data.loader.holdout_every=4", "arena.hops.captioner.batch_size=8",
    )  # fmt: skip
    seed_everything(0)
    data = build_data(cfg)
    arena = build_arena(cfg, build_agents(cfg, data), data)
    assert isinstance(arena, StreamCaptionArena)
    assert cfg.agents.captioner.words == list(arena.data.words)  # filled from the stream
    rng = np.random.default_rng(0)
    scenes = all_scenes()
    pairs = []
    for i in rng.permutation(len(scenes))[:40]:
        img = cv2.resize(draw_scene(scenes[i], rng), (16, 16), interpolation=cv2.INTER_AREA)
        pairs.append(
            {"pixels": (img.transpose(2, 0, 1) / 255).tolist(), "caption": caption_of(scenes[i])}
        )
    run = StreamRun(arena, tmp_path)
    try:
        r = run.post("samples", json={"pixels": pairs[0]["pixels"], "label": 1})
        assert r.status_code == 400 and 'no "caption"' in r.json()["error"]
        run.send(pairs[:20], end=False)
        r = run.post("predict", json={"pixels": pairs[0]["pixels"]})
        assert r.status_code == 200, r.text
        said = r.json()["predictions"][0]["caption"]
        assert isinstance(said, str) and set(said.split()) <= set(arena.data.words)
        run.send(pairs)
    finally:
        run.post("end")
        run.join()
    assert run.error is None, run.error
    res = run.result
    assert res["status"] == "finished" and res["step"] == 40 - 16 + 1
    m = res["metrics"]
    assert m["test_samples"] == 10 and m["train_samples"] == 40
    for key in ("chain_accuracy", "listener_accuracy", "caption_exact", "caption_bleu"):
        assert 0.0 <= m[key] <= 1.0, key
