"""Caption files (JSONL, COCO JSON) and speech transcripts (CSV/TSV, LibriSpeech): readers, bad data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from paddlecraft.craftdata import BadDataError, BatchLoader, load_captions, load_transcripts
from paddlecraft.craftdata.transcripts import read_audio
from tests.data_files import (
    class_image,
    tone,
    truncate,
    write_audio,
    write_coco,
    write_image,
    write_jsonl,
)

CAPTIONS = [["a red thing", "red on grey"], ["a green thing"], ["a blue thing", "blue again"]]


@pytest.fixture
def caption_dir(tmp_path: Path) -> Path:
    for i in range(6):
        ext = "jpg" if i % 2 else "png"
        write_image(tmp_path / "img" / f"{i}.{ext}", class_image(i % 3, i, (10, 14)))
    return tmp_path


def _rows(n: int = 6) -> list[dict]:
    rows = []
    for i in range(n):
        caps = CAPTIONS[i % 3]
        name = f"img/{i}.{'jpg' if i % 2 else 'png'}"
        rows.append({"image": name, "caption": caps[0]})
        rows.extend({"image": name, "caption": c} for c in caps[1:])  # more lines, same image
    return rows


def test_jsonl_pairs_split_by_image_vocab_from_train(caption_dir: Path) -> None:
    data = load_captions(str(write_jsonl(caption_dir / "caps.jsonl", _rows())), image_size=8,
                         test_fraction=0.34, max_len=6, workers=0)  # fmt: skip
    assert len(data.train.images) == 4 and len(data.test.images) == 2
    assert not set(data.train.images.tolist()) & set(data.test.images.tolist())
    assert len(data.train) + len(data.test) == 10  # every caption is one pair
    train_words = {w for i in range(len(data.train)) for w in data.train.caption(i).split()}
    assert set(data.vocab.itos[4:]) == train_words  # built from the training split only
    img, ids, which = data.train.load(0, None)
    assert img.shape == (3, 8, 8) and ids.shape == (6,) and ids[0] == data.vocab.bos_id
    assert data.vocab.decode(ids) == data.train.caption(0)
    refs = data.test.references()
    assert sorted(len(r) for r in refs) == sorted(len(CAPTIONS[i % 3]) for i in range(6) if any(
        data.test.images[k].decode().endswith(f"/{i}.{'jpg' if i % 2 else 'png'}")
        for k in range(2)))  # fmt: skip
    batches = list(BatchLoader(data.train, 2, seed=1, workers=2).epoch(0))  # >= 4: workers
    assert [b[1].shape for b in batches][0] == (2, 6) and sum(len(b[0]) for b in batches) == len(
        data.train
    )


def test_coco_json_with_image_root(caption_dir: Path) -> None:
    files = [f"{i}.{'jpg' if i % 2 else 'png'}" for i in range(6)]
    ann = write_coco(caption_dir / "captions.json", files, [CAPTIONS[i % 3] for i in range(6)])
    data = load_captions(str(ann), image_root=str(caption_dir / "img"), workers=0)
    assert len(data.train) + len(data.test) == 10
    assert data.train.load(0, None)[0].shape == (3, 32, 32)


def test_pretrained_tokenizer_from_vocab_txt(caption_dir: Path) -> None:
    words = "[PAD] [UNK] [CLS] [SEP] a red green blue thing on grey again".split()
    (caption_dir / "vocab.txt").write_text("\n".join(words) + "\n")
    src = write_jsonl(caption_dir / "caps.jsonl", _rows())
    data = load_captions(str(src), tokenizer=str(caption_dir / "vocab.txt"), max_len=8, workers=0)
    _, ids, _ = data.train.load(0, None)
    assert ids[0] == words.index("[CLS]") and words.index("[SEP]") in ids.tolist()
    assert data.vocab.decode(ids) == data.train.caption(0)
    with pytest.raises(BadDataError, match=r"data.tokenizer='.*nope.txt'.*leave it unset"):
        load_captions(str(src), tokenizer=str(caption_dir / "nope.txt"), workers=0)


def test_caption_of_missing_image_stop_or_skip(caption_dir: Path) -> None:
    rows = [*_rows(), {"image": "img/nope.png", "caption": "a ghost"}]
    src = write_jsonl(caption_dir / "caps.jsonl", rows)
    missing = caption_dir / "img" / "nope.png"
    with pytest.raises(BadDataError, match=rf"{missing}: is referred to by a caption but does "
                       r"not exist \(in .*caps.jsonl\).*data.on_bad_file=skip"):  # fmt: skip
        load_captions(str(src), workers=0)
    data = load_captions(str(src), workers=0, on_bad_file="skip")
    assert list(data.bad_files.skipped) == [str(missing)]
    assert len(data.train) + len(data.test) == 10


def test_truncated_image_and_bad_line(caption_dir: Path) -> None:
    truncate(caption_dir / "img" / "1.jpg")
    src = write_jsonl(caption_dir / "caps.jsonl", _rows())
    with pytest.raises(BadDataError, match=r"1.jpg: is a truncated JPEG"):
        load_captions(str(src), workers=0)
    src.write_text(src.read_text() + '{"img": "x.png"}\n')
    with pytest.raises(BadDataError, match=r"caps.jsonl, line 11: expected a JSON object"):
        load_captions(str(src), workers=0, on_bad_file="skip")


# ---------------------------------------------------------------- speech

TEXTS = ["hello there", "good day", "see you", "one two", "hi there"]
ABC = "abcdefghijklmnopqrstuvwxyz "


def _speech(tmp_path: Path, sep: str = ",") -> Path:
    rows = ["path" + sep + "text"]
    for i, text in enumerate(TEXTS):
        name = f"clips/{i}.{'flac' if i % 2 else 'wav'}"
        write_audio(tmp_path / name, tone(0.2 + 0.05 * i, 8000 if i % 2 else 22050, 300 + i), 8000
                    if i % 2 else 22050)  # fmt: skip
        rows.append(f"{name}{sep}{text}")
    table = tmp_path / ("list.tsv" if sep == "\t" else "list.csv")
    table.write_text("\n".join(rows) + "\n")
    return table


@pytest.mark.parametrize("sep", [",", "\t"])
def test_table_of_wav_and_flac_resampled(tmp_path: Path, sep: str) -> None:
    data = load_transcripts(str(_speech(tmp_path, sep)), test_fraction=0.4, sample_rate=16000,
                            alphabet=ABC, workers=0)  # fmt: skip
    assert len(data.train) == 3 and len(data.test) == 2
    for split in (data.train, data.test):
        for i in range(len(split)):
            k = TEXTS.index(split.text(i))
            wave, ids = split.load(i, None)
            assert abs(len(wave) - round((0.2 + 0.05 * k) * 16000)) <= 1  # resampled to 16 kHz
            assert wave.dtype == np.float32 and 0.45 < np.abs(wave).max() < 0.55
            assert "".join(data.alphabet[j - 1] for j in ids) == split.text(i)


def test_librispeech_layout(tmp_path: Path) -> None:
    chapter = tmp_path / "ls" / "19" / "198"
    for i in range(len(TEXTS)):
        write_audio(chapter / f"19-198-{i:04d}.flac", tone(0.1, 16000), 16000)
    lines = [f"19-198-{i:04d} {t.upper()}" for i, t in enumerate(TEXTS)]
    (chapter / "19-198.trans.txt").write_text("\n".join(lines) + "\n")
    data = load_transcripts(str(tmp_path / "ls"), test_fraction=0.2, alphabet=ABC, workers=0)
    assert len(data.train) == 4 and {data.test.text(0)} <= set(TEXTS)
    (waves, lens, ids, id_lens), *_ = BatchLoader(data.train, 4, workers=0).epoch(0)
    assert waves.shape == (4, 1600) and lens.tolist() == [1600] * 4
    assert ids.shape[0] == 4 and sorted(id_lens.tolist()) == sorted(
        len(data.train.text(i)) for i in range(4)
    )
    one_by_one = list(BatchLoader(data.train, 1, workers=2).epoch(0))  # 4 batches: workers
    assert sorted(int(b[3][0]) for b in one_by_one) == sorted(id_lens.tolist())


def test_speech_bad_data_cases(tmp_path: Path) -> None:
    table = _speech(tmp_path)
    truncate(tmp_path / "clips" / "2.wav")
    with pytest.raises(BadDataError, match=r"2.wav: is a truncated WAV file.*on_bad_file=skip"):
        load_transcripts(str(table), alphabet=ABC, workers=0)
    skip = load_transcripts(str(table), alphabet=ABC, workers=0, on_bad_file="skip")
    assert len(skip.train) + len(skip.test) == 4 and len(skip.bad_files) == 1
    with pytest.raises(BadDataError, match=r"list.csv, line 2: the transcript of .* has "
                       r"characters \['e', 'h', 'l', 'o', 'r', 't'\] outside the vocabulary "
                       r"'abc '; set data.loader.alphabet"):  # fmt: skip
        load_transcripts(str(table), alphabet="abc ", workers=0)
    (tmp_path / "clips" / "1.flac").unlink()
    with pytest.raises(BadDataError, match=r"1.flac: cannot be read"):
        load_transcripts(str(table), alphabet=ABC, workers=0)
    with pytest.raises(BadDataError, match=r"data.path='.*nowhere.csv': expected a .csv/.tsv"):
        load_transcripts(str(tmp_path / "nowhere.csv"))


def test_alphabet_from_training_transcripts(tmp_path: Path) -> None:
    table = _speech(tmp_path)
    with pytest.raises(BadDataError, match=r"outside the vocabulary .*; set data.loader.alphabet \(or "
                       r"add them to training\)"):  # fmt: skip
        load_transcripts(str(table), test_fraction=0.4, workers=0)  # test has unseen letters
    data = load_transcripts(str(table), test_fraction=0.4, workers=0, on_bad_file="skip")
    assert data.alphabet == "".join(sorted({c for i in range(3) for c in data.train.text(i)}))
    assert len(data.test) + len(data.bad_files) == 2 and len(data.bad_files) >= 1


def test_truncated_flac_found_when_decoded(tmp_path: Path) -> None:
    path = write_audio(tmp_path / "a.flac", tone(1.0, 16000), 16000)
    truncate(path, 0.5)
    with pytest.raises(ValueError, match="truncated|cannot be decoded"):
        read_audio(path, 16000)
