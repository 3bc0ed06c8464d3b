"""SubwordTokenizer on a tiny WordPiece vocab.txt and a BPE tokenizer.json trained here."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from paddlecraft.encoders.tokenizer import SubwordTokenizer

WORDPIECE = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "red", "blue", "circle",
             "square", "left", "of", "the", "is", "##s", "big", "##ger"]  # fmt: skip
SENTENCES = [
    "a red circle left of a blue square",
    "the blue squares are bigger",
    "two red circles",
    "a big square is left of the circle",
]


@pytest.fixture
def wordpiece(tmp_path) -> SubwordTokenizer:
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(WORDPIECE) + "\n")
    return SubwordTokenizer.from_file(path)


@pytest.fixture
def bpe_file(tmp_path) -> str:
    """A byte-level BPE tokenizer.json trained on SENTENCES with <pad> <s> </s> <unk>."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(SENTENCES, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return str(path)


def test_wordpiece_vocab_txt(wordpiece: SubwordTokenizer) -> None:
    tok = wordpiece
    ids = {w: i for i, w in enumerate(WORDPIECE)}
    assert (tok.pad_id, tok.bos_id, tok.eos_id, len(tok)) == (0, 2, 3, len(WORDPIECE))
    assert tok.encode("A red Circles") == [2, ids["a"], ids["red"], ids["circle"], ids["##s"], 3]
    assert tok.encode("green", add_special_tokens=False) == [ids["[UNK]"]]
    batch, mask = tok.encode_batch(["a red circle", "the blue squares is bigger"])
    assert batch.dtype == np.int64 and mask.dtype == np.int64 and batch.shape == (2, 9)
    assert mask.tolist() == [[1] * 5 + [0] * 4, [1] * 9]
    assert (batch[0, 5:] == tok.pad_id).all()
    assert tok.decode_batch(batch) == ["a red circle", "the blue squares is bigger"]
    cut, cut_mask = tok.encode_batch(["the blue squares is bigger"], max_len=4)
    assert cut.tolist() == [[2, ids["the"], ids["blue"], 3]] and cut_mask.all()
    targets = tok.encode_targets(["a red circle", "blue"])
    assert targets.tolist() == [[ids["a"], ids["red"], ids["circle"], 3], [ids["blue"], 3, 0, 0]]
    assert tok.decode([ids["blue"], 3, ids["red"]]) == "blue"  # stops at [SEP]
    with pytest.raises(ValueError, match="outside"):
        tok.decode([99])
    with pytest.raises(TypeError, match="wrap it"):
        tok.encode_batch("a red circle")


def test_tokenizer_json_trained_bpe(bpe_file: str) -> None:
    tok = SubwordTokenizer.from_file(bpe_file)
    assert (tok.pad_token, tok.bos_token, tok.eos_token) == ("<pad>", "<s>", "</s>")
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    ids, mask = tok.encode_batch(SENTENCES)
    assert (ids[:, 0] == 1).all() and mask.sum(axis=1).min() >= 3
    assert tok.decode_batch(ids) == SENTENCES
    lengths = mask.sum(axis=1)
    assert (ids[np.arange(len(ids)), lengths - 1] == 2).all()  # every row ends with </s>
    # subwords: a word never seen whole is split into known pieces, and comes back intact
    assert tok.decode(tok.encode("circles left")) == "circles left"
    assert len(tok.encode("squarecircle", add_special_tokens=False)) >= 2
    targets = tok.encode_targets(SENTENCES[:2])
    assert tok.decode_batch(targets) == SENTENCES[:2] and (targets[:, 0] != 1).all()


def test_json_round_trip_and_errors(bpe_file: str, tmp_path) -> None:
    tok = SubwordTokenizer.from_file(tmp_path)  # the folder: finds tokenizer.json
    again = SubwordTokenizer.from_json(json.loads(json.dumps(tok.to_json())))
    np.testing.assert_array_equal(again.encode_batch(SENTENCES)[0], tok.encode_batch(SENTENCES)[0])
    assert again.eos_id == tok.eos_id
    with pytest.raises(ValueError, match="pad_token"):
        SubwordTokenizer.from_file(bpe_file, pad_token="[PAD]")
    with pytest.raises(ValueError, match="not a paddlecraft-subword-1"):
        SubwordTokenizer.from_json({"format": "other"})
    with pytest.raises(FileNotFoundError):
        SubwordTokenizer.from_file(tmp_path / "missing.json")
