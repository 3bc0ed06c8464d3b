"""CLIPTokenizer reads CLIP's BPE files and gives transformers.CLIPTokenizer's ids exactly.

The files are written here, laid out as OpenAI's: ``vocab.json`` holds the 256 byte symbols,
the same with ``</w>``, one piece per merge rule, then ``<|startoftext|>`` and
``<|endoftext|>`` last; the merge rules are learnt by ``tokenizers``' BPE trainer on a few
captions. In transformers 5, ``CLIPTokenizer`` and ``CLIPTokenizerFast`` are one class (the
Rust-backed one); both names are checked.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import transformers
from clip_kit import write_bpe_files

from paddlecraft.encoders import CLIPTokenizer

TRICKY = [
    "A photo of a RED circle!",
    "  two\tgreen\n\ntriangles  ",
    "the cat's hat isn't HERE, we'll see",
    "Café naïve 12345 3.14",
    "<|endoftext|> in the middle <|startoftext|>",
    "emoji 🙂 and ünïcödé ß",
    "",
    "Don't SHOUT... ok?!",
    "tab\tand\u00a0nbsp and e\u0301 (combining)",
    "circle " * 100,  # longer than 77 tokens: cut, the end token kept last
]


@pytest.fixture(scope="module")
def clip_files(tmp_path_factory):
    """A folder with vocab.json + merges.txt in OpenAI's CLIP layout."""
    return write_bpe_files(tmp_path_factory.mktemp("clip_tok"))


@pytest.mark.parametrize("reference", ["CLIPTokenizer", "CLIPTokenizerFast"])
def test_ids_match_transformers_on_tricky_strings(clip_files, reference):
    hf = getattr(transformers, reference).from_pretrained(str(clip_files))
    mine = CLIPTokenizer.from_files(clip_files)
    assert mine.bos_id == hf.bos_token_id and mine.eos_id == hf.eos_token_id == len(mine) - 1
    ids, mask = mine.encode_batch(TRICKY)
    want = hf(TRICKY, padding="max_length", truncation=True, max_length=77, return_tensors="np")
    assert ids.shape == (len(TRICKY), 77) and ids.dtype == np.int64
    np.testing.assert_array_equal(ids, want["input_ids"])
    np.testing.assert_array_equal(mask, want["attention_mask"])
    assert ids[-1, -1] == mine.eos_id and mask[-1].all()  # the long one: cut, <eot> last
    for text in TRICKY:  # one text, no padding
        assert mine.encode(text) == hf(text)["input_ids"]
    # shorter rows, and the file pieces really merge (not one id per byte)
    short, short_mask = mine.encode_batch(["a photo of a red circle"], max_len=10)
    assert short.shape == (1, 10) and short_mask.sum() == 8  # <sot>, six words, <eot>
    assert mine.decode(short[0]) == "a photo of a red circle"


def test_tokenizer_json_and_single_files_read_the_same(clip_files, tmp_path):
    hf = transformers.CLIPTokenizer.from_pretrained(str(clip_files))
    hf.save_pretrained(str(tmp_path))  # writes tokenizer.json
    assert (tmp_path / "tokenizer.json").is_file()
    from_json = CLIPTokenizer.from_files(tmp_path / "tokenizer.json")
    from_vocab = CLIPTokenizer.from_files(clip_files / "vocab.json")
    for tok in (from_json, from_vocab):
        np.testing.assert_array_equal(
            tok.encode_batch(TRICKY)[0], from_vocab.encode_batch(TRICKY)[0]
        )
    # open_clip pads with id 0 instead
    zero = CLIPTokenizer.from_files(clip_files, pad_token="!", context_length=16)
    ids, mask = zero.encode_batch(["a red circle"])
    assert ids.shape == (1, 16) and (ids[0][mask[0] == 0] == 0).all()


def test_file_errors(tmp_path, clip_files):
    with pytest.raises(FileNotFoundError, match="no tokenizer.json or vocab.json"):
        CLIPTokenizer.from_files(tmp_path)
    (tmp_path / "vocab.json").write_text((clip_files / "vocab.json").read_text())
    with pytest.raises(FileNotFoundError, match="merges.txt"):
        CLIPTokenizer.from_files(tmp_path)
    (tmp_path / "merges.txt").write_text("a\n")
    with pytest.raises(ValueError, match="two pieces"):
        CLIPTokenizer.from_files(tmp_path)
    (tmp_path / "merges.txt").write_text("")
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}))
    with pytest.raises(ValueError, match=r"no <\|startoftext\|> token"):
        CLIPTokenizer.from_files(tmp_path)
