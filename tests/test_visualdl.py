"""VisualDL logging: scalars for every metric, media per modality, histograms, hparams."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from toy_arenas import Regressor, ToyArena

from paddlecraft.arenas import run_arena, standard_callbacks
from paddlecraft.arenas.engine import Audio, Image, Text
from paddlecraft.arenas.engine.visualdl import hparams_from_overrides

pytest.importorskip("visualdl")  # an optional extra; the test extra installs it


class MediaArena(ToyArena):
    """The toy regression arena, showing one item of each kind at every evaluation."""

    def media(self):
        t = np.arange(8000) / 8000.0
        return {
            "media/grid": Image(np.linspace(0, 1, 8 * 8 * 3, dtype=np.float32).reshape(8, 8, 3)),
            "media/tone": Audio((np.sin(2 * np.pi * 440 * t) * 16000).astype(np.int16), 8000),
            "media/caption": Text("a red circle left of a blue square"),
        }


def _run(tmp_path: Path) -> Path:
    arena = MediaArena({"reg": Regressor("reg", seed=0)}, epochs=2)
    cbs = standard_callbacks(
        visualdl=True,
        visualdl_histograms=True,
        progress=False,
        log_every=2,
        overrides=["agents.reg.lr=0.01", "arena.batch_size=8", "trainer.progress=false"],
    )
    run_arena(arena, tmp_path, cbs)
    return tmp_path / "visualdl"


EXPECTED = {
    "scalar": {"train/loss", "eval/neg_mse"},
    "image": {"media/grid"},
    "audio": {"media/tone"},
    "text": {"media/caption"},
    "histogram": {"params/reg.head.w_0", "params/reg.head.b_0"},
}


def test_run_writes_every_kind_of_record(tmp_path):
    from visualdl import LogReader

    (record,) = (_run(tmp_path)).glob("vdlrecords*")
    tags = LogReader(file_path=str(record)).get_tags()
    for kind, want in EXPECTED.items():
        assert want <= set(tags[kind]), (kind, tags)
    assert tags["hyper_parameters"]  # the run's overrides with the headline metric


def test_hparams_keep_experiment_settings_only():
    got = hparams_from_overrides(
        [
            "agents.g.lr=3e-4",
            "arena.n_critic=2",
            "+sweep=gan",
            "trainer.progress=false",
            "hydra/launcher=basic",
            "arena.loss=vanilla",
        ]
    )
    assert got == {"agents.g.lr": 3e-4, "arena.n_critic": 2, "arena.loss": "vanilla"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.loads(r.read().decode())
    assert body.get("status", 0) == 0, body
    return body["data"]


@pytest.mark.slow
def test_visualdl_server_reads_back_what_the_run_wrote(tmp_path):
    logdir = _run(tmp_path)
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "visualdl.server.app",
            "--logdir",
            str(logdir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/app/api"
        deadline = time.time() + 90
        while True:
            try:
                # {"<logdir>/<tag, '/' written as '%'>": kind}
                by_kind: dict[str, set] = {}
                for key, kind in _get(f"{base}/tags").items():
                    by_kind.setdefault(kind, set()).add(key.rsplit("/", 1)[1].replace("%", "/"))
                if all(kind in by_kind for kind in EXPECTED):
                    break
            except OSError:
                pass
            if time.time() > deadline or server.poll() is not None:
                pytest.fail(f"VisualDL server gave no tags (rc {server.poll()})")
            time.sleep(0.5)
        for kind, want in EXPECTED.items():
            assert want <= by_kind[kind], (kind, by_kind)
        hp = _get(f"{base}/hparams/indicators")
        names = {h["name"] for h in hp["hparams"]} | {m["name"] for m in hp["metrics"]}
        assert {"agents.reg.lr", "arena.batch_size", "eval/neg_mse"} <= names, hp
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow  # ~20 s: speech synthesis and a spoken chain evaluation
def test_caption_chain_media_has_sheet_texts_and_a_spoken_hop(make_scope, monkeypatch, tmp_path):
    from test_caption import TINY_CNN, TINY_DATA, TINY_DEC, TINY_SPEECH, TINY_SPEECH_DATA, TINY_TEXT

    from paddlecraft.agents import Captioner, Listener, Recognizer, Speaker
    from paddlecraft.arenas import CaptionArena
    from paddlecraft.arenas.engine.media import arena_media

    monkeypatch.setenv("PADDLECRAFT_CACHE", str(tmp_path / "speech-cache"))
    cap = Captioner(make_scope("cap"), encoder=TINY_CNN, decoder=TINY_DEC, seed=0)
    spk = Speaker(make_scope("spk"), voices="test")
    rec = Recognizer(make_scope("rec"), encoder=TINY_SPEECH, seed=0)
    lis = Listener(make_scope("lis"), encoder=TINY_CNN, text_encoder=TINY_TEXT, seed=0, dim=8)
    chain = [cap, spk, rec, lis]
    arena = CaptionArena(
        {a.name: a for a in chain},
        chain=[a.name for a in chain],
        data=TINY_DATA,
        speech=TINY_SPEECH_DATA,
        hops={h.name: {"steps": 1, "batch_size": 4} for h in (cap, rec, lis)},
    )
    assert arena_media(arena) == {}  # nothing to show before the first evaluation
    arena.evaluate()
    media = arena_media(arena)
    sheet, texts, hop = media["chain/telephone"], media["chain/texts"], media["chain/spoken_hop"]
    assert isinstance(sheet, Image) and sheet.array.dtype == np.uint8 and sheet.array.ndim == 3
    assert isinstance(texts, Text)
    table = texts.text.splitlines()
    assert table[0] == f"| truth | {cap.name} | {spk.name} | {rec.name} | {lis.name} |"
    assert len(table) == 2 + 4 and arena.world.test.texts[0] in table[2]
    assert isinstance(hop, Audio) and hop.sample_rate == spk.sample_rate and len(hop.samples)
    # the clip is the first item's: its length matches the speaker's note in that row
    assert f"{len(hop.samples) / spk.sample_rate:.1f} s)" in table[2].split(" | ")[2]
