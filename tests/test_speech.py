"""SpeechEncoder: shapes, names, gradients, save/load, a toy tone task, static mode, input errors."""

from __future__ import annotations

import gc

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest
from paddle.audio.features import LogMelSpectrogram

from paddlecraft.encoders import EncoderInputError
from paddlecraft.encoders.speech import SpeechEncoder

SR = 8000


def _small(scope: str, **kw) -> SpeechEncoder:
    """A test-sized encoder for 8 kHz audio."""
    cfg = dict(
        sample_rate=SR,
        n_mels=32,
        n_fft=256,
        hop_length=80,
        channels=(16, 32),
        hidden_size=24,
        embedding_dim=32,
        num_classes=4,
    )
    cfg.update(kw)
    return SpeechEncoder(scope, **cfg)


def _expected_frames(samples: int, hop: int = 80, blocks: int = 2) -> int:
    t = 1 + samples // hop
    for _ in range(blocks):
        t = (t + 1) // 2
    return t


def _tones(
    n: int, rng: np.random.Generator, seconds: float = 0.25
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy sine tones (4 classes = 4 frequencies), random phase and amplitude."""
    freqs = np.array([300.0, 700.0, 1500.0, 3000.0])
    t = np.arange(int(SR * seconds)) / SR
    y = rng.integers(0, 4, n)
    f = freqs[y] * rng.uniform(0.97, 1.03, n)  # slight detuning
    phase = rng.uniform(0, 2 * np.pi, n)
    amp = rng.uniform(0.1, 1.0, n)
    x = amp[:, None] * np.sin(2 * np.pi * f[:, None] * t[None, :] + phase[:, None])
    x += 0.1 * amp[:, None] * rng.standard_normal(x.shape)
    return x.astype("float32"), y.astype("int64")


@pytest.mark.parametrize("samples", [129, 2000, 3333])
def test_forward_shapes(scope, samples):
    enc = _small(scope)
    x = paddle.randn([3, samples])
    out = enc.forward_all(x)
    assert out["prediction"].shape == [3, 4]
    assert out["pooled"].shape == [3, 32] and enc.feature_dim == 32
    assert out["hidden"].shape == [3, _expected_frames(samples), 32]
    assert out["lengths"].numpy().tolist() == [_expected_frames(samples)] * 3
    assert enc(x).shape == [3, 4]  # primary output
    frames = enc.frames(x)
    assert frames.shape == [3, _expected_frames(samples), 2 * 24]
    assert enc.frame_lengths(x).numpy().tolist() == [_expected_frames(samples)] * 3


def test_unidirectional_last_state_without_classes(scope):
    enc = _small(scope, num_classes=None, bidirectional=False, pool="last")
    x = paddle.randn([2, 1000])
    assert enc.output_names == ("pooled", "hidden", "lengths")
    assert enc(x).shape == [2, 32]
    assert enc.frames(x).shape == [2, _expected_frames(1000), 24]
    assert "prediction" not in enc.logical_names


def test_zero_padding_is_masked(scope):
    enc = _small(scope)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2000)).astype("float32")
    x[1, 1000:] = 0.0  # second utterance is 1000 samples, zero-padded
    lengths = enc.frame_lengths(x).numpy()
    assert lengths.tolist() == [_expected_frames(2000), _expected_frames(1000)]
    frames = enc.frames(x).numpy()
    assert np.all(frames[1, lengths[1] :] == 0.0)
    assert np.abs(frames[1, : lengths[1]]).max() > 0.0


def test_frontend_matches_paddle_logmel(scope):
    enc = _small(scope).build()
    x = paddle.randn([2, 1500])
    ref = LogMelSpectrogram(sr=SR, n_fft=256, hop_length=80, n_mels=32, top_db=None)(x)
    got = enc.layers["frontend"](x)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-3)


def test_physical_names_and_parameterless_frontend(scope):
    enc = _small(scope).build()
    table = enc.named_logical_params()
    assert list(table) == ["frontend", "conv_1", "conv_2", "rnn", "embedding", "prediction"]
    assert table["frontend"] == []  # buffers only
    assert enc.get_param("frontend") == {"frontend": []}
    for logical, params in table.items():
        assert all(p.name.startswith(f"{scope}.{logical}.") for p in params), logical
        if logical != "frontend":
            assert params, logical
    names = [p.name for p in enc.parameters()]
    assert len(set(names)) == len(names)
    assert not any("frontend" in n for n in enc.physical_state())
    assert not any("frontend" in k for k in enc.state_dict())  # constants are not persisted
    assert "frontend" in str(enc.summary())
    enc.freeze("frontend")  # nothing to freeze, and no error
    assert not enc.is_frozen("frontend")


def test_get_gradient_matches_paddle_grad(scope):
    enc = _small(scope)
    x = paddle.randn([4, 1200])
    y = paddle.to_tensor([0, 1, 2, 3])
    out = enc(x)
    loss = F.cross_entropy(out, y)
    (want,) = paddle.grad(loss, out, retain_graph=True)
    loss.backward()
    got = enc.get_gradient("prediction")["prediction"][0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-8)
    grads = enc.get_gradient("rnn")["rnn"]  # a logical layer: its parameters' gradients
    params = enc.get_param("rnn")["rnn"]
    assert len(grads) == len(params) == 8  # 2 directions x (w_ih, w_hh, b_ih, b_hh)
    for g, p in zip(grads, params):
        np.testing.assert_array_equal(g.numpy(), p.grad.numpy())
    # "embedding"/"prediction" name outputs too (outputs win): ask via get_param
    by_name = enc.get_gradient(enc.get_param("embedding"))
    assert set(by_name) == {f"{scope}.embedding.w_0", f"{scope}.embedding.b_0"}
    assert enc.get_gradient("frontend") == {"frontend": []}


def test_eval_mode_is_differentiable(scope):
    enc = _small(scope)
    enc.eval()  # Paddle's fused GRU op cannot backprop in eval mode; the encoder's GRU can
    x = paddle.randn([2, 800])
    x.stop_gradient = False
    enc(x).sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0


def test_finite_difference_float64(scope):
    paddle.set_default_dtype("float64")
    paddle.seed(0)
    try:
        enc = _small(scope, channels=(4,), hidden_size=4, embedding_dim=4, n_mels=8).build()
        enc.eval()
        x = paddle.to_tensor(np.random.default_rng(1).standard_normal((2, 600)))
        y = paddle.to_tensor([1, 2])
        loss_fn = lambda: F.cross_entropy(enc(x), y)  # noqa: E731
        loss_fn().backward()
        for logical in ("conv_1", "rnn"):
            p = enc.get_param(logical)[logical][0]
            grad = enc.get_gradient(p)[p.name][0].numpy().reshape(-1)
            w = p.numpy().copy().reshape(-1)
            for i in np.argsort(-np.abs(grad))[:2]:  # largest: FD noise is ~1e-10
                eps = 1e-6
                numeric = []
                for sign in (1, -1):
                    w2 = w.copy()
                    w2[i] += sign * eps
                    p.set_value(w2.reshape(p.shape))
                    numeric.append(float(loss_fn()))
                p.set_value(w.reshape(p.shape))
                num = (numeric[0] - numeric[1]) / (2 * eps)
                rel = abs(num - grad[i]) / max(abs(num), abs(grad[i]), 1e-8)
                assert rel < 1e-3, (logical, i, num, grad[i])
    finally:
        paddle.set_default_dtype("float32")


def test_save_load_round_trip(scope, tmp_path):
    enc = _small(scope)
    x = paddle.randn([3, 900])
    enc(x)  # train-mode forward: moves the BN running statistics
    enc.eval()
    before = enc.forward_all(x)
    path = tmp_path / "speech.safetensors"
    enc.save(path)
    del enc
    gc.collect()
    enc2 = _small(scope).load(path)
    enc2.eval()
    after = enc2.forward_all(x)
    for name in ("prediction", "pooled", "hidden"):
        np.testing.assert_array_equal(before[name].numpy(), after[name].numpy())


def test_learns_tone_classes(scope):
    paddle.seed(0)
    rng = np.random.default_rng(0)
    enc = _small(scope)
    opt = paddle.optimizer.Adam(3e-3, parameters=enc.parameters())
    for _ in range(60):
        xb, yb = _tones(32, rng)
        loss = F.cross_entropy(enc(xb), paddle.to_tensor(yb))
        loss.backward()
        opt.step()
        opt.clear_grad()
    enc.eval()
    xt, yt = _tones(256, rng)
    with paddle.no_grad():
        acc = float((enc(xt).numpy().argmax(1) == yt).mean())
    assert acc >= 0.95, acc


def test_static_build_trains_one_step(scope):
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        enc = _small(scope).build()
        loss = F.cross_entropy(enc.prediction, enc.label).mean()
        paddle.optimizer.Adam(1e-3).minimize(loss)
        g_pred = enc.get_gradient("prediction")["prediction"][0]
        g_emb = enc.get_gradient(enc.get_param("embedding"))[f"{scope}.embedding.w_0"][0]
        frames = enc.frames(enc.waveform)
    assert enc.waveform.shape[1] == -1  # variable length feed
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup, scope=enc.static_scope)
    x, y = _tones(4, np.random.default_rng(0))
    feed = {f"{scope}.waveform": x, f"{scope}.label": y[:, None]}
    lv, gp, ge, fr = exe.run(
        main, feed=feed, fetch_list=[loss, g_pred, g_emb, frames], scope=enc.static_scope
    )
    assert (
        np.isfinite(lv).all() and gp.shape == (4, 4) and ge.shape == (48, 32)
    )  # [2 x hidden, embedding_dim]
    assert fr.shape == (4, _expected_frames(2000), 48)


def test_wrong_inputs_raise_encoder_input_error(scope):
    enc = _small(scope, max_seconds=0.5)
    with pytest.raises(EncoderInputError, match=rf"SpeechEncoder\('{scope}'\).*'waveform'"):
        enc(paddle.randn([2, 1, 800]))  # [B, 1, S]: one axis too many
    with pytest.raises(EncoderInputError, match="'waveform'"):
        enc(paddle.randn([2, 800]).astype("float64"))
    with pytest.raises(EncoderInputError, match="at least 129"):
        enc(paddle.randn([2, 100]))
    with pytest.raises(EncoderInputError, match="at most 4000"):
        enc(paddle.randn([2, 4001]))
    with pytest.raises(EncoderInputError, match="waveform"):
        enc.frames(paddle.randn([800]))
