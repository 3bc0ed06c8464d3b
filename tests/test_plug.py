"""Standard encoders plug into every agent slot through one override form (issue 21).

Every (encoder config, role) pair is composed through Hydra with
``encoder@agents.<agent>.<slot>=<encoder>``, built by the engine's ``build_agents`` and
trained 3 steps in-process; a user's own encoder class (defined here, outside the package)
plugs into the classifier, the discriminator and the policy; two pairs run from the
command line's arguments (through the command's ``main``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest
from errors_kit import config_error
from paddle import nn

from paddlecraft.agents import Classifier, Discriminator, Policy
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine.app import build_agents
from paddlecraft.encoders.base import Encoder, InputSpec, LayerSpec

ROOT = Path(__file__).resolve().parents[1]

#: tiny widths/depths per encoder config, so each pair trains in well under a second
TINY = {
    "mlp": ["hidden_size=16"],
    "cnn": ["channels=[4,8]", "embedding_dim=16"],
    "resnet18": ["width=4"],
    "vit_tiny": ["size=null", "dim=16", "depth=1", "heads=2"],
    "bert_mini": ["size=null", "dim=16", "depth=1", "heads=2", "max_len=32"],
    "whisper_tiny": ["size=null", "dim=16", "depth=1", "heads=2", "n_mels=16"],
}
IMAGE_ENCODERS = ("mlp", "cnn", "resnet18", "vit_tiny")
CAPTIONS = ["a red circle left of a blue square", "a green triangle above a yellow circle"]


def _encoder(agent: str, slot: str, name: str) -> list[str]:
    """The one override form plus the tiny sizes for ``agents.<agent>.<slot>``."""
    return [f"encoder@agents.{agent}.{slot}={name}"] + [
        f"agents.{agent}.{slot}.{o}" for o in TINY[name]
    ]


def _build(compose_config, *overrides: str) -> dict:
    paddle.seed(0)
    return build_agents(compose_config(*overrides))


def _train(agent, loss_fn, steps: int = 3) -> list[float]:
    """``steps`` updates of ``loss_fn()``; returns the losses, checks every encoder moved."""
    before = {p.name: p.numpy().copy() for p in agent.trainable_parameters()}
    losses = []
    for _ in range(steps):
        loss = loss_fn()
        losses.append(float(loss))
        agent.update(loss)
    assert np.all(np.isfinite(losses)), losses
    moved = {n for n, p in ((p.name, p) for p in agent.trainable_parameters())
             if not np.array_equal(before[n], p.numpy())}  # fmt: skip
    for enc in agent.encoders():
        assert any(p.name in moved for p in enc.parameters()), f"{enc.scope} did not train"
    return losses


def _first_input(enc) -> tuple:
    return tuple(next(iter(enc.input_specs.values())).shape)


# ----------------------------------------------------------------------------- roles
@pytest.mark.parametrize("name", IMAGE_ENCODERS)
def test_classifier_takes_every_image_encoder(name, compose_config):
    agents = _build(compose_config, "arena=classify", *_encoder("classifier", "encoder", name))
    clf = agents["classifier"]
    enc = clf.encoder
    # sized from the data (8x8 grey digits, 10 classes), head only because a classifier asks
    assert enc.num_classes == 10 and "prediction" in enc.output_names
    assert enc.forward_all(paddle.rand([2, 1, 8, 8]))["pooled"].shape == [2, enc.feature_dim]
    rng = np.random.default_rng(0)
    x = paddle.to_tensor(rng.random((16, 1, 8, 8), np.float32))
    y = paddle.to_tensor(rng.integers(0, 10, 16))
    losses = _train(clf, lambda: clf.loss(x, y))
    assert losses[-1] < losses[0]  # the same batch, three Adam steps


@pytest.mark.parametrize("name", IMAGE_ENCODERS)
def test_discriminator_takes_every_image_encoder(name, compose_config):
    agents = _build(compose_config, "arena=gan", *_encoder("discriminator", "encoder", name))
    disc = agents["discriminator"]
    assert disc.encoder.output_names[0] == "pooled"  # headless
    assert disc.critic.weight.shape == [disc.encoder.feature_dim, 1]
    x = paddle.rand([8, 1, 8, 8])
    _train(disc, lambda: ((disc(x) - 1.0) ** 2).mean())


def _boards(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    cells = rng.integers(0, 3, (n, 3, 3))
    obs = np.stack([cells == 1, cells == 2], axis=-1).astype(np.float32)  # [n, 3, 3, 2]
    return obs, np.ones((n, 9), bool)


@pytest.mark.parametrize("name", IMAGE_ENCODERS)
def test_policy_takes_every_image_encoder(name, compose_config):
    agents = _build(
        compose_config, "arena=selfplay", "game=tictactoe", *_encoder("policy", "encoder", name)
    )
    pol = agents["policy"]
    # sized from the 3x3x2 board: planes first for image encoders, flat for the MLP
    shape = _first_input(pol.encoder)
    assert shape == {"mlp": (18,), "resnet18": (2, None, None)}.get(name, (2, 3, 3))
    rng = np.random.default_rng(0)
    obs, masks = _boards(rng, 32)
    actions = pol.act(obs, masks, greedy=False, rng=rng)
    assert masks[np.arange(32), actions].all()

    def loss():
        logp, entropy, value = pol.evaluate_actions(obs, masks, actions)
        return -logp.mean() + (value**2).mean() - 0.01 * entropy.mean()

    _train(pol, loss)


def _shapes(n: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (n, 64, 64, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", IMAGE_ENCODERS)
def test_captioner_takes_every_image_encoder(name, compose_config):
    agents = _build(
        compose_config,
        "arena=caption",
        *_encoder("captioner", "encoder", name),
        "decoder@agents.captioner.decoder=gpt_text",
        "agents.captioner.decoder.dim=16",
        "agents.captioner.decoder.depth=1",
    )
    cap = agents["captioner"]
    assert type(cap.decoder).__name__ == "TransformerTextDecoder"
    assert cap.decoder.cond_dim == cap.encoder.feature_dim  # the contract's width
    images = _shapes(4)
    captions = CAPTIONS * 2
    _train(cap, lambda: cap.loss(images, captions))
    assert len(cap.caption(images[:2])) == 2


@pytest.mark.parametrize("name", IMAGE_ENCODERS)
def test_listener_takes_every_image_encoder(name, compose_config):
    agents = _build(compose_config, "arena=caption", *_encoder("listener", "encoder", name))
    lis = agents["listener"]
    images = _shapes(4)
    _train(lis, lambda: lis.loss(CAPTIONS * 2, images))
    assert lis.choose(CAPTIONS, images[:4].reshape(1, 4, 64, 64, 3).repeat(2, 0)).shape == (2,)


def test_listener_takes_bert_mini_as_its_text_encoder(compose_config):
    agents = _build(
        compose_config, "arena=caption", *_encoder("listener", "text_encoder", "bert_mini")
    )
    lis = agents["listener"]
    assert type(lis.text_encoder).__name__ == "TransformerTextEncoder"
    assert lis.text_encoder.vocab_size == len(lis.vocab)  # filled in from the words
    _train(lis, lambda: lis.loss(CAPTIONS * 2, _shapes(4)))


@pytest.mark.parametrize("chain", ["spoken", "asr"])
def test_recognizer_takes_whisper_tiny(chain, compose_config):
    agents = _build(
        compose_config, "arena=caption", f"chain={chain}",
        *_encoder("recognizer", "encoder", "whisper_tiny"),
    )  # fmt: skip
    rec = agents["recognizer"]
    assert type(rec.encoder).__name__ == "WhisperStyleEncoder" and rec.encoder.waveform_input
    rng = np.random.default_rng(0)
    waves = rec.prepare([rng.standard_normal(n).astype(np.float32) * 0.1 for n in (8000, 6000)])
    _train(rec, lambda: rec.loss(waves, ["a red circle", "a blue square"]))
    assert len(rec.transcribe(list(waves))) == 2


def test_the_spoken_listener_hears_through_whisper_tiny_by_one_override(compose_config):
    """``encoder@agents.listener.ear=...`` swaps the ear; the voice follows its sample rate."""
    from paddlecraft.arenas.engine.app import build_arena

    cfg = compose_config(
        "arena=referential_spoken", *_encoder("listener", "ear", "whisper_tiny"),
        "arena.batch_size=4", "arena.steps_per_epoch=1",
    )  # fmt: skip
    paddle.seed(0)
    agents = build_agents(cfg)
    ear = agents["listener"].ear.encoder
    assert type(ear).__name__ == "WhisperStyleEncoder"
    arena = build_arena(cfg, agents)
    assert arena.voice.sample_rate == ear.sample_rate == 16000
    before = [p.numpy().copy() for p in ear.parameters()]
    assert np.isfinite(arena.train_step(next(iter(arena.batches(0))))["loss"])
    assert any(not np.array_equal(a, p.numpy()) for a, p in zip(before, ear.parameters()))


#: every built-in arena, and each chain and game that changes its agents
VARIANTS = (
    [[f"arena={p.stem}"] for p in sorted((ROOT / "conf" / "arena").glob("*.yaml"))]
    + [["arena=caption", f"chain={p.stem}"] for p in sorted((ROOT / "conf" / "chain").glob("*.yaml"))]
    + [["arena=selfplay", f"game={p.stem}"] for p in sorted((ROOT / "conf" / "game").glob("*.yaml"))]
)  # fmt: skip


def _slot_table() -> set[str]:
    """The ``agent.slot`` names of docs/agents.md's slot table."""
    text = (ROOT / "docs" / "agents.md").read_text().split("| arena | agent.slot |", 1)[1]
    rows = [line.split("|")[2] for line in text.splitlines()[2:] if line.startswith("|")]
    rows = rows[: next((i for i, r in enumerate(rows) if not r.strip()), len(rows))]
    return {name for row in rows for name in re.findall(r"`(\w+\.\w+)`", row)}


def test_every_encoder_slot_is_in_the_slot_table_and_swapped_by_one_override(compose_config):
    """docs/agents.md: "one override form swaps the encoder of any slot of any agent". Each
    agent key holding an encoder or decoder in a built-in arena is a row of the page's table
    and a Hydra choice (``encoder@agents.<slot>`` / ``decoder@...``), not an inline block."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    compose_config("arena=classify")  # the built-in schemas registered
    table, seen, inline = _slot_table(), set(), []
    for overrides in VARIANTS:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
        choices = set(cfg.hydra.runtime.choices)
        agents = OmegaConf.to_container(cfg.agents, resolve=False)
        for agent, settings in agents.items():
            for key, value in settings.items():
                if not (isinstance(value, dict) and str(value.get("_target_", "")).startswith(
                    "paddlecraft.encoders."
                )):  # fmt: skip
                    continue
                slot = f"{agent}.{key}"
                seen.add(slot)
                if not {f"encoder@agents.{slot}", f"decoder@agents.{slot}"} & choices:
                    inline.append(f"{' '.join(overrides)}: {slot}")
    assert inline == [], "put the slot's encoder in the defaults list (a conf/encoder file)"
    assert sorted(seen - table) == [], "add a row to docs/agents.md's slot table"
    assert sorted(table - seen) == []  # and the table names no slot that is not there
    assert {"generator.encoder", "listener.ear", "recognizer.encoder"} <= seen


def test_an_encoder_config_takes_one_straight_path_to_a_built_encoder(monkeypatch, make_scope):
    """Issue 35: a config went base -> instantiate -> plug -> instantiate ... (three visits
    each). Now every step runs once, in order, inside `build_encoder`: checked, sized,
    size-checked, built, contract- and input-checked."""
    import paddlecraft.agents.plug as plug

    steps = ("check_targets", "sized_config", "check_sizes", "check_takes_images",
             "instantiate", "check_contract", "check_image_input")  # fmt: skip
    calls: list[str] = []

    def counted(name):
        real = getattr(plug, name)
        return lambda *a, **k: (calls.append(name), real(*a, **k))[1]

    for name in steps:
        monkeypatch.setattr(plug, name, counted(name))
    mlp = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 8}
    agent = Classifier(make_scope("path"), encoder=mlp, input_shape=[1, 4, 4], num_classes=3)
    # a classifier reads its encoder's own head, so no feature-contract check
    assert calls == [s for s in steps if s != "check_contract"]
    assert agent.encoder.built and agent.encoder.input_size == 16  # sized from the data
    calls.clear()
    Discriminator(make_scope("path"), encoder=mlp, input_shape=[1, 4, 4])  # reads features
    assert calls == list(steps)


def test_presets_stay_shorthands_and_the_one_form_overrides_them(compose_config):
    cfg = compose_config("arena=caption", "agent@agents.captioner=captioner_resnet_gpt")
    enc, dec = cfg.agents.captioner.encoder, cfg.agents.captioner.decoder
    assert enc._target_.endswith("ResNetEncoder") and dec._target_.endswith(
        "TransformerTextDecoder"
    )
    cfg = compose_config(
        "arena=caption", "agent@agents.captioner=captioner_resnet_gpt",
        "encoder@agents.captioner.encoder=vit_tiny",
    )  # fmt: skip
    assert cfg.agents.captioner.encoder._target_.endswith("ViTEncoder")
    assert cfg.agents.captioner.decoder._target_.endswith("TransformerTextDecoder")


def test_a_patch_size_that_does_not_divide_the_board_fails_naming_the_setting(compose_config):
    cfg = compose_config(
        "arena=selfplay", "game=connect_four", *_encoder("policy", "encoder", "vit_tiny"),
        "agents.policy.encoder.patch_size=2",
    )  # fmt: skip
    msg = str(config_error(build_agents, cfg))
    assert (
        msg.startswith("agents.policy.encoder: ") and "patch_size=2 does not divide the 6x7" in msg
    )
    # the shipped default (patch_size null) fits the 6x7 board
    agents = _build(
        compose_config,
        "arena=selfplay",
        "game=connect_four",
        *_encoder("policy", "encoder", "vit_tiny"),
    )
    assert agents["policy"].encoder.patch_size == 1


def test_a_size_restated_against_the_data_fails_before_any_work(compose_config):
    cfg = compose_config(
        "arena=classify",
        "encoder@agents.classifier.encoder=cnn",
        "+agents.classifier.encoder.in_channels=3",
    )
    msg = str(config_error(build_agents, cfg))
    assert msg.startswith("agents.classifier.encoder.in_channels=3 but this agent's input gives 1")


# ----------------------------------------------------------------------------- a user's encoder
class PatchMeanEncoder(Encoder):
    """A user's encoder, written from docs/write-encoder.md: conv cells, mean-pooled.

    Input ``image`` [B, in_channels, H, W]; outputs ``pooled`` [B, width], ``hidden``
    [B, H*W, width] and, with ``num_classes``, ``prediction`` [B, num_classes].
    """

    def __init__(
        self, scope: str, in_channels: int = 3, width: int = 8, num_classes: int | None = None
    ) -> None:
        super().__init__(scope)
        self.in_channels, self.num_classes, self.feature_dim = in_channels, num_classes, width
        self.declare(
            "cells",
            LayerSpec(
                lambda: nn.Conv2D(in_channels, width, 3, padding=1), ("conv", in_channels, width)
            ),
        )
        if num_classes is not None:
            self.declare(
                "prediction",
                LayerSpec(lambda: nn.Linear(width, num_classes), ("linear", width, num_classes)),
            )
        self.declare_input("image", InputSpec((in_channels, None, None)))
        names = ("pooled", "hidden")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    def _forward(self, x: paddle.Tensor) -> dict[str, paddle.Tensor]:
        h = F.relu(self.layers["cells"](x))  # [B, width, H, W]
        hidden = h.flatten(2).transpose([0, 2, 1])  # [B, H*W, width]
        out = {"pooled": hidden.mean(axis=1), "hidden": hidden}  # [B, width], [B, H*W, width]
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](out["pooled"])  # [B, num_classes]
        return out


USER = {"_target_": f"{__name__}.PatchMeanEncoder", "width": 8}


def test_a_users_encoder_is_refused_unless_allowed(make_scope):
    with pytest.raises(Exception, match="allow_targets"):
        Classifier(make_scope("clf"), encoder=USER, input_shape=[1, 8, 8], num_classes=10)


def test_a_users_encoder_plugs_into_classifier_discriminator_and_policy(make_scope):
    allow = [USER["_target_"]]
    rng = np.random.default_rng(0)
    paddle.seed(0)
    clf = Classifier(make_scope("clf"), encoder=USER, input_shape=[1, 8, 8], num_classes=10,
                     allow_targets=allow)  # fmt: skip
    disc = Discriminator(
        make_scope("disc"), encoder=USER, input_shape=[1, 8, 8], allow_targets=allow
    )
    pol = Policy(
        make_scope("pol"), encoder=USER, obs_shape=[3, 3, 2], num_actions=9, allow_targets=allow
    )
    # filled in: in_channels from each agent's input; a head only for the classifier
    assert clf.encoder.in_channels == 1 and clf.encoder.num_classes == 10
    assert disc.encoder.num_classes is None and pol.encoder.in_channels == 2
    x = paddle.to_tensor(rng.random((16, 1, 8, 8), np.float32))
    y = paddle.to_tensor(rng.integers(0, 10, 16))
    _train(clf, lambda: clf.loss(x, y))
    _train(disc, lambda: ((disc(x) - 1.0) ** 2).mean())
    obs, masks = _boards(rng, 16)
    actions = pol.act(obs, masks, greedy=False, rng=rng)
    _train(pol, lambda: -pol.evaluate_actions(obs, masks, actions)[0].mean())


def test_a_decoder_in_an_encoder_slot_is_refused_naming_the_slot_and_group(make_scope):
    """An image decoder given where an image encoder goes: refused before it is built (the
    kind check of every slot), naming the slot and the encoder group's options."""
    bad = {"_target_": "paddlecraft.encoders.ImageDecoder", "latent_dim": 4, "image_size": 8}
    with pytest.raises(
        ConfigError,
        match=r"agents\.\w+\.encoder: ImageDecoder is an image decoder, but this slot takes an "
        r"image encoder \(encoders are in conf/encoder/, not conf/decoder/\); choose one, e\.g\. "
        r"encoder@agents\.\w+\.encoder=cnn",
    ):
        Discriminator(make_scope("disc"), encoder=bad, input_shape=[1, 8, 8])


# ----------------------------------------------------------------------------- command line
@pytest.mark.parametrize(
    "overrides",
    [
        ["arena=classify", *_encoder("classifier", "encoder", "vit_tiny"), "arena.epochs=1"],
        [
            "arena=selfplay", "game=tictactoe", *_encoder("policy", "encoder", "cnn"),
            "arena.epochs=1", "arena.steps_per_epoch=2", "arena.games_per_step=16",
            "arena.eval.games.random=2", "arena.eval.games.minimax=2",
            "arena.eval.final_games.random=2", "arena.eval.final_games.minimax=2",
        ],
    ],
    ids=["classify-vit_tiny", "selfplay-cnn"],
)  # fmt: skip
@pytest.mark.slow
def test_pairs_run_from_the_command_line_with_the_one_override_form(overrides, tmp_path):
    """The command line's arguments, parsed and run by the command's own ``main`` in this
    process (the interpreter boundary adds nothing to the override form; tests/test_cli.py
    runs ``run.py`` as a process)."""
    from tests.mistake_driver import run_case

    args = [*overrides, "trainer.max_steps=2", "trainer.progress=false"]
    r = run_case([*args, f"hydra.run.dir={tmp_path}"], str(ROOT))
    assert r["rc"] == 0, r["stderr"][-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["status"] == "finished" and results["step"] == 2
    assert np.isfinite(results["headline_value"])


# ----------------------------------------------------------------------------- docs
def test_write_encoder_doc_example_is_the_tested_class():
    """docs/write-encoder.md's encoder is PatchMeanEncoder above, line for line in its logic."""
    text = (ROOT / "docs" / "write-encoder.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {"__name__": "write_encoder_doc"}
    exec(compile(block, "docs/write-encoder.md", "exec"), scope)
    paddle.seed(0)
    doc = scope["PatchMeanEncoder"]("doc_enc", in_channels=2, width=4, num_classes=3).build()
    paddle.seed(0)
    ours = PatchMeanEncoder("our_enc", in_channels=2, width=4, num_classes=3).build()
    x = paddle.rand([2, 2, 3, 3])
    a, b = doc.forward_all(x), ours.forward_all(x)
    assert doc.output_names == ours.output_names == ("prediction", "pooled", "hidden")
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
    assert a["hidden"].shape == [2, 9, 4] and doc.feature_dim == 4


def test_an_encoder_without_the_contract_is_refused_naming_the_slot():
    """No ``pooled`` output or no int ``feature_dim``: refused naming the slot and the page."""
    from types import SimpleNamespace

    from paddlecraft.agents.plug import check_contract

    for enc in (
        SimpleNamespace(output_names=("image",), feature_dim=8),
        SimpleNamespace(output_names=("pooled",), feature_dim=None),
    ):
        with pytest.raises(
            ConfigError, match=r"agents\.a\.encoder: SimpleNamespace does not follow"
        ):
            check_contract(enc, "agents.a.encoder")
    check_contract(SimpleNamespace(output_names=("pooled",), feature_dim=8), "agents.a.encoder")
