"""ImageDecoder: shapes, names, gradients, finite differences, save/load, conditioning, static mode."""

from __future__ import annotations

import gc

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

from paddlecraft.encoders import EncoderInputError
from paddlecraft.encoders.image_decoder import ImageDecoder, start_size


@pytest.mark.parametrize(
    "size, s0, ups", [(8, 2, 2), (16, 4, 2), (28, 7, 2), (32, 4, 3), (64, 4, 4)]
)
def test_start_size(size, s0, ups):
    assert start_size(size) == (s0, ups)


@pytest.mark.parametrize("size", [8, 28, 64])
@pytest.mark.parametrize("num_classes", [None, 5])
def test_forward_shapes(make_scope, size, num_classes):
    dec = ImageDecoder(
        make_scope(),
        latent_dim=16,
        out_channels=3,
        image_size=size,
        base_channels=8,
        num_classes=num_classes,
    )
    z = paddle.randn([2, 16])
    inputs = (z,) if num_classes is None else (z, paddle.to_tensor([0, 4]))
    image = dec(*inputs)
    assert image.shape == [2, 3, size, size]
    assert float(image.min()) >= 0.0 and float(image.max()) <= 1.0
    ups = start_size(size)[1]
    assert [n for n in dec.logical_names if n.startswith("upsample_")] == [
        f"upsample_{i}" for i in range(1, ups + 1)
    ]
    assert ("label_embedding" in dec.logical_names) == (num_classes is not None)
    assert dec.input_names == (("z",) if num_classes is None else ("z", "labels"))
    sample = dec.sample(3, seed=1)
    assert sample.shape == (3, 3, size, size) and sample.dtype == np.float32
    np.testing.assert_array_equal(sample, dec.sample(3, seed=1))
    assert dec.training  # sample() restores train mode


def test_bad_image_size(scope):
    with pytest.raises(ValueError, match="image_size 7"):
        ImageDecoder(scope, image_size=7)


def test_physical_names(scope):
    dec = ImageDecoder(scope, latent_dim=8, image_size=16, base_channels=8, num_classes=3).build()
    table = dec.named_logical_params()
    assert list(table) == ["label_embedding", "project", "upsample_1", "upsample_2", "to_image"]
    for logical, params in table.items():
        assert params and all(p.name.startswith(f"{scope}.{logical}.") for p in params), logical
    names = [p.name for p in dec.parameters()]
    assert len(set(names)) == len(names)


def test_get_gradient_matches_paddle_grad(scope):
    dec = ImageDecoder(scope, latent_dim=8, image_size=8, base_channels=8, num_classes=3)
    z = paddle.randn([4, 8])
    labels = paddle.to_tensor([0, 1, 2, 1])
    target = paddle.rand([4, 1, 8, 8])
    image = dec(z, labels)
    loss = F.mse_loss(image, target)
    (want,) = paddle.grad(loss, image, retain_graph=True)
    loss.backward()
    got = dec.get_gradient("image")["image"][0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-10)
    for logical in ("to_image", "label_embedding"):
        grads = dec.get_gradient(logical)[logical]
        params = dec.get_param(logical)[logical]
        assert len(grads) == len(params) > 0
        for g, p in zip(grads, params):
            np.testing.assert_array_equal(g.numpy(), p.grad.numpy())
    # layers with BatchNorm: ask for the trainable parameters (running stats have no grad)
    trainable = [p for p in dec.get_param("project")["project"] if not p.stop_gradient]
    grads = dec.get_gradient(trainable)
    assert set(grads) == {p.name for p in trainable}


@pytest.mark.parametrize("train_mode", [True, False])
def test_finite_difference_float64(scope, train_mode):
    paddle.set_default_dtype("float64")
    paddle.seed(0)
    try:
        dec = ImageDecoder(scope, latent_dim=6, image_size=8, base_channels=4, num_classes=3)
        dec.train() if train_mode else dec.eval()
        rng = np.random.default_rng(0)
        z = paddle.to_tensor(rng.standard_normal((4, 6)))
        labels = paddle.to_tensor([0, 1, 2, 0])
        weights = paddle.to_tensor(rng.standard_normal((4, 1, 8, 8)))
        loss_fn = lambda: (dec(z, labels) * weights).sum()  # noqa: E731
        loss_fn().backward()
        for name in ("project", "upsample_2", "to_image", "label_embedding"):
            p = dec.get_param(name)[name][0]
            grad = dec.get_gradient(p)[p.name][0].numpy().reshape(-1)
            w = p.numpy().copy().reshape(-1)
            for i in (*np.argsort(-np.abs(grad))[:2], w.size // 3):
                eps = 1e-6
                vals = []
                for sign in (1, -1):
                    w2 = w.copy()
                    w2[i] += sign * eps
                    p.set_value(w2.reshape(p.shape))
                    vals.append(float(loss_fn()))
                p.set_value(w.reshape(p.shape))
                num = (vals[0] - vals[1]) / (2 * eps)
                if abs(num) < 1e-7 and abs(grad[i]) < 1e-7:
                    continue  # e.g. an embedding row the batch does not use
                rel = abs(num - grad[i]) / max(abs(num), abs(grad[i]))
                assert rel < 1e-3, (name, i, num, grad[i])
    finally:
        paddle.set_default_dtype("float32")


def test_save_load_round_trip(scope, tmp_path):
    kw = dict(latent_dim=8, image_size=16, base_channels=8, num_classes=3)
    dec = ImageDecoder(scope, **kw)
    z, labels = paddle.randn([3, 8]), paddle.to_tensor([2, 0, 1])
    dec(z, labels)  # train-mode forward: moves the BN running statistics
    before = dec.sample(3, labels=[2, 0, 1], seed=7)
    path = tmp_path / "decoder.safetensors"
    dec.save(path)
    del dec
    gc.collect()
    dec2 = ImageDecoder(scope, **kw).load(path)
    np.testing.assert_array_equal(dec2.sample(3, labels=[2, 0, 1], seed=7), before)


def test_labels_condition_the_output(scope):
    paddle.seed(0)
    rng = np.random.default_rng(0)
    n_classes = 4
    templates = (rng.random((n_classes, 1, 8, 8)) > 0.5).astype("float32")
    dec = ImageDecoder(scope, latent_dim=8, image_size=8, base_channels=16, num_classes=n_classes)
    opt = paddle.optimizer.Adam(1e-2, parameters=dec.parameters())
    for _ in range(150):
        labels = rng.integers(0, n_classes, 32)
        z = paddle.randn([32, 8])
        loss = F.mse_loss(dec(z, paddle.to_tensor(labels)), paddle.to_tensor(templates[labels]))
        loss.backward()
        opt.step()
        opt.clear_grad()
    labels = np.arange(64) % n_classes
    images = dec.sample(64, labels=labels, seed=3)  # eval mode, fresh latents
    mse = float(((images - templates[labels]) ** 2).mean())
    assert mse < 0.01, mse
    # the other class's template is far away: the label, not z, picks the image
    wrong = float(((images - templates[(labels + 1) % n_classes]) ** 2).mean())
    assert wrong > 0.2, wrong


def test_static_build_trains_one_step(scope):
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        dec = ImageDecoder(scope, latent_dim=8, image_size=8, base_channels=8, num_classes=3)
        dec.build()
        target = paddle.static.data("target", [None, 1, 8, 8], "float32")
        loss = F.mse_loss(dec.image, target)
        paddle.optimizer.Adam(1e-3).minimize(loss)
        g_image = dec.get_gradient("image")["image"][0]
    assert not hasattr(dec, "label")  # no classifier label feed for a generator
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup, scope=dec.static_scope)
    rng = np.random.default_rng(0)
    feed = {
        f"{scope}.z": rng.standard_normal((4, 8)).astype("float32"),
        f"{scope}.labels": np.array([0, 1, 2, 0], dtype="int64"),
        "target": rng.random((4, 1, 8, 8)).astype("float32"),
    }
    lv, g = exe.run(main, feed=feed, fetch_list=[loss, g_image], scope=dec.static_scope)
    assert np.isfinite(lv).all() and g.shape == (4, 1, 8, 8)


def test_wrong_inputs_raise_encoder_input_error(scope):
    dec = ImageDecoder(scope, latent_dim=8, image_size=8, base_channels=8, num_classes=3)
    labels = paddle.to_tensor([0, 1])
    with pytest.raises(EncoderInputError, match=rf"ImageDecoder\('{scope}'\) input 'z'"):
        dec(paddle.randn([2, 9]), labels)
    with pytest.raises(EncoderInputError, match="input 'z'"):
        dec(paddle.randn([2, 8]).astype("float64"), labels)
    with pytest.raises(EncoderInputError, match="input 'labels'"):
        dec(paddle.randn([2, 8]), paddle.to_tensor([0.0, 1.0]))
    with pytest.raises(EncoderInputError, match="input 'labels'.*\\[0, 3\\)"):
        dec(paddle.randn([2, 8]), paddle.to_tensor([0, 3]))
    with pytest.raises(EncoderInputError, match="expected 2 input"):
        dec(paddle.randn([2, 8]))
    with pytest.raises(ValueError, match="unconditional"):
        ImageDecoder(scope + "_u", latent_dim=8, image_size=8).sample(2, labels=[0, 1])


def test_norm_none_leaves_out_batch_norm_so_rows_are_independent(make_scope):
    """``norm="none"``: no BN (biased layers instead), so an image depends only on its own
    latent row (what makes data-parallel GAN steps match one process); bad values refused."""
    dec = ImageDecoder(make_scope(), latent_dim=8, out_channels=1, image_size=8, base_channels=4,
                       norm="none").build()  # fmt: skip
    names = [p.name for p in dec.parameters()]
    assert not any("batch_norm" in n for n in names)
    assert f"{dec.scope}.project.linear_0.b_0" in names  # biased, as BN no longer shifts
    dec.train()
    z = paddle.randn([6, 8])
    whole = dec(z).numpy()
    np.testing.assert_allclose(dec(z[1::2]).numpy(), whole[1::2], atol=1e-6)
    batch = ImageDecoder(make_scope(), latent_dim=8, out_channels=1, image_size=8,
                         base_channels=4).build()  # fmt: skip
    batch.train()  # with BN (the default), train-mode rows depend on the rest of the batch
    assert any("batch_norm" in p.name for p in batch.parameters())
    assert not np.allclose(batch(z[1::2]).numpy(), batch(z).numpy()[1::2], atol=1e-4)
    with pytest.raises(ValueError, match="norm must be one of"):
        ImageDecoder(make_scope(), norm="layer")
