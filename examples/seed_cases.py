"""The seed README's cases, written with PaddleCraft: 1-5 in dynamic and static mode, 7 dynamic.

Run one:

    python examples/seed_cases.py --case 1 --mode dynamic
    python examples/seed_cases.py --case 5 --mode static
    python examples/seed_cases.py --case 7          # image + language: two CLIP towers

Each case is a function returning the figures it claims, so tests/test_seed_cases.py can
assert them. Data: sklearn digits resized to 28x28 (784 inputs, the seed's MNIST size),
shipped inside scikit-learn, so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import itertools
import json

import numpy as np
import paddle
import paddle.nn.functional as F

from paddlecraft.craftdata import iterate_minibatches, load_digits
from paddlecraft.craftdata.shapes import load_shapes, shapes_vocabulary
from paddlecraft.encoders import (
    CLIPTextEncoder,
    CLIPTokenizer,
    CLIPVisionEncoder,
    ImageMLPEncoder,
    Vocab,
    clip_logits,
    init_missing,
)

_ids = itertools.count()


def _scope(name: str) -> str:
    # a live encoder holds its scope; examples may run many times in one process
    return f"{name}_{next(_ids)}"


def _data(seed: int = 0):
    return load_digits(seed=seed, image_size=28, flatten=True)


def _accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float((logits.argmax(-1) == y.reshape(-1)).mean())


# ------------------------------------------------------------------ dynamic mode
def _train_dynamic(enc, opt, data, epochs, seed, on_step=None):
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        for xb, yb in iterate_minibatches(data.train.x, data.train.y, 128, rng):
            loss = F.cross_entropy(enc(paddle.to_tensor(xb)), paddle.to_tensor(yb))
            loss.backward()
            if on_step is not None:
                on_step(enc, opt)
            opt.step()
            opt.clear_grad(set_to_zero=False)
            losses.append(float(loss))
    return losses


def _eval_dynamic(enc, data) -> float:
    with paddle.no_grad():
        return _accuracy(enc(paddle.to_tensor(data.test.x)).numpy(), data.test.y)


# ------------------------------------------------------------------ static mode
class _StaticRun:
    """A train program + a forward-only test program for one encoder, seed style."""

    def __init__(self, enc, make_opt, freeze=()):
        self.enc = enc
        self.test, test_start = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(self.test, test_start):
            enc.build()
            self.test_prediction = enc.prediction
        self.main, self.startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(self.main, self.startup):
            enc.build()
            for logical in freeze:
                enc.freeze(logical)
            self.loss = F.cross_entropy(enc.prediction, enc.label).mean()
            self.opt = make_opt()
            self.opt.minimize(self.loss)
        self.exe = paddle.static.Executor(paddle.CPUPlace())

    def feed(self, xb, yb):
        return {f"{self.enc.scope}.input": xb, f"{self.enc.scope}.label": yb.reshape(-1, 1)}

    def run(self, xb, yb, fetch=()):
        return self.exe.run(self.main, feed=self.feed(xb, yb), fetch_list=[self.loss, *fetch])

    def accuracy(self, data) -> float:
        (logits,) = self.exe.run(
            self.test,
            feed=self.feed(data.test.x, np.zeros(len(data.test.x), "int64")),  # label unused
            fetch_list=[self.test_prediction],
        )
        return _accuracy(logits, data.test.y)


def _epochs(data, epochs, seed):
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        yield from iterate_minibatches(data.train.x, data.train.y, 128, rng)


# ------------------------------------------------------------------ the cases
def case1_train(mode: str = "dynamic", epochs: int = 3, seed: int = 0) -> dict:
    """Case 1: plain training. Returns first/last loss and test accuracy before/after."""
    paddle.seed(seed)
    data = _data(seed)
    enc = ImageMLPEncoder(_scope("model1"))
    if mode == "dynamic":
        enc.build()
        acc0 = _eval_dynamic(enc, data)
        opt = paddle.optimizer.RMSProp(0.001, parameters=enc.parameters())
        losses = _train_dynamic(enc, opt, data, epochs, seed)
        acc1 = _eval_dynamic(enc, data)
    else:
        run = _StaticRun(enc, lambda: paddle.optimizer.RMSProp(0.001))
        run.exe.run(run.startup)
        acc0 = run.accuracy(data)
        losses = [float(run.run(xb, yb)[0]) for xb, yb in _epochs(data, epochs, seed)]
        acc1 = run.accuracy(data)
    return {"loss_first": losses[0], "loss_last": losses[-1], "acc_before": acc0, "acc_after": acc1}


def case2_shared(mode: str = "dynamic", seed: int = 0, lr: float = 0.01) -> dict:
    """Case 2: hidden_layer_2 = hidden_layer_1. Returns parameter counts and the update check.

    One SGD step must move the shared weight by exactly ``-lr * grad`` where ``grad`` sums
    both uses; a double update would move it twice as far.
    """
    paddle.seed(seed)
    data = _data(seed)
    enc = ImageMLPEncoder(_scope("model1"))
    enc.model["hidden_layer_2"] = enc.model["hidden_layer_1"]
    xb, yb = data.train.x[:128], data.train.y[:128]
    if mode == "dynamic":
        enc.build()
        opt = paddle.optimizer.SGD(lr, parameters=enc.parameters())
        w = enc.get_param("hidden_layer_1")["hidden_layer_1"][0]
        before = w.numpy().copy()
        loss = F.cross_entropy(enc(paddle.to_tensor(xb)), paddle.to_tensor(yb))
        loss.backward()
        grad = enc.get_gradient(w)[w.name][0].numpy().copy()
        opt.step()
        after = w.numpy()
        n_params = len(enc.parameters())
    else:
        run = _StaticRun(enc, lambda: paddle.optimizer.SGD(lr))
        run.exe.run(run.startup)
        w = enc.get_param("hidden_layer_1")["hidden_layer_1"][0]
        g = enc.get_gradient(w)[w.name][0]
        before = np.array(paddle.static.global_scope().find_var(w.name).get_tensor()).copy()
        _, grad, after = run.run(xb, yb, fetch=[g, w])
        n_params = len(enc.parameters())
    step = before - after
    return {
        "n_params": n_params,
        "physical_1": [p.name for p in enc.get_param("hidden_layer_1")["hidden_layer_1"]],
        "physical_2": [p.name for p in enc.get_param("hidden_layer_2")["hidden_layer_2"]],
        "update_error_once": float(np.abs(step - lr * grad).max()),
        "update_error_twice": float(np.abs(step - 2 * lr * grad).max()),
        "grad_norm": float(np.abs(grad).max()),
    }


def case3_fetch_params(mode: str = "dynamic", seed: int = 0, lr: float = 0.01, steps: int = 3):
    """Case 3: fetch hidden_layer_1's parameters while training (SGD).

    Returns the largest gap between each fetched value and ``previous - lr * grad``.
    """
    paddle.seed(seed)
    data = _data(seed)
    enc = ImageMLPEncoder(_scope("model1"))
    enc.model["hidden_layer_2"] = enc.model["hidden_layer_1"]
    gaps, names = [], []
    batches = iterate_minibatches(data.train.x, data.train.y, 128, np.random.default_rng(seed))
    if mode == "dynamic":
        enc.build()
        opt = paddle.optimizer.SGD(lr, parameters=enc.parameters())
        params = [p for ps in enc.get_param("hidden_layer_1").values() for p in ps]
        names = [p.name for p in params]
        for _, (xb, yb) in zip(range(steps), batches):
            prev = [p.numpy().copy() for p in params]
            F.cross_entropy(enc(paddle.to_tensor(xb)), paddle.to_tensor(yb)).backward()
            grads = [p.grad.numpy().copy() for p in params]
            opt.step()
            opt.clear_grad()
            fetched = [v.numpy() for ps in enc.get_param("hidden_layer_1").values() for v in ps]
            gaps += [np.abs(f - (a - lr * g)).max() for f, a, g in zip(fetched, prev, grads)]
    else:
        run = _StaticRun(enc, lambda: paddle.optimizer.SGD(lr))
        run.exe.run(run.startup)
        params = [p for ps in enc.get_param("hidden_layer_1").values() for p in ps]
        names = [p.name for p in params]
        grads = [enc.get_gradient(p)[p.name][0] for p in params]
        scope = paddle.static.global_scope()
        for _, (xb, yb) in zip(range(steps), batches):
            prev = [np.array(scope.find_var(n).get_tensor()).copy() for n in names]
            out = run.run(xb, yb, fetch=[*params, *grads])
            fetched, gs = out[1 : 1 + len(params)], out[1 + len(params) :]
            gaps += [np.abs(f - (a - lr * g)).max() for f, a, g in zip(fetched, prev, gs)]
    return {"physical": names, "max_gap": float(max(gaps))}


def case4_gradients(mode: str = "dynamic", seed: int = 0, eps: float = 1e-6) -> dict:
    """Case 4: parameter and ``prediction`` gradients against central finite differences.

    float64, a small MLP (16-8-8-10) so every check is cheap. Returns the worst relative error.
    """
    paddle.seed(seed)
    rng = np.random.default_rng(seed)
    old = paddle.get_default_dtype()
    paddle.set_default_dtype("float64")
    try:
        xb = rng.normal(size=(6, 16))
        yb = rng.integers(0, 10, size=6).astype("int64")
        enc = ImageMLPEncoder(_scope("model1"), input_size=16, hidden_size=8)
        if mode == "dynamic":
            return _fd_dynamic(enc, xb, yb, rng, eps)
        return _fd_static(enc, xb, yb, rng, eps)
    finally:
        paddle.set_default_dtype(old)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(a).max(), np.abs(b).max(), 1e-12))


def _probe(p_shape, rng, k=6):
    flat = rng.choice(int(np.prod(p_shape)), size=min(k, int(np.prod(p_shape))), replace=False)
    return [np.unravel_index(i, p_shape) for i in flat]


def _fd_dynamic(enc, xb, yb, rng, eps):
    enc.build()
    x, y = paddle.to_tensor(xb), paddle.to_tensor(yb)

    def loss_fn():
        return float(F.cross_entropy(enc(x), y))

    F.cross_entropy(enc(x), y).backward()
    worst = 0.0
    for params in enc.get_param("").values():
        for p in params:
            g = enc.get_gradient(p)[p.name][0].numpy()
            base = p.numpy().copy()
            for idx in _probe(p.shape, rng):
                plus, minus = base.copy(), base.copy()
                plus[idx] += eps
                minus[idx] -= eps
                p.set_value(plus)
                lp = loss_fn()
                p.set_value(minus)
                lm = loss_fn()
                p.set_value(base)
                worst = max(worst, _rel(np.array(g[idx]), np.array((lp - lm) / (2 * eps))))
    # d loss / d prediction: perturb the logits themselves
    with paddle.no_grad():
        logits = enc(x).numpy()
    g_pred = enc.get_gradient("prediction")["prediction"][0].numpy()
    fd = np.zeros_like(logits)
    for idx in np.ndindex(*logits.shape):
        plus, minus = logits.copy(), logits.copy()
        plus[idx] += eps
        minus[idx] -= eps
        lp = float(F.cross_entropy(paddle.to_tensor(plus), y))
        lm = float(F.cross_entropy(paddle.to_tensor(minus), y))
        fd[idx] = (lp - lm) / (2 * eps)
    return {"param_rel_error": worst, "prediction_rel_error": _rel(g_pred, fd)}


def _fd_static(enc, xb, yb, rng, eps):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        enc.build()
        loss = F.cross_entropy(enc.prediction, enc.label).mean()
        opt = paddle.optimizer.SGD(0.0)  # lr 0: gradients without moving anything
        opt.minimize(loss)
        params = [p for ps in enc.get_param("").values() for p in ps]
        grads = [enc.get_gradient(p)[p.name][0] for p in params]
        g_pred = enc.get_gradient("prediction")["prediction"][0]
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    exe.run(startup, scope=scope)
    feed = {f"{enc.scope}.input": xb, f"{enc.scope}.label": yb.reshape(-1, 1)}
    out = exe.run(main, feed=feed, fetch_list=[loss, enc.prediction, g_pred, *grads], scope=scope)
    logits, gp, gs = out[1], out[2], out[3:]
    place = paddle.CPUPlace()

    def loss_at():
        return float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])

    worst = 0.0
    for p, g in zip(params, gs):
        t = scope.find_var(p.name).get_tensor()
        base = np.array(t).copy()
        for idx in _probe(base.shape, rng):
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            t.set(plus, place)
            lp = loss_at()
            t.set(minus, place)
            lm = loss_at()
            t.set(base, place)
            worst = max(worst, _rel(np.array(g[idx]), np.array((lp - lm) / (2 * eps))))
    y = paddle.to_tensor(yb)
    fd = np.zeros_like(logits)
    paddle.disable_static()
    try:
        for idx in np.ndindex(*logits.shape):
            plus, minus = logits.copy(), logits.copy()
            plus[idx] += eps
            minus[idx] -= eps
            lp = float(F.cross_entropy(paddle.to_tensor(plus), paddle.to_tensor(yb)))
            lm = float(F.cross_entropy(paddle.to_tensor(minus), paddle.to_tensor(yb)))
            fd[idx] = (lp - lm) / (2 * eps)
    finally:
        paddle.enable_static()
    del y
    return {"param_rel_error": worst, "prediction_rel_error": _rel(gp, fd)}


def case5_freeze(mode: str = "dynamic", seed: int = 0, steps: int = 5) -> dict:
    """Case 5: freeze hidden_layer_1 under Adam, train, then unfreeze and train again.

    Returns whether the frozen weights stayed bit-identical and how far they moved after.
    """
    paddle.seed(seed)
    data = _data(seed)
    enc = ImageMLPEncoder(_scope("model1"))
    batches = list(
        itertools.islice(
            iterate_minibatches(data.train.x, data.train.y, 128, np.random.default_rng(seed)),
            2 * steps,
        )
    )
    if mode == "dynamic":
        enc.build()
        opt = paddle.optimizer.Adam(0.001, parameters=enc.parameters())
        w = enc.get_param("hidden_layer_1")["hidden_layer_1"][0]
        other = enc.get_param("prediction")["prediction"][0]
        w0, o0 = w.numpy().copy(), other.numpy().copy()
        enc.freeze("hidden_layer_1")
        _train_batches_dynamic(enc, opt, batches[:steps])
        w1, o1 = w.numpy().copy(), other.numpy().copy()
        enc.unfreeze("hidden_layer_1")
        _train_batches_dynamic(enc, opt, batches[steps:])
        w2 = w.numpy().copy()
    else:
        scope = paddle.static.global_scope()
        name = f"{enc.scope}.hidden_layer_1.w_0"
        other_name = f"{enc.scope}.prediction.w_0"

        def value(n):
            return np.array(scope.find_var(n).get_tensor()).copy()

        run = _StaticRun(enc, lambda: paddle.optimizer.Adam(0.001), freeze=["hidden_layer_1"])
        run.exe.run(run.startup)
        w0, o0 = value(name), value(other_name)
        for xb, yb in batches[:steps]:
            run.run(xb, yb)
        w1, o1 = value(name), value(other_name)
        enc.unfreeze("hidden_layer_1")
        run2 = _StaticRun(enc, lambda: paddle.optimizer.Adam(0.001))  # the seed rebuilds
        init_missing(run2.exe, run2.startup)  # keep trained weights, init new Adam state
        for xb, yb in batches[steps:]:
            run2.run(xb, yb)
        w2 = value(name)
    return {
        "frozen_identical": bool(np.array_equal(w0, w1)),
        "others_moved": float(np.abs(o1 - o0).max()),
        "moved_after_unfreeze": float(np.abs(w2 - w1).max()),
    }


def _train_batches_dynamic(enc, opt, batches):
    for xb, yb in batches:
        F.cross_entropy(enc(paddle.to_tensor(xb)), paddle.to_tensor(yb)).backward()
        opt.step()
        opt.clear_grad(set_to_zero=False)


def case7_image_language(
    weights: str | None = None,
    tokenizer: str | None = None,
    images: np.ndarray | None = None,
    captions: list[str] | None = None,
    vision: dict | None = None,
    text: dict | None = None,
    steps: int = 100,
    lr: float = 0.001,
    seed: int = 0,
) -> dict:
    """Case 7: image + language. An image encoder and a text encoder embed into one space
    (CLIP's two towers) and score every image against every caption.

    With ``weights`` (a Hugging Face CLIPModel or open_clip safetensors file) and
    ``tokenizer`` (its vocab.json + merges.txt or tokenizer.json, a folder or a file), each
    tower loads its half of the file (``vision`` / ``text``: the file's sizes) and scores
    ``images`` (float [N, 3, H, W], CLIP-normalised) against ``captions``. Without them, two
    tiny towers learn the space from scratch on the bundled shapes captions with the
    symmetric contrastive loss for ``steps`` steps.

    Returns ``logits_per_image`` [N_img, N_txt] (as lists), ``matched`` (the load reports'
    verdict) or the loss and the held-out in-batch image-to-text accuracy before/after.
    """
    paddle.seed(seed)
    if weights is not None:
        image_encoder = CLIPVisionEncoder(_scope("image_encoder"), **(vision or {}))
        text_encoder = CLIPTextEncoder(_scope("text_encoder"), **(text or {}))
        reports = [enc.load_pretrained(weights) for enc in (image_encoder, text_encoder)]
        image_encoder.eval(), text_encoder.eval()
        tok = CLIPTokenizer.from_files(tokenizer, context_length=text_encoder.max_len)
        ids, _ = tok.encode_batch(captions)  # [N_txt, max_len], <|endoftext|> last
        with paddle.no_grad():
            logits = clip_logits(
                image_encoder(paddle.to_tensor(images)),  # [N_img, P], not normalised
                text_encoder(paddle.to_tensor(ids)),  # [N_txt, P]
                text_encoder.logit_scale,  # learned temperature (log scale), text tower
            )
        return {"logits_per_image": logits.numpy().tolist(), "matched": all(r.ok for r in reports)}

    data = load_shapes(seed=seed, n_train=1024, n_test=64, n_compositional=0)
    vocab = Vocab(shapes_vocabulary())
    image_encoder = CLIPVisionEncoder(
        _scope("image_encoder"), size="tiny", image_size=64, normalize=True
    )  # images in [0, 1]: CLIP's mean/std applied inside
    text_encoder = CLIPTextEncoder(
        _scope("text_encoder"), size="tiny", vocab_size=len(vocab), pool="eos", eos_id=vocab.eos_id
    )
    params = image_encoder.parameters() + text_encoder.parameters()
    opt = paddle.optimizer.Adam(lr, parameters=params)

    def batch(split, idx):
        x = split.images[idx].transpose(0, 3, 1, 2).astype("float32") / 255.0  # [B, 3, 64, 64]
        ids = vocab.encode_batch([split.captions[i] for i in idx])  # [B, T], <eos> last
        return paddle.to_tensor(x), paddle.to_tensor(ids)

    def scores(split, idx):
        x, ids = batch(split, idx)
        return clip_logits(image_encoder(x), text_encoder(ids), text_encoder.logit_scale)

    def held_out_accuracy() -> float:
        with paddle.no_grad():
            logits = scores(data.test, np.arange(len(data.test))).numpy()  # [64, 64]
        caps = np.array(data.test.captions)
        return float(np.mean(caps[logits.argmax(1)] == caps))  # its own caption scores best

    before, losses, rng = held_out_accuracy(), [], np.random.default_rng(seed)
    for _ in range(steps):
        logits = scores(data.train, rng.choice(len(data.train), 32, replace=False))  # [32, 32]
        target = paddle.arange(32)
        loss = (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
        loss.backward()
        opt.step()
        opt.clear_grad(set_to_zero=False)
        losses.append(float(loss))
    return {
        "loss_first": losses[0],
        "loss_last": float(np.mean(losses[-10:])),
        "acc_before": before,
        "acc_after": held_out_accuracy(),
        "logit_scale": float(text_encoder.logit_scale),
    }


CASES = {
    1: case1_train,
    2: case2_shared,
    3: case3_fetch_params,
    4: case4_gradients,
    5: case5_freeze,
    7: case7_image_language,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", type=int, choices=sorted(CASES), required=True)
    parser.add_argument("--mode", choices=["dynamic", "static"], default="dynamic")
    parser.add_argument("--weights", help="case 7: a CLIP safetensors file (with --tokenizer)")
    parser.add_argument("--tokenizer", help="case 7: its vocab.json + merges.txt folder")
    args = parser.parse_args()
    if args.case == 7:
        if args.mode == "static" or (args.weights is None) != (args.tokenizer is None):
            parser.error("case 7 runs in dynamic mode; give --weights and --tokenizer together")
        if args.weights is not None:
            parser.error("case 7 with your own file: call case7_image_language() with its sizes")
        print(json.dumps(case7_image_language(), indent=2))
        return
    if args.mode == "static":
        paddle.enable_static()
    print(json.dumps(CASES[args.case](args.mode), indent=2))


if __name__ == "__main__":
    main()
