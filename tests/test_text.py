"""Tests for the text encoders (encoders.vocab, text_encoder, text_decoder): Vocab, TextEncoder (GRU / Transformer), TextDecoder decoding.

``scope`` / ``make_scope`` come from conftest.py: a live encoder's scope cannot be reused.
"""

from __future__ import annotations

import json

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

from paddlecraft.encoders import EncoderInputError, TextDecoder, TextEncoder, Vocab
from paddlecraft.encoders.vocab import BOS, EOS, PAD, UNK

SENTENCES = [
    "a red circle",
    "the blue square is big",
    "a green triangle left",
    "two small dots",
    "the red square right",
    "one big blue circle",
    "green dots above",
    "a small triangle",
]


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.build(SENTENCES)


@pytest.fixture(scope="module")
def trained(vocab: Vocab) -> tuple[TextDecoder, np.ndarray, np.ndarray]:
    """A decoder trained to say SENTENCES[i] given one-hot(i): (decoder, cond, targets)."""
    paddle.seed(0)
    n = len(SENTENCES)
    cond = np.eye(n, dtype=np.float32)
    targets = vocab.encode_batch(SENTENCES)
    dec = TextDecoder("t_trained_decoder", len(vocab), n, embed_dim=32, hidden_size=64, max_len=10)
    dec.build()
    opt = paddle.optimizer.Adam(learning_rate=1e-2, parameters=dec.parameters())
    for _ in range(150):
        loss = dec.loss(cond, targets)
        loss.backward()
        opt.step()
        opt.clear_grad()
    return dec, cond, targets


def tokens_for(vocab: Vocab, texts: list[str], max_len: int | None = None) -> paddle.Tensor:
    return paddle.to_tensor(vocab.encode_batch(texts, max_len=max_len))


# ----------------------------------------------------------------------------- Vocab
def test_vocab_specials_and_round_trip(vocab: Vocab) -> None:
    assert vocab.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (PAD, BOS, EOS, UNK)
    assert len(vocab) == 4 + len({w for s in SENTENCES for w in s.split()})
    for s in SENTENCES + ["  The RED   circle  "]:
        ids = vocab.encode(s)
        assert ids[-1] == EOS and vocab.decode(ids) == Vocab.normalize(s)
    assert vocab.encode("red", add_bos=True, add_eos=False) == [BOS, vocab.stoi["red"]]
    assert vocab.encode("purple circle") == [UNK, vocab.stoi["circle"], EOS]
    assert vocab.decode([BOS, vocab.stoi["red"], PAD, EOS, vocab.stoi["blue"]]) == "red"
    # most frequent first, ties alphabetical; rebuilding gives the same ids
    assert vocab.itos[4] == "a" and Vocab.build(list(reversed(SENTENCES))) == vocab
    assert "dots" not in Vocab.build(SENTENCES, min_freq=3)
    with pytest.raises(TypeError):
        Vocab.build("a red circle")


def test_vocab_batches_and_json(vocab: Vocab) -> None:
    batch = vocab.encode_batch(SENTENCES[:3])
    assert batch.dtype == np.int64 and batch.shape == (3, 6)
    assert batch[0, 3] == EOS and (batch[0, 4:] == PAD).all()
    assert vocab.decode_batch(batch) == SENTENCES[:3]
    assert vocab.decode_batch(paddle.to_tensor(batch)) == SENTENCES[:3]
    cut = vocab.encode_batch(["the blue square is big"], max_len=3)
    assert cut.tolist() == [[vocab.stoi["the"], vocab.stoi["blue"], EOS]]
    assert vocab.encode_batch(["a"], max_len=5).shape == (1, 5)
    again = Vocab.from_json(json.loads(json.dumps(vocab.to_json())))
    assert again == vocab and again.stoi == vocab.stoi
    with pytest.raises(ValueError):
        Vocab.from_json({"format": "paddlecraft-vocab-1", "tokens": ["a", "b"]})


# ----------------------------------------------------------------------------- TextEncoder
@pytest.mark.parametrize("arch", ["gru", "transformer"])
def test_text_encoder_shapes_and_names(scope: str, make_scope, vocab: Vocab, arch: str) -> None:
    enc = TextEncoder(scope, len(vocab), embed_dim=16, hidden_size=24, arch=arch, num_classes=5)
    outs = enc.forward_all(tokens_for(vocab, SENTENCES))
    assert enc.output_names == ("prediction", "pooled", "hidden")
    assert outs["pooled"].shape == [8, 24] and outs["prediction"].shape == [8, 5]
    assert outs["hidden"].shape == [8, tokens_for(vocab, SENTENCES).shape[1], 24]
    assert enc.feature_dim == 24
    assert enc(tokens_for(vocab, SENTENCES)).shape == [8, 5]
    want = {"gru": ["embedding", "rnn"], "transformer": ["embedding", "position", "transformer"]}
    assert enc.logical_names == [*want[arch], "projection", "prediction"]
    for logical, params in enc.named_logical_params().items():
        assert params
        for p in params:
            assert p.name.startswith(f"{scope}.{logical}."), p.name
    assert enc.get_param("embedding")["embedding"][0].name == f"{scope}.embedding.w_0"
    plain = TextEncoder(make_scope(), len(vocab), embed_dim=16, hidden_size=24, arch=arch)
    assert plain.output_names == ("pooled", "hidden")
    assert plain(tokens_for(vocab, SENTENCES)).shape == [8, 24]


@pytest.mark.parametrize("arch", ["gru", "transformer"])
def test_text_encoder_padding_invariance(scope: str, vocab: Vocab, arch: str) -> None:
    paddle.seed(1)
    enc = TextEncoder(scope, len(vocab), embed_dim=16, hidden_size=24, arch=arch, num_layers=2)
    short = enc(tokens_for(vocab, SENTENCES)).numpy()
    long = enc(tokens_for(vocab, SENTENCES, max_len=20)).numpy()
    alone = np.concatenate([enc(tokens_for(vocab, [s])).numpy() for s in SENTENCES])
    np.testing.assert_allclose(long, short, atol=1e-5)
    np.testing.assert_allclose(alone, short, atol=1e-5)
    assert np.abs(short[0] - short[1]).max() > 1e-3  # different sentences differ


@pytest.mark.parametrize("arch", ["gru", "transformer"])
def test_a_batch_of_empty_texts_embeds_like_empty_texts_beside_others(
    scope: str, vocab: Vocab, arch: str
) -> None:
    """Tokens [B, 0] (a recognizer that heard nothing in the whole batch) give each row
    what an empty text gets in a batch with others; Paddle's GRU crashed the process on a
    zero-length sequence."""
    enc = TextEncoder(scope, len(vocab), embed_dim=16, hidden_size=24, arch=arch)
    tokens = paddle.to_tensor(vocab.encode_batch(["", ""], add_eos=False))
    assert tokens.shape == [2, 0]
    empty = enc.forward_all(tokens)
    pair = vocab.encode_batch(["", SENTENCES[0]], add_eos=False)
    beside = enc.forward_all(paddle.to_tensor(pair))["pooled"].numpy()
    assert empty["pooled"].shape == [2, 24] and np.isfinite(empty["pooled"].numpy()).all()
    np.testing.assert_allclose(empty["pooled"].numpy()[0], beside[0], atol=1e-6)
    assert empty["hidden"].shape == [2, 1, 24] and not empty["hidden"].numpy().any()


def test_text_encoder_input_errors(scope: str, make_scope, vocab: Vocab) -> None:
    enc = TextEncoder(
        scope, len(vocab), embed_dim=16, hidden_size=24, arch="transformer", max_len=8
    )
    tokens = vocab.encode_batch(SENTENCES)
    with pytest.raises(EncoderInputError, match=rf"TextEncoder\('{scope}'\).*'tokens'"):
        enc(tokens.astype(np.float32))
    with pytest.raises(EncoderInputError, match="max_len"):
        enc(vocab.encode_batch(SENTENCES, max_len=9))
    with pytest.raises(EncoderInputError, match="ids must be in"):
        enc(tokens + len(vocab))
    with pytest.raises(ValueError, match="arch"):
        TextEncoder(make_scope(), len(vocab), arch="lstm")


def test_text_encoder_prediction_gradient(scope: str, vocab: Vocab) -> None:
    enc = TextEncoder(scope, len(vocab), embed_dim=16, hidden_size=24, num_classes=3)
    logits = enc(tokens_for(vocab, SENTENCES))
    loss = F.cross_entropy(logits, paddle.to_tensor(np.arange(8) % 3).unsqueeze(-1)).mean()
    (want,) = paddle.grad(loss, logits, retain_graph=True)
    loss.backward()
    got = enc.get_gradient("prediction")["prediction"][0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-8)
    # "embedding" names both an output and a layer here; the output wins, so ask by params
    table = enc.get_param("embedding")
    (grad,) = enc.get_gradient(table)[f"{scope}.embedding.w_0"]
    np.testing.assert_array_equal(grad.numpy(), table["embedding"][0].grad.numpy())


# ----------------------------------------------------------------------------- TextDecoder
def test_text_decoder_shapes_names_and_errors(scope: str, vocab: Vocab) -> None:
    dec = TextDecoder(scope, len(vocab), cond_dim=6, embed_dim=16, hidden_size=24)
    targets = vocab.encode_batch(SENTENCES)
    inputs = dec.teacher_forcing_inputs(targets)
    assert (inputs[:, 0] == BOS).all() and (inputs[:, 1:] == targets[:, :-1]).all()
    tf = dec.teacher_forcing_inputs(paddle.to_tensor(targets))
    np.testing.assert_array_equal(tf.numpy(), inputs)
    cond = np.random.default_rng(0).normal(size=(8, 6)).astype(np.float32)
    logits = dec(cond, inputs)
    assert logits.shape == [8, targets.shape[1], len(vocab)]
    assert dec.logical_names == ["init", "embedding", "rnn", "prediction"]
    for logical, params in dec.named_logical_params().items():
        assert all(p.name.startswith(f"{scope}.{logical}.") for p in params)
    assert f"{scope}.embedding.w_0" in dec.physical_state()
    with pytest.raises(EncoderInputError, match=rf"TextDecoder\('{scope}'\) input 'tokens'"):
        dec(cond, inputs.astype(np.float32))
    with pytest.raises(EncoderInputError, match="'cond'"):
        dec(cond.astype(np.float64), inputs)


def test_text_decoder_gradients(scope: str, vocab: Vocab) -> None:
    dec = TextDecoder(scope, len(vocab), cond_dim=6, embed_dim=16, hidden_size=24)
    targets = vocab.encode_batch(SENTENCES)
    cond = paddle.randn([8, 6])
    logits = dec(cond, dec.teacher_forcing_inputs(targets))
    loss = TextDecoder.sequence_loss(logits, paddle.to_tensor(targets))
    (want,) = paddle.grad(loss, logits, retain_graph=True)
    loss.backward()
    got = dec.get_gradient("prediction")["prediction"][0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-9)
    grads = dec.get_gradient("embedding")["embedding"]
    (table,) = dec.get_param("embedding")["embedding"]
    assert len(grads) == 1 and grads[0].shape == table.shape
    np.testing.assert_array_equal(grads[0].numpy(), table.grad.numpy())
    assert np.abs(grads[0].numpy()[PAD]).max() == 0.0  # the pad row never learns
    assert np.abs(grads[0].numpy()).max() > 0.0


def test_text_decoder_save_load_round_trip(scope: str, vocab: Vocab, tmp_path) -> None:
    dec = TextDecoder(scope, len(vocab), cond_dim=6, embed_dim=16, hidden_size=24)
    cond = np.random.default_rng(1).normal(size=(8, 6)).astype(np.float32)
    inputs = dec.teacher_forcing_inputs(vocab.encode_batch(SENTENCES))
    before = dec(cond, inputs).numpy()
    dec.save(tmp_path / "dec.safetensors")
    del dec
    fresh = TextDecoder(scope, len(vocab), cond_dim=6, embed_dim=16, hidden_size=24)
    assert np.abs(fresh(cond, inputs).numpy() - before).max() > 1e-4  # other random init
    fresh.load(tmp_path / "dec.safetensors")
    np.testing.assert_array_equal(fresh(cond, inputs).numpy(), before)


def test_text_decoder_learns_captions(trained, vocab: Vocab) -> None:
    dec, cond, targets = trained
    assert float(dec.loss(cond, targets)) < 0.05
    greedy = dec.greedy(cond)
    assert greedy.dtype == np.int64 and greedy.shape[1] <= dec.max_len
    exact = np.mean([g == s for g, s in zip(vocab.decode_batch(greedy), SENTENCES)])
    assert exact >= 0.95
    beam = dec.beam_search(cond, beam_size=4)
    assert vocab.decode_batch(beam) == vocab.decode_batch(greedy)


def test_beam_one_is_greedy_and_wider_beams_score_higher(trained) -> None:
    dec, _, _ = trained
    rng = np.random.default_rng(2)
    cond = rng.normal(size=(256, dec.cond_dim)).astype(np.float32)  # off-distribution inputs
    greedy = dec.greedy(cond)
    np.testing.assert_array_equal(dec.beam_search(cond, beam_size=1), greedy)
    beam = dec.beam_search(cond, beam_size=4)
    assert beam.shape[0] == 256
    assert (dec.log_prob(cond, beam) >= dec.log_prob(cond, greedy) - 1e-4).all()


def test_beam_one_is_greedy_on_random_model(scope: str) -> None:
    paddle.seed(3)
    dec = TextDecoder(scope, 40, cond_dim=5, embed_dim=16, hidden_size=32, max_len=12)
    cond = np.random.default_rng(3).normal(size=(300, 5)).astype(np.float32)
    greedy = dec.greedy(cond)
    assert greedy.shape == (300, 12)  # a random model rarely says <eos> everywhere
    assert not np.isin(greedy[:, 0], [PAD, BOS]).any()
    np.testing.assert_array_equal(dec.beam_search(cond, beam_size=1), greedy)
    ended = np.cumsum(greedy == EOS, axis=1) - (greedy == EOS) > 0  # strictly after <eos>
    assert (greedy[ended] == PAD).all() and (greedy[~ended] != PAD).all()
    long = dec.beam_search(cond, beam_size=3, length_penalty=1.0)
    assert long.shape[0] == 300 and long.shape[1] <= 12


# ----------------------------------------------------------------------------- static mode
@pytest.fixture
def static_mode():
    paddle.enable_static()
    try:
        with paddle.static.scope_guard(paddle.static.Scope()):
            yield
    finally:
        paddle.disable_static()


@pytest.mark.filterwarnings("ignore:Tensor do not have 'place'")  # paddle's own minimize
def test_text_decoder_static_train_step(scope: str, vocab: Vocab, static_mode) -> None:
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        dec = TextDecoder(scope, len(vocab), cond_dim=6, embed_dim=16, hidden_size=24)
        dec.build()
        targets = paddle.static.data("targets", [None, -1], "int64")
        loss = TextDecoder.sequence_loss(dec.prediction, targets)
        paddle.optimizer.Adam(1e-3).minimize(loss)
        with pytest.raises(RuntimeError, match="dynamic mode"):
            dec.greedy(np.zeros((2, 6), np.float32))
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    tgt = vocab.encode_batch(SENTENCES)
    feed = {
        f"{scope}.cond": np.random.default_rng(0).normal(size=(8, 6)).astype(np.float32),
        f"{scope}.tokens": TextDecoder.teacher_forcing_inputs(tgt),
        "targets": tgt,
    }
    (value, logits) = exe.run(main, feed=feed, fetch_list=[loss, dec.prediction])
    assert np.isfinite(value) and logits.shape == (8, tgt.shape[1], len(vocab))


@pytest.mark.filterwarnings("ignore:Tensor do not have 'place'")
@pytest.mark.parametrize("arch", ["gru", "transformer"])
def test_text_encoder_static_train_step(scope: str, vocab: Vocab, arch: str, static_mode) -> None:
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        enc = TextEncoder(scope, len(vocab), embed_dim=16, hidden_size=24, arch=arch, num_classes=3)
        enc.build()
        loss = F.cross_entropy(enc.prediction, enc.label).mean()
        paddle.optimizer.Adam(1e-3).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    feed = {
        f"{scope}.tokens": vocab.encode_batch(SENTENCES),
        f"{scope}.label": (np.arange(8) % 3).reshape(-1, 1).astype(np.int64),
    }
    (value, emb) = exe.run(main, feed=feed, fetch_list=[loss, enc.pooled])
    assert np.isfinite(value) and emb.shape == (8, 24)
