"""The caption arena on the user's files: captions (JSONL, COCO) and speech (CSV, LibriSpeech).

Runs run.py's config (data=captions / chain=asr data=speech) for a few steps on small
written folders; resume with loader workers is bit-identical; each bad-data case stops
with one error naming the file and data.on_bad_file, or is skipped and counted.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from paddlecraft.agents import Agent
from paddlecraft.arenas.caption.files import SPLIT_FILE
from paddlecraft.arenas.engine.app import build_agents, build_arena, run_arena, run_from_config
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.engine.checkpoint import list_checkpoints
from paddlecraft.arenas.engine.rng import seed_everything
from tests.data_files import (
    class_image,
    tone,
    truncate,
    write_audio,
    write_coco,
    write_image,
    write_jsonl,
)

ROOT = Path(__file__).resolve().parents[1]
COLOURS = ("red", "green", "blue")
#: small nets and a short run: the captioner and listener see 16x16 images
SMALL = (
    "data.image_size=16", "arena.epochs=1", "arena.data.n_test=50", "arena.k=3",
    "arena.hops.captioner.steps=3", "arena.hops.captioner.batch_size=8",
    "arena.hops.listener.steps=2", "arena.hops.listener.batch_size=8",
    "agents.captioner.encoder.channels=[8]", "agents.listener.encoder.channels=[8]",
    "trainer.progress=false",
)  # fmt: skip


def caption_images(root: Path, n: int = 15) -> tuple[list[str], list[list[str]]]:
    """``n`` PNG/JPEG images under ``root/img`` with two captions each (colour words)."""
    files, caps = [], []
    for i in range(n):
        c = COLOURS[i % 3]
        name = f"img/{i:03d}{'.jpg' if i % 2 else '.png'}"
        write_image(root / name, class_image(i % 3, i, (10 + i % 4, 12)))
        files.append(name)
        caps.append([f"a {c} square", f"the square is {c} number {i % 5}"])
    return files, caps


def jsonl_folder(root: Path, n: int = 15) -> Path:
    files, caps = caption_images(root, n)
    rows = [{"image": f, "captions": cs} for f, cs in zip(files, caps)]
    return write_jsonl(root / "captions.jsonl", rows)


def _words_of(captions: list[str]) -> set[str]:
    return {w for c in captions for w in c.lower().split()}


def _split(run: Path) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {"train": [], "test": []}
    with open(run / SPLIT_FILE, newline="", encoding="utf-8") as f:
        for name, path, text in csv.reader(f, delimiter="\t"):
            out[name].append((path, text))
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "coco"])
def test_caption_arena_runs_on_caption_files(fmt, tmp_path, compose_config):
    if fmt == "jsonl":
        path = jsonl_folder(tmp_path)
    else:
        files, caps = caption_images(tmp_path)
        path = write_coco(tmp_path / "captions.json", files, caps)
    cfg = compose_config("arena=caption", "data=captions", f"data.path={path}", *SMALL)
    assert list(cfg.agents.captioner.image_shape) == [3, 16, 16]  # from the data config
    assert list(cfg.agents.listener.image_shape) == [3, 16, 16]
    score = run_from_config(cfg, tmp_path / "run")
    run = tmp_path / "run"
    m = json.loads((run / "results.json").read_text())["metrics"]
    assert 0.0 <= m["captioner_bleu4"] <= 1.0 and 0.0 <= m["listener_recall_at_1"] <= 1.0
    assert m["chain_accuracy"] == score and 0.0 <= score <= 1.0
    assert m["chance"] == pytest.approx(1 / 3) and m["bad_files_skipped"] == 0
    split = _split(run)
    train_imgs, test_imgs = {p for p, _ in split["train"]}, {p for p, _ in split["test"]}
    assert len(test_imgs) == 3 and len(train_imgs) == 12 and not train_imgs & test_imgs
    assert len(split["train"]) == 24  # every caption of every training image is a pair
    assert m["eval_items"] == 3
    ckpt = list_checkpoints(run)[-1]
    cap = Agent.load(ckpt / "agents" / "captioner")
    train_words = _words_of([t for _, t in split["train"]])
    assert set(cap.vocab.itos[4:]) == train_words  # the training captions' words, no others
    rows = (run / "test_outputs.tsv").read_text().splitlines()
    assert len(rows) == 4 and all(len(r.split("\t")) == 3 for r in rows)
    refs = json.loads((run / "hops.json").read_text())
    assert refs["test"]["captioner"]["bleu4"] == m["captioner_bleu4"]


def test_bleu_uses_every_reference():
    from paddlecraft.arenas.caption.files import bleu_multi

    hyps = ["a red square is here now", "the blue square is there now"]
    one = bleu_multi(hyps, [["a red square is here now"], ["x"]])
    both = bleu_multi(hyps, [["a red square is here now"], ["x", "the blue square is there now"]])
    assert both == pytest.approx(1.0) and one < 0.8


# ----------------------------------------------------------------------------- speech
WORDS = {"hi": 300.0, "yo": 900.0, "ok": 1500.0}  # each word a tone: learnable, short
ASR = (
    "arena=caption", "chain=asr", "data=speech", "arena.epochs=1", "arena.data.n_test=50",
    "arena.hops.recognizer.steps=3", "arena.hops.recognizer.batch_size=4",
    "agents.recognizer.encoder.channels=[8,8]", "agents.recognizer.encoder.hidden_size=16",
    "agents.recognizer.encoder.embedding_dim=16", "trainer.progress=false",
)  # fmt: skip


def clip(words: list[str], rate: int) -> np.ndarray:
    return np.concatenate([tone(0.3, rate, WORDS[w]) for w in words])


def speech_table(root: Path, n: int = 10, rate: int = 8000) -> Path:
    """``root/speech.csv`` (path,text) over WAV and FLAC clips at ``rate`` (resampled later)."""
    names = list(WORDS)
    lines = ["path,text"]
    for i in range(n):
        words = [names[i % 3], names[(i + 1) % 3]]
        f = f"clips/{i:02d}.{'flac' if i % 2 else 'wav'}"
        write_audio(root / f, clip(words, rate), rate)
        lines.append(f"{f},{' '.join(words).upper()}")
    (root / "speech.csv").write_text("\n".join(lines) + "\n")
    return root / "speech.csv"


def librispeech(root: Path, n: int = 8, rate: int = 16000) -> Path:
    """``root/<speaker>/<chapter>/`` FLAC clips and their ``*.trans.txt`` (LibriSpeech layout)."""
    names = list(WORDS)
    for spk in (19, 26):
        d = root / str(spk) / "198"
        lines = []
        for i in range(n // 2):
            words = [names[(i + spk) % 3], names[i % 3]]
            uid = f"{spk}-198-{i:04d}"
            write_audio(d / f"{uid}.flac", clip(words, rate), rate)
            lines.append(f"{uid} {' '.join(words).upper()}")
        (d / f"{spk}-198.trans.txt").write_text("\n".join(lines) + "\n")
    return root


def _wer_against_split(run: Path, m: dict) -> None:
    """WER/CER recomputed (jiwer) from the written outputs against the recorded test texts."""
    import jiwer

    rows = list(csv.reader(open(run / "test_outputs.tsv", encoding="utf-8"), delimiter="\t"))[1:]
    test = dict(_split(run)["test"])
    assert sorted(r[0] for r in rows) == sorted(test) and len(rows) == m["eval_items"]
    refs, hyps = [test[r[0]] for r in rows], [r[2] for r in rows]
    assert all(r[1] == test[r[0]] and r[1] == r[1].lower() for r in rows)
    assert m["recognizer_wer"] == pytest.approx(jiwer.wer(refs, hyps))
    assert m["recognizer_cer"] == pytest.approx(jiwer.cer(refs, hyps))


@pytest.mark.parametrize("layout", ["csv", "librispeech"])
def test_asr_chain_runs_on_speech_files(layout, tmp_path, compose_config):
    path = speech_table(tmp_path) if layout == "csv" else librispeech(tmp_path / "ls")
    cfg = compose_config(*ASR, f"data.path={path}")
    assert cfg.agents.recognizer.words is None  # composing reads no file: the data gives them
    run = tmp_path / "run"
    score = run_from_config(cfg, run)
    saved = OmegaConf.load(run / "config.yaml")  # filled from the built dataset's alphabet
    assert list(saved.agents.recognizer.words) == [" ", "h", "i", "k", "o", "y"]
    m = json.loads((run / "results.json").read_text())["metrics"]
    assert (
        m["recognizer_wer"] >= 0.0 and 0.0 <= m["recognizer_cer"] and score == m["chain_accuracy"]
    )
    assert m["eval_items"] == 2 and m["bad_files_skipped"] == 0
    _wer_against_split(run, m)
    rec = Agent.load(list_checkpoints(run)[-1] / "agents" / "recognizer")
    assert rec.chars and rec.sample_rate == 16000


def test_asr_uses_a_given_test_table(tmp_path, compose_config):
    train = speech_table(tmp_path / "a", n=8)
    test = speech_table(tmp_path / "b", n=3)
    run = tmp_path / "run"
    run_from_config(compose_config(*ASR, f"data.path={train}", f"data.test_path={test}"), run)
    split = _split(run)
    assert len(split["train"]) == 8 and all("/b/" in p for p, _ in split["test"])
    _wer_against_split(run, json.loads((run / "results.json").read_text())["metrics"])


# ----------------------------------------------------------------------------- resume
def _build(cfg):
    agents = build_agents(cfg)
    return agents, build_arena(cfg, agents)


def _weights(agents) -> dict[str, np.ndarray]:
    return {p.name: p.numpy() for a in agents.values() for p in a.parameters()}


def test_caption_files_resume_with_workers_is_bit_identical(tmp_path, compose_config):
    path = jsonl_folder(tmp_path, n=15)
    cfg = compose_config(
        "arena=caption", "data=captions", f"data.path={path}", "data.workers=2", *SMALL,
        "arena.epochs=2", "arena.hops.captioner.steps=4", "arena.hops.captioner.batch_size=4",
        "arena.hops.listener.steps=3", "arena.hops.listener.batch_size=4",
    )  # fmt: skip
    seed_everything(0)
    agents, full = _build(cfg)
    assert full._loader("captioner").workers == 2 and len(full._loader("captioner")) == 6
    out = run_arena(full, tmp_path / "full", standard_callbacks(progress=False, checkpoint_every=4))
    ref, ref_m = _weights(agents), out["metrics"]
    full.close()

    seed_everything(0)
    agents, part = _build(cfg)
    run_arena(part, tmp_path / "part", standard_callbacks(progress=False, checkpoint_every=4),
              max_steps=9)  # fmt: skip
    part.close()
    shutil.rmtree(list_checkpoints(tmp_path / "part")[0])  # "crash" after step 8: mid-epoch 2
    seed_everything(123)
    agents, resumed = _build(cfg)
    out = run_arena(resumed, tmp_path / "part", standard_callbacks(progress=False), resume=True)
    assert out["status"] == "finished" and out["step"] == 14  # (4 + 3) updates x 2 epochs
    got = _weights(agents)
    assert got.keys() == ref.keys() and len(got) > 0
    for k in ref:
        assert got[k].tobytes() == ref[k].tobytes(), k
    assert out["metrics"] == ref_m
    assert (tmp_path / "part" / SPLIT_FILE).read_bytes() == (
        tmp_path / "full" / SPLIT_FILE
    ).read_bytes()
    resumed.close()


# ----------------------------------------------------------------------------- bad data
def _main(cfg, run: Path, capsys) -> tuple[int, str]:
    """run.py's entry (main_entry): the exit code and the stderr line of a user error."""
    from paddlecraft.arenas.engine.app import main_entry

    with pytest.raises(SystemExit) as e:
        main_entry(cfg, run)
    return e.value.code, capsys.readouterr().err


def _bad_captions(tmp_path: Path, case: str) -> tuple[Path, str]:
    path = jsonl_folder(tmp_path)
    if case == "missing":
        rows = path.read_text() + json.dumps({"image": "img/gone.png", "caption": "a red one"})
        path.write_text(rows + "\n")
        return path, "gone.png: is referred to by a caption but does not exist"
    truncate(tmp_path / "img" / "004.png")
    return path, "004.png: is a truncated PNG"


@pytest.mark.parametrize("case", ["missing", "truncated"])
def test_bad_caption_image_stops_or_is_skipped(case, tmp_path, compose_config, capsys):
    path, problem = _bad_captions(tmp_path, case)
    args = ("arena=caption", "data=captions", f"data.path={path}", *SMALL)
    code, err = _main(compose_config(*args), tmp_path / "stop", capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert problem in err and "data.on_bad_file=skip" in err
    assert not (tmp_path / "stop" / "checkpoints").exists()  # before training started
    run_from_config(compose_config(*args, "data.on_bad_file=skip"), tmp_path / "skip")
    m = json.loads((tmp_path / "skip" / "results.json").read_text())["metrics"]
    assert m["bad_files_skipped"] == 1
    split = (tmp_path / "skip" / SPLIT_FILE).read_text()
    assert ("gone.png" if case == "missing" else "004.png") not in split


@pytest.mark.parametrize("case", ["truncated_audio", "outside_alphabet"])
def test_bad_speech_file_stops_or_is_skipped(case, tmp_path, compose_config, capsys):
    train = speech_table(tmp_path / "a", n=8)
    test = speech_table(tmp_path / "b", n=3)
    if case == "truncated_audio":
        truncate(tmp_path / "a" / "clips" / "02.wav")
        problem = "02.wav: is a truncated WAV file"
    else:  # a test transcript with a letter no training transcript has
        test.write_text(test.read_text().replace("HI YO", "HI ZED", 1))
        problem = "speech.csv, line 2: the transcript of"
    args = (*ASR, f"data.path={train}", f"data.test_path={test}")
    code, err = _main(compose_config(*args), tmp_path / "stop", capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert problem in err and "data.on_bad_file=skip" in err
    if case == "outside_alphabet":
        assert "['d', 'e', 'z']" in err and "data.loader.alphabet" in err
    run_from_config(compose_config(*args, "data.on_bad_file=skip"), tmp_path / "skip")
    m = json.loads((tmp_path / "skip" / "results.json").read_text())["metrics"]
    assert m["bad_files_skipped"] == 1
    assert m["eval_items"] == (2 if case == "outside_alphabet" else 3)


def test_run_py_reports_bad_caption_data_in_one_line(tmp_path):
    path, problem = _bad_captions(tmp_path, "missing")
    proc = subprocess.run(
        [sys.executable, "run.py", "arena=caption", "data=captions", f"data.path={path}",
         f"hydra.run.dir={tmp_path / 'run'}", *SMALL],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and problem in last and "data.on_bad_file=skip" in last


def test_too_few_test_images_for_k_fails_before_training(tmp_path, compose_config, capsys):
    path = jsonl_folder(tmp_path)  # 3 test images
    cfg = compose_config("arena=caption", "data=captions", f"data.path={path}", *SMALL, "arena.k=4")
    code, err = _main(cfg, tmp_path / "run", capsys)
    assert code == 2 and "arena.k=4" in err and "3 are evaluated" in err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_asr_learns_to_spell_tone_words(tmp_path, compose_config):
    """Characters through CTC from 8 kHz WAV/FLAC resampled to 16 kHz: 30 updates suffice."""
    path = speech_table(tmp_path, n=40)
    args = [a for a in ASR if "steps" not in a and "size" not in a and "encoder" not in a]
    cfg = compose_config(*args, f"data.path={path}", "arena.hops.recognizer.steps=30",
                         "arena.hops.recognizer.batch_size=16", "arena.lr_decay=none")  # fmt: skip
    run_from_config(cfg, tmp_path / "run")
    m = json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]
    assert m["eval_items"] == 8 and m["recognizer_cer"] <= 0.2 and m["recognizer_wer"] <= 0.4


def test_caption_files_with_a_pretrained_tokenizer(tmp_path, compose_config):
    """data.loader.tokenizer: the agents read and write its subword ids, saved with them."""
    from paddlecraft.encoders.tokenizer import SubwordTokenizer

    path = jsonl_folder(tmp_path)
    words = ["a", "the", "square", "is", "number", "re", "##d", "green", "blue", "0", "1", "2",
             "3", "4"]  # fmt: skip
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    cfg = compose_config("arena=caption", "data=captions", f"data.path={path}", *SMALL,
                         f"data.loader.tokenizer={vocab}")  # fmt: skip
    assert cfg.agents.captioner.words is None  # composing reads no file
    score = run_from_config(cfg, tmp_path / "run")
    saved = OmegaConf.load(tmp_path / "run" / "config.yaml")
    assert saved.agents.captioner.words == str(vocab) == saved.agents.listener.words
    m = json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]
    assert 0.0 <= m["captioner_bleu4"] <= 1.0 and 0.0 <= score <= 1.0
    cap = Agent.load(list_checkpoints(tmp_path / "run")[-1] / "agents" / "captioner")
    assert isinstance(cap.vocab, SubwordTokenizer) and len(cap.vocab) == 19
    ids = cap.encode_texts(["a red square"])  # "red" -> re ##d, then [SEP] ends it
    assert ids.tolist() == [[5, 10, 11, 7, 3]]
    assert (cap.decoder.bos_id, cap.decoder.eos_id, cap.decoder.pad_id) == (2, 3, 0)
    assert cap.vocab.decode(ids[0]) == "a red square"
