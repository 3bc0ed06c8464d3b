"""``paddlecraft feed``: reading the image_folder / captions layouts in sending order, and
sending a folder to a stream run over HTTP (a loopback uvicorn stand-in for the live
server, tests/live_fake.py), resuming from the run's count, ending the stream."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from paddlecraft.arenas.stream import SampleLog
from paddlecraft.arenas.stream.log import decode
from paddlecraft.arenas.stream.store import LOG_FILE
from paddlecraft.cli import main as cli_main
from paddlecraft.feed import caption_items, folder_items
from tests.live_fake import FakeServer
from tests.stream_kit import StreamRun, make_arena


def _digits_folder(root: Path, n: int, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """``n`` sklearn digits as 16x16 PNGs under root/<label>/<arrival>.png; returns the
    (label, 8x8 uint8 image) pairs in arrival order."""
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))[:n]
    out = []
    for rank, i in enumerate(order):
        img8 = np.round(d.images[i] / 16 * 255).astype(np.uint8)
        folder = root / str(d.target[i])
        folder.mkdir(parents=True, exist_ok=True)
        big = cv2.resize(img8, (16, 16), interpolation=cv2.INTER_NEAREST)
        cv2.imwrite(str(folder / f"{rank:05d}.png"), big)
        out.append((str(d.target[i]), img8))
    return out


def test_folder_and_caption_order(tmp_path):
    for cls, names in {"cat": ["003.png", "001.png"], "dog": ["002.jpg", "001.png"]}.items():
        (tmp_path / "f" / cls).mkdir(parents=True)
        for n in names:
            (tmp_path / "f" / cls / n).write_bytes(b"x")
    (tmp_path / "f" / "cat" / "notes.txt").write_text("skip me")
    got = [(p.name, c) for p, c in folder_items(tmp_path / "f")]
    # by file name across the classes, ties by class
    assert got == [("001.png", "cat"), ("001.png", "dog"), ("002.jpg", "dog"), ("003.png", "cat")]
    shuffled = [(p.name, c) for p, c in folder_items(tmp_path / "f", shuffle=3)]
    assert sorted(shuffled) == sorted(got)
    assert shuffled == [(p.name, c) for p, c in folder_items(tmp_path / "f", shuffle=3)]
    lines = [{"image": "img/b.png", "caption": "two"}, {"image": "img/a.png", "caption": "one"}]
    f = tmp_path / "caps.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines))
    assert [(p, c) for p, c in caption_items(f)] == [
        (tmp_path / "img/b.png", "two"),
        (tmp_path / "img/a.png", "one"),
    ]


def test_feed_sends_from_the_runs_count_then_ends(tmp_path, make_scope, capsys):
    pairs = _digits_folder(tmp_path / "digits", 40)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    arena = make_arena(make_scope("f"), warmup=8)
    run = StreamRun(arena, run_dir)
    try:
        with FakeServer(arena.live_routes(run.live), run_dir):
            # a feed cut short earlier: the run has the first 15 already
            first = folder_items(tmp_path / "digits")[:15]
            for i, (p, label) in enumerate(first):
                img = cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)
                px = (cv2.resize(img, (8, 8), interpolation=cv2.INTER_AREA) / 255).tolist()
                r = run.post("samples", json={"pixels": [px], "label": label, "index": i})
                assert r.status_code == 200
            assert cli_main(["feed", str(run_dir), str(tmp_path / "digits"), "--no-progress"]) == 0
            assert "sent 25 samples; the run has 40" in capsys.readouterr().out
            # again: nothing left to send; then end the stream
            assert cli_main(["feed", str(run_dir), str(tmp_path / "digits"), "--end"]) == 0
            assert "sent 0 samples; the run has 40 (stream ended)" in capsys.readouterr().out
            run.join()
            # a finished stream takes no more
            assert cli_main(["feed", str(run_dir), "--end"]) == 0
    finally:
        run.post("end")
        run.join()
    assert run.error is None and run.result["status"] == "finished"
    payloads, ended = SampleLog(run_dir / LOG_FILE).open()
    assert ended and len(payloads) == 40
    stored = [decode(p) for p in payloads]
    assert [str(int(s["label"])) for s in stored] == [label for label, _ in pairs]
    # the 16x16 files came back to the run's 8x8 (INTER_AREA of a 2x nearest upscale: exact)
    for s, (_, img8) in zip(stored[15:], pairs[15:], strict=True):
        np.testing.assert_array_equal(np.round(s["image"][0] * 255).astype(np.uint8), img8)


def test_feed_mistakes_are_one_line(tmp_path, make_scope, capsys):
    assert cli_main(["feed", str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "live.json" in err[0]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    arena = make_arena(make_scope("f"), warmup=1000)
    run = StreamRun(arena, run_dir)
    bad = tmp_path / "bad" / "7"
    bad.mkdir(parents=True)
    (bad / "00000.png").write_bytes(b"not a png")
    (tmp_path / "cats" / "cat").mkdir(parents=True)
    cv2.imwrite(str(tmp_path / "cats" / "cat" / "a.png"), np.zeros((8, 8), np.uint8))
    try:
        with FakeServer(arena.live_routes(run.live), run_dir):
            cases = [
                (tmp_path / "nowhere", "no such folder"),
                (run_dir / "live.json", "one sub-folder per class"),
                (tmp_path / "bad", "00000.png"),
                (tmp_path / "cats", "unknown label 'cat'"),
            ]
            for path, needle in cases:
                assert cli_main(["feed", str(run_dir), str(path), "--no-progress"]) == 2
                err = capsys.readouterr().err.strip().splitlines()
                assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err
            assert run.count() == 0
            live = json.loads((run_dir / "live.json").read_text())
            (run_dir / "live.json").write_text(json.dumps({**live, "token": "wrong"}))
            assert cli_main(["feed", str(run_dir), "--end"]) == 2
            assert "HTTP 401" in capsys.readouterr().err
    finally:
        run.post("end")
        run.join()
