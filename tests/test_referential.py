"""The referential arena: worlds, the game, populations and cross-play, exact resume, files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import paddle
import pytest

from paddlecraft.agents import Receiver, Sender
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.app import run_arena
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.referential import (
    ReferentialArena,
    attribute_world,
    egg_world,
    load_shape_objects,
)
from paddlecraft.arenas.referential.population import steps_to_reach
from paddlecraft.errors import ConfigError


def make_arena(
    n_attr: int = 2, n_val: int = 4, cell: str = "linear", **settings
) -> ReferentialArena:
    """A small attribute-world game (vector inputs claim no encoder scope); linear agents as
    the shipped config."""
    s = settings
    vocab, max_len = s.setdefault("vocab_size", 8), s.setdefault("max_len", 2)
    common = dict(
        vocab_size=vocab, max_len=max_len, hidden_size=32, embed_size=8, lr=0.005, cell=cell
    )
    speaker = Sender("speaker", input_size=n_attr * n_val, **common)
    listener = Receiver(
        "listener", input_size=n_attr * n_val, n_attributes=n_attr, n_values=n_val, **common
    )
    agents = {"speaker": speaker, "listener": listener}
    return ReferentialArena(agents, n_attributes=n_attr, n_values=n_val, **s)


@pytest.fixture
def scoped():
    made: list[ReferentialArena] = []

    def build(**kw) -> ReferentialArena:
        arena = make_arena(**kw)
        made.append(arena)
        return arena

    yield build
    for a in made:
        a.close()


def test_attribute_world_holds_out_combinations_not_values():
    w = attribute_world(2, 10, 0.1, seed=3)
    assert len(w.train) == 90 and len(w.test) == 10
    train = {tuple(m) for m in w.train.meanings}
    assert not train & {tuple(m) for m in w.test.meanings}  # unseen combinations
    for a in range(2):  # ... of values that all occur in training
        assert set(w.train.meanings[:, a]) == set(range(10))
    # one-hot inputs: attribute a's value v at a * n_values + v
    row = w.test.x[0]
    assert (
        row.sum() == 2 and row[w.test.meanings[0, 0]] == 1 and row[10 + w.test.meanings[0, 1]] == 1
    )
    assert np.array_equal(attribute_world(2, 10, 0.1, seed=3).test.meanings, w.test.meanings)


def test_shape_objects_have_their_attributes():
    d = load_shape_objects(n_train=40, n_test=8, image_size=32, seed=0).world
    assert d.train.x.shape == (40, 3, 32, 32) and d.train.x.dtype == np.float32
    assert d.attributes == ("shape", "colour", "size", "position")
    assert d.train.meanings.max(0).tolist() <= [2, 3, 1, 3]
    # a big shape covers more non-background pixels than a small one
    ink = (d.train.x.std(1) > 0.15).sum((1, 2))
    big = d.train.meanings[:, 2] == 1
    assert ink[big].mean() > 1.8 * ink[~big].mean()


def test_pair_agents_must_be_named():
    sp = Sender("speaker", input_size=8, vocab_size=4, max_len=1)
    with pytest.raises(ValueError, match="listener"):
        ReferentialArena({"speaker": sp})


def test_short_default_game_learns_far_above_chance(scoped):
    arena = scoped(epochs=3, steps_per_epoch=100, batch_size=32)
    before = arena.evaluate()["train_accuracy"]
    for e in range(arena.epochs):
        for b in arena.batches(e):
            arena.train_step(b)
    m = arena.evaluate()
    # 16 objects (14 in training, 2 held out): chance is 1/16
    assert before < 0.3 and m["train_accuracy"] >= 0.6, (before, m)
    assert m["distinct_messages"] >= 10 and 0 < m["message_entropy"] <= 4.0


def test_reinforce_with_baseline_learns(scoped):
    arena = scoped(
        channel="reinforce",
        epochs=3,
        steps_per_epoch=100,
        entropy_coef=0.02,
        variable_length=True,
        max_len=3,
    )
    for e in range(arena.epochs):
        for b in arena.batches(e):
            arena.train_step(b)
    base = arena.baselines[0]
    assert base.count == 300 and base.value < 0  # the mean of -loss so far
    assert arena.evaluate()["train_accuracy"] > 0.25  # 4x chance (1/16) in 300 steps


def test_variable_length_stop_weights_are_one_hot_and_differentiable(scoped):
    arena = scoped(variable_length=True, max_len=3)
    paddle.seed(0)
    out = arena.speakers[0](paddle.to_tensor(arena.world.train.x), "gs", 1.0)  # 14 objects
    w = arena.stop_weights(out)
    assert w.shape == [14, 3] and np.allclose(w.numpy().sum(1), 1.0)
    assert set(np.unique(w.numpy())) <= {0.0, 1.0}
    first_end = [list(m).index(0) if 0 in m else 2 for m in out["symbols"].numpy()]
    assert w.numpy().argmax(1).tolist() == first_end
    assert not w.stop_gradient  # the end position reaches the speaker's logits


def test_discrimination_candidates_hold_the_target_once(scoped):
    arena = scoped(game="discrimination", candidates=5)
    b = arena.draw(np.random.default_rng(0))
    c, pos, t = b["candidates"], b["position"], b["target"]
    assert c.shape == (32, 5) and np.array_equal(c[np.arange(32), pos], t)
    assert ((c == t[:, None]).sum(1) == 1).all()


def test_training_may_use_more_candidates_than_evaluation(scoped):
    arena = scoped(game="discrimination", candidates=4, train_candidates=8)
    b = arena.draw(np.random.default_rng(0))
    assert b["candidates"].shape == (32, 8)
    assert ((b["candidates"] == b["target"][:, None]).sum(1) == 1).all()
    ev = arena.eval_batch("test", arena.world.test)
    assert ev["candidates"].shape[1] == 4 and arena.chance_level() == pytest.approx(0.25)
    with pytest.raises(ConfigError, match="arena.train_candidates: at least 2"):
        scoped(game="discrimination", train_candidates=1)


def test_crossplay_matrix_has_every_pair(scoped, tmp_path):
    arena = scoped(speakers=2, listeners=3)
    assert sorted(arena.agents) == ["listener", "listener_1", "listener_2", "speaker", "speaker_1"]
    assert len({id(a) for a in arena.agents.values()}) == 5
    m = arena.evaluate()
    cells = {k: v for k, v in m.items() if k[-1].isdigit() and k.startswith("crossplay_")}
    assert sorted(cells) == [f"crossplay_{i}_{j}" for i in range(2) for j in range(3)]
    assert all(0.0 <= v <= 1.0 for v in cells.values())
    files = arena.artifacts(str(tmp_path))
    table = json.loads(Path(files["crossplay"]).read_text())
    train, test = np.array(table["train_accuracy"]), np.array(table["test_accuracy"])
    assert train.shape == test.shape == (2, 3)
    assert m["test_accuracy"] == pytest.approx(test.mean())
    assert m["train_accuracy"] == pytest.approx(train.mean())
    # the matrix is over every evaluated object, each split weighted by its size
    n_train, n_test = len(arena.world.train), len(arena.world.test)
    both = (train * n_train + test * n_test) / (n_train + n_test)
    assert np.allclose([[cells[f"crossplay_{i}_{j}"] for j in range(3)] for i in range(2)], both)
    assert np.allclose(table["accuracy"], both)
    assert m["crossplay_diagonal"] == pytest.approx((both[0, 0] + both[1, 1]) / 2)
    off = [both[0, 1], both[0, 2], both[1, 0], both[1, 2]]
    assert m["crossplay_gap"] == pytest.approx(max(abs(v - m["crossplay_diagonal"]) for v in off))
    diag_test = (test[0, 0] + test[1, 1]) / 2
    off_test = [test[0, 1], test[0, 2], test[1, 0], test[1, 2]]
    assert m["crossplay_test_gap"] == pytest.approx(max(abs(v - diag_test) for v in off_test))
    assert Path(files["crossplay_heatmap"]).stat().st_size > 1000


def test_population_resumes_bit_identically(scoped):
    arena = scoped(speakers=2, listeners=2, steps_per_epoch=10, batch_size=8)
    passed = check_arena(arena, steps=3)
    assert "resume from a checkpoint is bit-identical" in passed


def test_listener_resets_start_listeners_afresh_and_resume_bit_identically(scoped):
    arena = scoped(steps_per_epoch=10, batch_size=8, reset_listeners_every=2)
    listener, speaker = arena.listeners[0], arena.speakers[0]
    before = {k: v.numpy().copy() for k, v in listener.state_dict().items()}
    arena.train_step(next(iter(arena.batches(0))))
    arena.train_step(next(iter(arena.batches(0))))
    trained = {k: v.numpy().copy() for k, v in listener.state_dict().items()}
    said = {k: v.numpy().copy() for k, v in speaker.state_dict().items()}
    arena.train_step(next(iter(arena.batches(0))))  # step 3 starts with a reset: new weights
    after = listener.state_dict()
    assert any(not np.array_equal(trained[k], after[k].numpy()) for k in trained)
    assert any(not np.array_equal(before[k], after[k].numpy()) for k in before)
    assert any(not np.array_equal(said[k], v.numpy()) for k, v in speaker.state_dict().items())
    assert "resume from a checkpoint is bit-identical" in check_arena(
        scoped(steps_per_epoch=10, batch_size=8, reset_listeners_every=2), steps=5
    )
    with pytest.raises(ConfigError, match="reset_listeners_every"):
        scoped(reset_listeners_every=-1)


def test_egg_split_holds_out_value_zero_as_egg_does():
    w = egg_world(2, 10, 0.1, seed=0)
    # EGG data.split_holdout: 81 objects without a 0 (8 of them, int(0.1 * 81), uniform
    # hold-out), 18 with exactly one 0 (the test split), (0, 0) left out
    assert (len(w.train), len(w.test), len(w.more["uniform"])) == (73, 18, 8)
    assert (w.train.meanings != 0).all() and (w.more["uniform"].meanings != 0).all()
    assert ((w.test.meanings == 0).sum(1) == 1).all()
    assert np.array_equal(w.test.scored, w.test.meanings != 0)  # judged on the other attribute
    seen = {tuple(m) for m in w.train.meanings}
    assert not seen & {tuple(m) for m in w.more["uniform"].meanings}
    assert np.array_equal(egg_world(2, 10, 0.1, seed=0).train.meanings, w.train.meanings)
    with pytest.raises(ConfigError, match="arena.holdout"):
        egg_world(2, 10, 0.0, seed=0)


def test_egg_split_judges_only_the_seen_attributes(scoped):
    arena = scoped(n_val=5, vocab_size=8)
    arena.world = egg_world(2, 5, 0.25, seed=0)  # 16 without a 0: 4 uniform, 12 train; 8 test
    listener, test = arena.listeners[0], arena.world.test
    batch = {"target": np.arange(len(test))}
    h = listener(listener.to_tensor(np.zeros((len(test), 2), np.int64)))  # [8, 2, H]
    guess = listener.reconstruct(h).argmax(-1).numpy()[:, -1]  # [8, 2]
    right_seen = ((guess == test.meanings) | ~test.scored).all(1).mean()
    _, acc = arena.outcome(listener, listener.to_tensor(np.zeros((8, 2), np.int64)), test, batch)
    assert acc.numpy()[:, -1].mean() == pytest.approx(right_seen)
    assert right_seen > (guess == test.meanings).all(1).mean()  # the mask matters here
    m = arena.evaluate()
    assert {"train_accuracy", "test_accuracy", "uniform_accuracy"} <= set(m)


def test_iterated_learning_passes_the_language_to_new_agents(scoped):
    arena = scoped(epochs=3, steps_per_epoch=100, batch_size=32, iterated_every=300,
                   imitation_steps=300)  # fmt: skip
    for e in range(arena.epochs):
        for b in arena.batches(e):
            arena.train_step(b)
    train = arena.world.train
    old = arena.messages(arena.speakers[0], train.x)
    before = arena.evaluate()["train_accuracy"]
    weights = {k: v.numpy().copy() for k, v in arena.speakers[0].state_dict().items()}
    arena.train_step(next(iter(arena.batches(3))))  # step 300: a new generation first
    new = arena.speakers[0].state_dict()
    assert any(not np.allclose(weights[k], new[k].numpy()) for k in weights)
    # the new speaker says what the old one said (it learned, it was not copied), and the
    # new listener understands it as well as the old pair did
    assert (arena.messages(arena.speakers[0], train.x) == old).all(1).mean() >= 0.9
    assert before >= 0.6 and arena.evaluate()["train_accuracy"] >= before - 0.15
    assert "resume from a checkpoint is bit-identical" in check_arena(
        scoped(steps_per_epoch=10, batch_size=8, iterated_every=2, imitation_steps=3), steps=5
    )
    with pytest.raises(ConfigError, match="imitation_steps"):
        scoped(iterated_every=10, imitation_steps=0)


@pytest.mark.parametrize("cell", ["linear", "gru"])
def test_gs_entropy_bonus_subtracts_the_speakers_entropy(scoped, cell):
    plain, bonus = scoped(cell=cell), scoped(cell=cell, gs_entropy_coef=0.5)
    for a, b in zip(plain.agents.values(), bonus.agents.values()):
        b.set_state_dict(a.state_dict())
    batch = next(iter(plain.batches(0)))
    paddle.seed(7)
    base, _, _ = plain.play(plain.speakers[0], plain.listeners[0], batch)
    paddle.seed(7)
    loss, _, spoken = bonus.play(bonus.speakers[0], bonus.listeners[0], batch)
    p = np.exp(spoken["logits"].numpy())  # [B, L, V]
    p /= p.sum(-1, keepdims=True)
    entropy = -(p * np.log(p)).sum(-1).mean()
    assert spoken["logits"].shape == [32, 2, 8]  # [B, L, V]
    assert float(loss) == pytest.approx(float(base) - 0.5 * entropy, rel=1e-5)
    assert entropy > 1.0  # untrained: near log(8), so the bonus is not a no-op
    resumed = scoped(cell=cell, gs_entropy_coef=0.5, steps_per_epoch=10, batch_size=8)
    assert "resume from a checkpoint is bit-identical" in check_arena(resumed, steps=3)
    with pytest.raises(ConfigError, match="gs_entropy_coef"):
        scoped(gs_entropy_coef=-1.0)


def test_reinforce_population_resumes_bit_identically(scoped):
    arena = scoped(speakers=2, listeners=1, channel="reinforce", steps_per_epoch=10, batch_size=8)
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=3)


def test_run_writes_messages_and_language_measures(scoped, tmp_path):
    arena = scoped(epochs=2, steps_per_epoch=20, speakers=2, listeners=2, newcomer_steps=30)
    results = run_arena(arena, tmp_path, standard_callbacks(progress=False))
    m = results["metrics"]
    for key in (
        "topsim",
        "posdis",
        "bosdis",
        "message_entropy",
        "vocab_used",
        "train_accuracy",
        "test_accuracy",
        "crossplay_gap",
        "newcomer_steps_to_goal",
    ):
        assert key in m, key
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["metrics"]["topsim"] == m["topsim"]
    rows = [json.loads(line) for line in (tmp_path / "messages.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 16  # every object (14 train + 2 held out) of both speakers
    assert {r["split"] for r in rows} == {"train", "test"}
    assert all(len(r["meaning"]) == 2 and len(r["message"]) == 2 for r in rows)
    test_meanings = {tuple(r["meaning"]) for r in rows if r["split"] == "test"}
    assert test_meanings == {tuple(m) for m in arena.world.test.meanings}
    assert (tmp_path / "newcomer.png").is_file() and (tmp_path / "crossplay.png").is_file()


def test_steps_to_reach_reads_the_moving_average():
    hist = [0.0] * 30 + [1.0] * 30
    assert steps_to_reach(hist, 0.5, window=10) == 35  # 5 of the last 10 at 1.0
    assert steps_to_reach(hist, 1.01, window=10) is None


@pytest.mark.parametrize("cell", ["gru", "lstm", "transformer", "linear"])
def test_every_cell_speaks_and_reads_causally(cell):
    kw = dict(vocab_size=6, max_len=3, hidden_size=16, embed_size=8, cell=cell)
    sp = Sender("speaker", input_size=8, **kw)
    li = Receiver("listener", input_size=8, n_attributes=2, n_values=4, **kw)
    x = paddle.to_tensor(np.eye(8, dtype=np.float32)[:5])
    out = sp(x, "gs", 1.0)
    assert out["symbols"].shape == [5, 3] and out["onehot"].shape == [5, 3, 6]
    rl = sp(x, "reinforce")
    assert rl["log_prob"].shape == [5, 3] and (rl["log_prob"].numpy() <= 0).all()
    h = li(out["onehot"])
    assert h.shape == [5, 3, 16] and li.reconstruct(h).shape == [5, 3, 2, 4]
    # the reading after symbol t ignores the symbols after it (variable length relies on it)
    other = out["symbols"].numpy().copy()
    other[:, 2] = (other[:, 2] + 1) % 6
    h2 = li(paddle.to_tensor(other))
    np.testing.assert_allclose(h2.numpy()[:, :2], li(out["symbols"]).numpy()[:, :2], atol=1e-5)
    assert not np.allclose(h2.numpy()[:, 2], h.numpy()[:, 2])
    assert all(
        p.name.startswith(("speaker.", "listener.")) for p in [*sp.parameters(), *li.parameters()]
    )


# ----------------------------------------------------------------------------- spoken channel
def test_noise_is_added_at_the_asked_snr():
    from paddlecraft.arenas.referential.spoken import add_noise

    rng = np.random.default_rng(0)
    wave = np.sin(np.linspace(0, 2000, 80000)).astype(np.float32) * 0.3
    for snr in (-5.0, 0.0, 10.0):
        noisy = add_noise(wave, snr, rng)
        measured = 10 * np.log10(np.mean(wave**2) / np.mean((noisy - wave) ** 2))
        assert abs(measured - snr) < 0.1


def test_spoken_game_hears_messages_at_one_snr():
    ear = dict(
        _target_="paddlecraft.encoders.SpeechEncoder",
        sample_rate=8000,
        n_mels=16,
        n_fft=256,
        hop_length=80,
        channels=[8],
        hidden_size=16,
        embedding_dim=16,
        bidirectional=False,
    )
    kw = dict(vocab_size=4, max_len=2, hidden_size=16, embed_size=8, lr=0.003)
    sp = Sender("speaker", input_size=6, cell="linear", **kw)
    li = Receiver("listener", n_attributes=2, n_values=3, ear=ear, **kw)
    arena = ReferentialArena(
        {"speaker": sp, "listener": li},
        n_attributes=2,
        n_values=3,
        holdout=0.2,
        channel="reinforce",
        spoken=True,
        snr_db=5.0,
        eval_snrs=[0.0, 20.0],
        batch_size=8,
        steps_per_epoch=4,
        **{k: v for k, v in kw.items() if k in ("vocab_size", "max_len")},
    )
    wave = arena.voice.say(np.array([[1, 2], [3, 3]]), 5.0, np.random.default_rng(1))
    again = arena.voice.say(np.array([[1, 2], [3, 3]]), 5.0, np.random.default_rng(1))
    assert wave.ndim == 2 and wave.shape[1] > 0.2 * 8000 and np.array_equal(wave, again)
    before = [p.numpy().copy() for p in li.ear.parameters()]
    for b in arena.batches(0):
        m = arena.train_step(b)
    assert np.isfinite(m["loss"])
    assert any(not np.array_equal(a, p.numpy()) for a, p in zip(before, li.ear.parameters()))
    ev = arena.evaluate()
    assert {"accuracy_snr_0", "accuracy_snr_20"} <= set(ev)
    assert all(0.0 <= ev[k] <= 1.0 for k in ("accuracy_snr_0", "accuracy_snr_20"))


CLASSES = {"vit_tiny": "ViTEncoder", "resnet18": "ResNetEncoder", "mlp": "ImageMLPEncoder",
           "cnn": "ImageCNNEncoder"}  # fmt: skip


@pytest.mark.parametrize(("speaker", "listener"), [("vit_tiny", "resnet18"), ("mlp", "cnn")])
def test_image_encoders_plug_into_speaker_and_listener_by_one_override(
    speaker, listener, compose_config
):
    """encoder@agents.<agent>.encoder=X swaps either side; sizes come from the data."""
    from paddlecraft.arenas.engine.app import build_agents

    cfg = compose_config(
        "arena=referential_shapes",
        f"encoder@agents.speaker.encoder={speaker}",
        f"encoder@agents.listener.encoder={listener}",
    )
    built = build_agents(cfg)
    side = cfg.data.image_size
    images = paddle.rand([2, cfg.data.channels, side, side])  # [B, C, H, W]
    for name, want in (("speaker", speaker), ("listener", listener)):
        enc = built[name].view.encoder
        assert type(enc).__name__ == CLASSES[want]
        feats = enc.forward_features(images)
        assert feats.shape == [2, enc.feature_dim]  # the contract's pooled features


def test_chance_level_is_one_in_k_or_a_guess_per_attribute(scoped):
    """A run at or below it is flagged (docs/reliability.md): 1/K, or prod(1/values)."""
    assert scoped(game="discrimination", candidates=5).chance_level() == pytest.approx(0.2)
    assert scoped(game="reconstruction").chance_level() == pytest.approx(1 / 16)  # 2 x 4 values


def test_fast_paths_equal_the_paddle_calls_they_replace():
    """The hot-path shortcuts give bit for bit what the plain Paddle calls give."""
    import paddle.nn.functional as F

    from paddlecraft.agents.channel import gumbel_softmax_st, gumbel_symbols
    from paddlecraft.agents.referential import _linear
    from paddlecraft.arenas.referential.arena import _cross_entropy

    logits = paddle.to_tensor(np.random.default_rng(0).standard_normal((8, 3, 5)), "float32")
    for t in (1.0, 0.5):
        paddle.seed(1)
        y, sym = gumbel_symbols(logits, t)
        paddle.seed(1)  # the same noise, written out as before the shortcut
        u = paddle.rand(logits.shape).clip(1e-10, 1.0 - 1e-7)
        soft = F.softmax((logits + (-paddle.log((-paddle.log(u)).clip(min=1e-10)))) / t, -1)
        want = F.one_hot(soft.argmax(-1), 5).astype("float32") - soft.detach() + soft
        np.testing.assert_array_equal(y.numpy(), want.numpy())
        np.testing.assert_array_equal(sym.numpy(), want.argmax(-1).numpy())
        paddle.seed(1)
        np.testing.assert_array_equal(gumbel_softmax_st(logits, t).numpy(), want.numpy())
    layer = paddle.nn.Linear(5, 4)
    np.testing.assert_array_equal(_linear(layer, logits).numpy(), layer(logits).numpy())
    label = paddle.to_tensor(np.random.default_rng(1).integers(0, 5, (8, 3, 1)))
    np.testing.assert_array_equal(
        _cross_entropy(logits, label).numpy(),
        F.cross_entropy(logits, label, reduction="none").numpy(),
    )


def test_egg_experiment_is_its_split_and_grid(compose_config):
    cfg = compose_config("arena=referential", "+experiment=egg_compo", "arena.n_values=5")
    assert cfg.data.loader._target_ == "paddlecraft.arenas.referential.egg_world"
    a, sp, li = cfg.arena, cfg.agents.speaker, cfg.agents.listener
    assert (a.n_attributes, a.n_values, a.vocab_size, a.max_len, a.holdout) == (2, 5, 100, 2, 0.1)
    assert (sp.cell, li.cell, sp.embed_size, li.embed_size) == ("gru", "gru", 5, 30)
    assert (sp.vocab_size, li.n_values) == (100, 5)  # the agents follow the arena's sizes
    default = compose_config("arena=referential")
    assert default.arena.vocab_size == 64 and default.agents.speaker.vocab_size == 64


def test_gru_experiment_is_gru_agents_with_entropy_and_iterated_learning(compose_config):
    cfg = compose_config("arena=referential", "+experiment=referential_gru")
    a = cfg.arena
    assert (cfg.agents.speaker.cell, cfg.agents.listener.cell) == ("gru", "gru")
    assert (a.gs_entropy_coef, a.iterated_every, a.imitation_steps, a.vocab_size) == (
        0.1,
        1500,
        200,
        64,
    )


def test_mixed_population_of_frozen_loaded_towers_plays_every_pair(compose_config, tmp_path):
    """+experiment=referential_mixed: two encoder families in one population; the second
    pair's encoders loaded from a weights file and frozen (they do not move, BatchNorm
    statistics included), every pair in the cross-play table."""
    from paddlecraft.arenas.engine.app import build_agents, build_arena
    from paddlecraft.encoders import ResNetEncoder

    src = ResNetEncoder(
        "src", in_channels=3, depth=18, width=16, small_input=False, num_classes=None
    ).build()
    path = tmp_path / "resnet18_w16.safetensors"
    src.save_pretrained(path)
    want = {p.name.split(".", 1)[1]: p.numpy() for p in src.parameters()}
    loaded = [f"agents.{a}.encoder.pretrained={path}" for a in ("speaker_1", "listener_1")]
    frozen = [f"agents.{a}.frozen_encoder=true" for a in ("speaker_1", "listener_1")]
    cfg = compose_config(
        "arena=referential_shapes", "+experiment=referential_mixed", *loaded, *frozen,
        "data.loader.n_train=64", "data.loader.n_test=32", "arena.eval_size=32",
        "arena.analysis_size=16", "arena.epochs=1", "arena.steps_per_epoch=4",
        "arena.batch_size=4", "arena.train_candidates=4",
    )  # fmt: skip
    agents = build_agents(cfg)
    arena = build_arena(cfg, agents)
    assert [a.name for a in arena.speakers] == ["speaker", "speaker_1"]
    families = {type(a.view.encoder).__name__ for a in arena.speakers + arena.listeners}
    assert families == {"ImageCNNEncoder", "ResNetEncoder"}
    encs = {a: agents[a].view.encoder for a in ("speaker_1", "listener_1")}
    for enc in encs.values():  # the file's weights, every one
        got = {p.name.split(".", 2)[2]: p.numpy() for p in enc.parameters()}
        assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    for batch in arena.batches(0):
        arena.train_step(batch)
    for enc in encs.values():
        got = {p.name.split(".", 2)[2]: p.numpy() for p in enc.parameters()}
        assert all(got[k].tobytes() == want[k].tobytes() for k in want)
    live = agents["speaker"].view.encoder.parameters()[0]
    assert not live.stop_gradient  # the other family trains
    m = arena.evaluate()
    assert {f"crossplay_{i}_{j}" for i in (0, 1) for j in (0, 1)} <= m.keys()
    assert 0.0 <= m["crossplay_gap"] <= 1.0


@pytest.mark.slow
def test_mixed_population_meets_its_crossplay_target(tmp_path):
    """Acceptance: two encoder families in one 2 x 2 population on shapes (K=4): every
    cross-play pair within 0.03 of the diagonal (figures: docs/results.json)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, str(root / "run.py"), "arena=referential_shapes",
         "+experiment=referential_mixed", "trainer.progress=false", f"hydra.run.dir={tmp_path}"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "results.json").read_text())["metrics"]
    assert m["crossplay_gap"] <= 0.03, m
