"""TransformerTextDecoder: causal masking, KV-cache decoding, training, greedy and beam search.

A tiny copy task: the condition is the one-hot code of 3 symbols, the target is those
symbols then ``<eos>``; the decoder has to write down what the vector says.
"""

from __future__ import annotations

import itertools

import numpy as np
import paddle
import pytest

from paddlecraft.encoders import EncoderInputError
from paddlecraft.encoders.decoding import BOS, EOS, PAD
from paddlecraft.encoders.transformer_decoder import TransformerTextDecoder

SYMBOLS = 5  # ids 3..7
VOCAB = 3 + SYMBOLS
LENGTH = 3


def copy_task(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(cond [n, LENGTH * SYMBOLS] one-hot codes, targets [n, LENGTH + 1] = symbols + <eos>)."""
    rng = np.random.default_rng(seed)
    combos = np.array(list(itertools.product(range(SYMBOLS), repeat=LENGTH)))
    picked = combos[rng.permutation(len(combos))[:n]]  # [n, LENGTH]
    cond = np.zeros((n, LENGTH, SYMBOLS), dtype=np.float32)
    np.put_along_axis(cond, picked[..., None], 1.0, axis=2)
    targets = np.concatenate([picked + 3, np.full((n, 1), EOS)], axis=1).astype(np.int64)
    return cond.reshape(n, -1), targets


def pad_to(a: np.ndarray, width: int) -> np.ndarray:
    return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=PAD)


@pytest.fixture(scope="module")
def trained() -> tuple[TransformerTextDecoder, np.ndarray, np.ndarray, list[float]]:
    """A decoder trained on 40 copy examples: (decoder, cond, targets, loss curve)."""
    paddle.seed(0)
    cond, targets = copy_task(40)
    dec = TransformerTextDecoder(
        "t_trained_tdec", VOCAB, cond.shape[1], dim=32, depth=2, heads=4, max_len=6
    )
    opt = paddle.optimizer.Adam(learning_rate=3e-3, parameters=dec.parameters())
    losses = []
    for _ in range(120):
        loss = dec.loss(cond, targets)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    dec.eval()
    return dec, cond, targets, losses


def test_shapes_names_and_errors(scope: str) -> None:
    dec = TransformerTextDecoder(scope, 20, cond_dim=6, dim=16, depth=2, heads=2, max_len=8)
    tokens = np.random.default_rng(0).integers(3, 20, (4, 5))
    logits = dec(np.zeros((4, 6), np.float32), tokens)
    assert logits.shape == [4, 5, 20]
    assert dec.logical_names == [
        "cond_proj", "embeddings", "layers.0", "layers.1", "ln_f", "prediction"
    ]  # fmt: skip
    for logical, params in dec.named_logical_params().items():
        assert params and all(p.name.startswith(f"{scope}.{logical}.") for p in params)
    assert len(dec.get_param("layers.1")["layers.1"]) == 8 + 4 + 4  # q/k/v/out, fc1/fc2, 2 norms
    with pytest.raises(EncoderInputError, match="max_len=8"):
        dec(np.zeros((1, 6), np.float32), np.full((1, 9), 3))
    with pytest.raises(EncoderInputError, match="ids must be in"):
        dec(np.zeros((1, 6), np.float32), np.full((1, 3), 20))
    with pytest.raises(ValueError, match="max_len=9"):
        dec.greedy(np.zeros((1, 6), np.float32), max_len=9)
    with pytest.raises(ValueError, match="eos_id=20"):
        TransformerTextDecoder(scope + "_b", 20, cond_dim=6, eos_id=20)


def test_causal_and_kv_cache_match_full_forward(scope: str) -> None:
    paddle.seed(1)
    dec = TransformerTextDecoder(scope, 20, cond_dim=6, dim=16, depth=2, heads=2, max_len=8)
    dec.eval()
    rng = np.random.default_rng(1)
    cond = rng.normal(size=(3, 6)).astype(np.float32)
    tokens = rng.integers(3, 20, (3, 7))
    full = dec(cond, tokens).numpy()  # [3, 7, V]
    changed = tokens.copy()
    changed[:, 4:] = 5
    np.testing.assert_allclose(dec(cond, changed).numpy()[:, :4], full[:, :4], atol=1e-6)
    assert np.abs(dec(cond * 2, tokens).numpy() - full).max() > 1e-3  # the condition matters
    c, state, _ = dec._start(cond, "test", None)
    steps = []
    for t in range(7):  # cached, one position at a time
        logits, state = dec._next_logits(c, paddle.to_tensor(tokens[:, t : t + 1]), state)
        steps.append(logits.numpy())
    np.testing.assert_allclose(np.stack(steps, axis=1), full, atol=1e-5)


def test_teacher_forcing_learns_the_copy_task(trained) -> None:
    dec, cond, targets, losses = trained
    assert losses[0] > 1.5 and losses[-1] < 0.05  # ~log(8) -> near zero
    greedy = dec.greedy(cond)
    assert greedy.dtype == np.int64
    width = max(greedy.shape[1], targets.shape[1])
    exact = (pad_to(greedy, width) == pad_to(targets, width)).all(axis=1)
    assert exact.mean() >= 0.95
    beam = dec.beam_search(cond, beam_size=3)
    width = max(beam.shape[1], targets.shape[1])
    assert (pad_to(beam, width) == pad_to(targets, width)).all(axis=1).mean() >= 0.95


def test_beam_one_is_greedy_and_beam_scores_higher(trained) -> None:
    dec = trained[0]
    cond = np.random.default_rng(2).normal(size=(64, dec.cond_dim)).astype(np.float32)
    greedy = dec.greedy(cond)
    np.testing.assert_array_equal(dec.beam_search(cond, beam_size=1), greedy)
    beam = dec.beam_search(cond, beam_size=4)
    gain = dec.log_prob(cond, beam) - dec.log_prob(cond, greedy)
    assert (gain >= -1e-4).all()
    assert not np.isin(greedy[:, 0], [PAD, BOS]).any()
    ended = np.cumsum(greedy == EOS, axis=1) - (greedy == EOS) > 0  # strictly after <eos>
    assert (greedy[ended] == PAD).all() and (greedy[~ended] != PAD).all()


def test_batched_decoding_equals_one_at_a_time(trained) -> None:
    dec = trained[0]
    cond = np.random.default_rng(3).normal(size=(6, dec.cond_dim)).astype(np.float32)
    for decode in (dec.greedy, lambda c: dec.beam_search(c, beam_size=3)):
        batch = decode(cond)
        alone = [decode(cond[i : i + 1]) for i in range(len(cond))]
        width = max(batch.shape[1], *(a.shape[1] for a in alone))
        np.testing.assert_array_equal(
            pad_to(batch, width), np.concatenate([pad_to(a, width) for a in alone])
        )


def test_subword_ids_and_freezing(scope: str) -> None:
    """Custom pad/bos/eos ids (a BERT vocabulary: [PAD]=0, [CLS]=101, [SEP]=102) and freeze()."""
    dec = TransformerTextDecoder(
        scope, 120, cond_dim=4, dim=16, depth=1, heads=2, max_len=5, bos_id=101, eos_id=102
    )
    targets = np.array([[7, 8, 102, 0], [9, 102, 0, 0]])
    inputs = dec.teacher_forcing_inputs(targets, dec.bos_id)
    assert inputs[:, 0].tolist() == [101, 101]
    out = dec.greedy(np.ones((2, 4), np.float32))
    assert not np.isin(out[:, 0], [0, 101]).any()
    dec.freeze("embeddings")
    loss = dec.loss(np.ones((2, 4), np.float32), targets)
    loss.backward()
    assert all(p.grad is None for p in dec.get_param("embeddings")["embeddings"])
    assert dec.get_gradient("layers.0")["layers.0"]
    dec.unfreeze("embeddings")
    assert not dec.is_frozen("embeddings")


@pytest.fixture
def static_mode():
    paddle.enable_static()
    try:
        with paddle.static.scope_guard(paddle.static.Scope()):
            yield
    finally:
        paddle.disable_static()


@pytest.mark.filterwarnings("ignore:Tensor do not have 'place'")  # paddle's own minimize
def test_static_train_step_bert_encoder_and_decoder(make_scope, static_mode) -> None:
    """Both Transformer text models build into one static program and train a step."""
    from paddlecraft.encoders.transformer_text import TransformerTextEncoder

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        enc = TransformerTextEncoder(
            s := make_scope(), vocab_size=50, dim=16, depth=2, heads=2, max_len=12, num_classes=3
        )
        enc.build()
        dec = TransformerTextDecoder(d := make_scope(), 20, cond_dim=4, dim=16, depth=1, heads=2)
        dec.build()
        targets = paddle.static.data("targets", [None, -1], "int64")
        enc_loss = paddle.nn.functional.cross_entropy(enc.prediction, enc.label).mean()
        dec_loss = TransformerTextDecoder.sequence_loss(dec.prediction, targets)
        paddle.optimizer.Adam(1e-3).minimize(enc_loss + dec_loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    ids, tgt = np.full((2, 5), 7, np.int64), np.array([[5, 6, EOS, PAD], [4, EOS, PAD, PAD]])
    feed = {
        f"{s}.tokens": ids,
        f"{s}.attention_mask": np.ones_like(ids),
        f"{s}.token_type_ids": np.zeros_like(ids),
        f"{s}.label": np.zeros((2, 1), np.int64),
        f"{d}.cond": np.ones((2, 4), np.float32),
        f"{d}.tokens": TransformerTextDecoder.teacher_forcing_inputs(tgt),
        "targets": tgt,
    }
    first, pooled, logits = exe.run(
        main, feed=feed, fetch_list=[dec_loss, enc.pooled, dec.prediction]
    )
    assert pooled.shape == (2, 16) and logits.shape == (2, 4, 20)
    for _ in range(5):
        (last,) = exe.run(main, feed=feed, fetch_list=[dec_loss])
    assert last < first
