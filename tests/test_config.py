"""Hydra configs: every file composes and instantiates, typos fail at compose, targets are safe."""

from __future__ import annotations

import gzip
import re
import struct
from pathlib import Path

import numpy as np
import paddle
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from paddlecraft.agents import DeviceError, UnsafeConfigError
from paddlecraft.arenas.engine.app import build_agents, build_arena, run_from_config, validate
from paddlecraft.arenas.engine.from_data import marked

CONF = Path(__file__).resolve().parents[1] / "conf"
ARENAS = sorted(p.stem for p in (CONF / "arena").glob("*.yaml"))
ENCODERS = sorted(p.stem for p in (CONF / "encoder").glob("*.yaml"))
#: encoder configs whose input is not an image -> a sample input for them
SEQUENCE_INPUTS = {
    "bert": lambda: np.full((2, 6), 5, np.int64),  # token ids [B, T]
    "clip_text": lambda: np.full((2, 6), 5, np.int64),  # token ids [B, T]
    "gru_text": lambda: np.full((2, 6), 5, np.int64),  # token ids [B, T]
    "whisper": lambda: np.zeros((2, 80, 20), np.float32),  # log-mel [B, n_mels, frames]
    "speech": lambda: np.random.default_rng(0).standard_normal((2, 4000)).astype(np.float32),
}
#: what an agent fills in for them (the vocabulary size of its words)
SEQUENCE_FILLS = {
    "bert": {"vocab_size": 30},
    "gru_text": {"vocab_size": 30},
    "clip_text": {"vocab_size": 30},
}
#: image encoder configs of one file's architecture (fixed input size) -> their input [C, H, W]
FIXED_INPUTS = {"clip_vit_b32": (3, 224, 224), "clip_rn50": (3, 224, 224)}


def _encoder_schema(name: str) -> str:
    text = (CONF / "encoder" / f"{name}.yaml").read_text()
    return re.search(r"/schema/encoder/(\w+)@", text).group(1)


IMAGE_ENCODERS = [
    e for e in ENCODERS if _encoder_schema(e) not in SEQUENCE_INPUTS and e not in FIXED_INPUTS
]
SEQUENCE_ENCODERS = [e for e in ENCODERS if _encoder_schema(e) in SEQUENCE_INPUTS]
AGENTS = sorted(p.stem for p in (CONF / "agent").glob("*.yaml"))


@pytest.mark.parametrize("arena", ARENAS)
def test_every_arena_config_composes_and_instantiates(arena, compose_config):
    cfg = compose_config(f"arena={arena}")
    validate(cfg)
    agents = build_agents(cfg)
    built = build_arena(cfg, agents)
    assert built.agents is not None and set(built.agents) == set(cfg.agents)
    assert built.headline
    for a in agents.values():
        assert all(p.name.startswith(a.name + ".") for p in a.own_parameters())


@pytest.mark.parametrize("encoder", IMAGE_ENCODERS)
def test_every_encoder_config_instantiates_in_the_classifier(encoder, compose_config):
    cfg = compose_config("arena=classify", f"encoder@agents.classifier.encoder={encoder}")
    target = OmegaConf.select(cfg, "agents.classifier.encoder._target_")
    assert target.startswith("paddlecraft.encoders.")
    agents = build_agents(cfg)
    x = np.zeros((2, 1, 8, 8), np.float32)
    assert agents["classifier"].predict(x).shape == (2,)


@pytest.mark.parametrize("encoder", SEQUENCE_ENCODERS)
def test_every_text_and_speech_encoder_config_instantiates(encoder, compose_config, make_scope):
    cfg = compose_config("arena=classify", f"encoder@agents.classifier.encoder={encoder}")
    schema = _encoder_schema(encoder)
    enc = instantiate(
        cfg.agents.classifier.encoder, scope=make_scope(), **SEQUENCE_FILLS.get(schema, {})
    )
    out = enc.forward_all(SEQUENCE_INPUTS[schema]())
    assert out["pooled"].shape == [2, enc.feature_dim] and out["hidden"].shape[0] == 2
    assert out["hidden"].shape[2] == enc.feature_dim


@pytest.mark.parametrize("encoder", sorted(FIXED_INPUTS))
def test_fixed_size_encoder_configs_instantiate(encoder, compose_config, make_scope):
    cfg = compose_config("arena=classify", f"encoder@agents.classifier.encoder={encoder}")
    enc = instantiate(cfg.agents.classifier.encoder, scope=make_scope())
    x = np.zeros((1, *FIXED_INPUTS[encoder]), np.float32)
    assert enc.forward_all(x)["pooled"].shape == [1, enc.feature_dim]


@pytest.mark.parametrize("agent", AGENTS)
def test_every_agent_config_composes(agent, compose_config):
    cfg = compose_config("arena=classify", f"agent@agents.classifier={agent}")
    assert cfg.agents.classifier._target_.startswith("paddlecraft.agents.")


def _write_idx(path: Path, arr: np.ndarray) -> None:
    dims = arr.shape
    header = struct.pack(">HBB", 0, 0x08, len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_mnist_data_config_reads_idx_files(tmp_path, compose_config):
    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("t10k", 20)):
        _write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)))
        _write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    cfg = compose_config("arena=classify", "data=mnist", f"data.loader.path={tmp_path}")
    assert list(cfg.agents.classifier.input_shape) == [1, 28, 28]
    agents = build_agents(cfg)
    assert agents["classifier"].encoder.input_size == 784  # filled in from the data
    arena = build_arena(cfg, agents)
    assert arena.data.train.x.shape == (40, 1, 28, 28)


def test_typo_in_key_fails_at_compose_naming_the_full_key(compose_config):
    with pytest.raises(ConfigCompositionException) as e:
        compose_config("arena=classify", "agents.classifier.lrr=0.1")
    msg = str(e.value) + str(e.value.__cause__)
    assert "agents.classifier.lrr" in msg


def test_wrong_type_fails_atcompose_config(compose_config):
    with pytest.raises(ConfigCompositionException) as e:
        compose_config("arena=classify", "arena.epochs=many")
    assert "arena.epochs" in str(e.value) + str(e.value.__cause__)


def test_typo_in_encoder_key_fails_atcompose_config(compose_config):
    with pytest.raises(ConfigCompositionException) as e:
        compose_config("arena=classify", "agents.classifier.encoder.hiden_size=3")
    assert "hiden_size" in str(e.value) + str(e.value.__cause__)


def test_os_system_target_is_refused_before_anything_runs(monkeypatch, tmp_path, compose_config):
    calls = []
    monkeypatch.setattr("os.system", lambda *a: calls.append(a) or 0)
    cfg = compose_config("arena=classify", "arena._target_=os.system")
    with pytest.raises(
        UnsafeConfigError, match=r"config key arena\._target_: _target_ 'os.system' is refused"
    ):
        run_from_config(cfg, tmp_path / "run")
    assert calls == []
    assert not (tmp_path / "run").exists()


def test_user_allow_list_is_explicit(compose_config):
    cfg = compose_config(
        "arena=classify", "agents.classifier.optimizer._target_=collections.OrderedDict"
    )
    with pytest.raises(UnsafeConfigError, match="allow_targets"):
        validate(cfg)
    cfg = compose_config(
        "arena=classify",
        "agents.classifier.optimizer._target_=collections.OrderedDict",
        "allow_targets=[collections.OrderedDict]",
    )
    validate(cfg)


@pytest.mark.skipif(paddle.device.is_compiled_with_cuda(), reason="needs the CPU-only build")
def test_gpu_on_cpu_build_is_one_clear_line_before_work(tmp_path, compose_config):
    cfg = compose_config("arena=classify", "agents.classifier.device=gpu:0")
    with pytest.raises(DeviceError) as e:
        run_from_config(cfg, tmp_path / "run")
    msg = str(e.value)
    assert "\n" not in msg
    assert "agents.classifier.device='gpu:0'" in msg and "CPU-only" in msg and "=cpu" in msg
    assert not (tmp_path / "run").exists()


SWEEPS = sorted(p.stem for p in (CONF / "sweep").glob("*.yaml"))


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweep_file_composes_with_its_arena(sweep, compose_config):  # registers schemas
    text = (CONF / "sweep" / f"{sweep}.yaml").read_text()
    arena = next((a for a in ARENAS if f"arena={a}" in text), "classify")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "config", overrides=[f"arena={arena}", f"+sweep={sweep}"], return_hydra_config=True
        )
    params = cfg.hydra.sweeper.params
    assert params, sweep
    for key in params:  # every swept key exists in the composed config
        assert OmegaConf.select(cfg, key) is not None, key


CHAINS = sorted(p.stem for p in (CONF / "chain").glob("*.yaml"))
DECODERS = sorted(p.stem for p in (CONF / "decoder").glob("*.yaml"))
DATA = sorted(p.stem for p in (CONF / "data").glob("*.yaml"))


@pytest.mark.parametrize("chain", CHAINS)
def test_every_chain_config_composes_and_builds_its_agents(chain, compose_config):
    cfg = compose_config("arena=caption", f"chain={chain}")
    validate(cfg)
    agents = build_agents(cfg)  # the arena itself (data generation) is built by test_caption
    assert set(agents) == set(cfg.agents) and len(agents) >= (1 if chain == "asr" else 2)


def _decoder_schema(name: str) -> str:
    text = (CONF / "decoder" / f"{name}.yaml").read_text()
    return re.search(r"/schema/decoder/(\w+)@", text).group(1)


@pytest.mark.parametrize(
    ("slot", "name"),
    [("discriminator.encoder", "dcgan"), ("discriminator.encoder", "cnn")]
    + [("generator.encoder", d) for d in DECODERS if _decoder_schema(d) == "image_decoder"],
)
def test_every_gan_body_config_builds_in_the_gan(slot, name, compose_config):
    group = "encoder" if slot.startswith("discriminator") else "decoder"
    cfg = compose_config("arena=gan", f"{group}@agents.{slot}={name}")
    validate(cfg)
    agents = build_agents(cfg)
    n = sum(int(np.prod(p.shape)) for p in agents[slot.split(".")[0]].own_parameters())
    assert n > 0


@pytest.mark.parametrize("name", [d for d in DECODERS if _decoder_schema(d) != "image_decoder"])
def test_every_text_decoder_config_builds_in_the_captioner(name, compose_config):
    cfg = compose_config("arena=caption", f"decoder@agents.captioner.decoder={name}")
    agents = build_agents(cfg)
    cap = agents["captioner"]
    assert cap.decoder.cond_dim == cap.encoder.feature_dim and cap.decoder.vocab_size == len(
        cap.vocab
    )


def test_every_agent_config_is_used_by_some_arena_or_chain(compose_config):
    """Each conf/agent file is built by an arena or chain test above (none is dead)."""
    used = set()
    for overrides in [(f"arena={a}",) for a in ARENAS] + [
        ("arena=caption", f"chain={c}") for c in CHAINS
    ]:
        cfg = compose_config(*overrides)
        used |= {str(a._target_) for a in cfg.agents.values()}
    for agent in AGENTS:
        target = str(compose_config("arena=classify", f"+agent@agents.x={agent}").agents.x._target_)
        assert target in used, f"conf/agent/{agent}.yaml ({target}) is not used by any arena"


@pytest.mark.parametrize("data", DATA)
def test_every_data_config_composes(data, compose_config, tmp_path):
    extra = [f"data.loader.path={tmp_path}"] if data == "mnist" else []
    if data == "image_folder":  # composing reads no folder: one that does not exist will do
        extra = [f"data.path={tmp_path / 'not_yet'}"]
    arena = "gan" if data.startswith("gan") else "classify"
    if data.startswith("referential"):  # objects of referential games, sized by that arena
        arena = "referential"
    if data in ("captions", "speech"):  # the caption arena's own files (read at compose)
        from tests.test_caption_files import jsonl_folder, speech_table

        path = jsonl_folder(tmp_path, n=25) if data == "captions" else speech_table(tmp_path)
        arena, extra = (
            "caption",
            [f"data.path={path}"] + (["chain=asr"] if data == "speech" else []),
        )
    cfg = compose_config(f"arena={arena}", f"data={data}", *extra)
    validate(cfg)
    assert cfg.data.flat_size == cfg.data.channels * cfg.data.image_size**2
    # derived in the schema: a data config that restated it could only contradict it
    restated = [ln for ln in (CONF / "data" / f"{data}.yaml").read_text().splitlines()
                if ln.strip().startswith("flat_size:")]  # fmt: skip
    assert not restated, restated
    if arena == "caption":  # the arena and its agents build from the files alone
        agents = build_agents(cfg)
        build_arena(cfg, agents).close()


LAUNCHERS = sorted(p.stem for p in (CONF / "hydra" / "launcher").glob("*.yaml"))


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_every_launcher_config_composes_against_its_plugin(launcher, compose_config):
    """Each conf/hydra/launcher file composes with its plugin's own schema (ray: the plugin
    is installed without ray itself, which is only imported when jobs launch)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    target = str(cfg.hydra.launcher._target_)
    plugin = {
        "local": "joblib",
        "ray_cluster": "ray",
        "slurm": "submitit",
        "slurm_local": "submitit",
    }
    assert plugin[launcher] in target.lower(), target
    if launcher == "ray_cluster":
        assert cfg.hydra.launcher.ray.init.address == "auto"
        assert cfg.hydra.launcher.ray.remote.num_cpus == 2


def test_the_default_sweep_launcher_is_the_one_hydra_md_names(compose_config):
    """docs/hydra.md once said ``-m`` used the basic launcher while it was joblib: the page's
    claim is read and checked against what ``-m`` composes without a launcher override."""
    compose_config("arena=classify")  # the built-in schemas registered
    page = (CONF.parent / "docs" / "hydra.md").read_text()
    named = re.search(r"`-m` uses Hydra's (\w+) launcher", page).group(1)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", return_hydra_config=True)
    assert named == "joblib" and named in str(cfg.hydra.launcher._target_).lower()
    assert cfg.hydra.runtime.choices["hydra/launcher"] == "local"
    assert "`hydra/launcher: local`, which is joblib" in page


EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_file_composes_with_its_arena(experiment, compose_config):
    text = (CONF / "experiment" / f"{experiment}.yaml").read_text()
    arena = next(a for a in ARENAS if f"arena={a} " in text)  # its command names the arena
    cfg = compose_config(f"arena={arena}", f"+experiment={experiment}")
    assert cfg.arena._target_.rsplit(".", 1)[-1].lower().startswith(arena.split("_")[0])


def test_mnist_experiment_is_resnet18_on_mnist_with_a_cosine_schedule(compose_config):
    cfg = compose_config("arena=classify", "+experiment=mnist_resnet18")
    assert cfg.data.loader._target_ == "paddlecraft.craftdata.load_mnist"
    enc = cfg.agents.classifier.encoder
    assert (enc._target_, enc.depth, enc.width, enc.small_input) == (
        "paddlecraft.encoders.resnet.ResNetEncoder", 18, 16, True,
    )  # fmt: skip
    clf = cfg.agents.classifier  # sized by the MNIST data config, through the agent
    assert list(clf.input_shape) == [1, 28, 28]
    assert clf.num_classes is None  # the built dataset gives it (app.build_agents)
    assert marked(cfg.agents, "agents") == {"agents.classifier.num_classes": "num_classes"}
    assert enc.in_channels is None and enc.num_classes is None  # filled in when built
    sched = cfg.agents.classifier.lr_scheduler
    assert sched._target_.endswith("CosineAnnealingDecay") and sched.T_max == cfg.arena.epochs == 3


#: config groups whose files are global presets -> the packages they may write (see
#: docs/design.md, "Why arena, chain, game and data presets are global")
GLOBAL_GROUPS = {
    "arena": {"arena", "agents", "data"},
    "chain": {"arena", "agents", "data"},
    "game": {"arena", "agents", "data", "trainer"},
    "env": {"arena", "agents"},  # arena=marl's task and its groups' policies (conf/env/)
    "data": {"arena", "agents", "data"},
    "stream": {"arena", "agents", "data"},  # data=stream's variant per arena (conf/stream/)
    "experiment": {"arena", "agents", "data", "trainer"},
    "sweep": {"hydra"},
    "debug": {"trainer"},  # debug=smoke (docs/testing.md)
    "debug_arena": {"arena", "agents", "data"},  # its tiny sizes per arena
    "data_arena": {"arena", "agents"},  # a data config's reader per arena (data=captions)
}


def test_global_config_files_write_only_their_packages():
    """`@package _global_` is for presets that select several packages at once; such a file
    never reaches the run's seed, resume, allowed targets or Hydra itself (sweeps aside),
    and no other group (agents, encoders, decoders...) is global."""
    import yaml

    found = set()
    for path in sorted(CONF.rglob("*.yaml")):
        text = path.read_text()
        if not re.search(r"^# @package _global_\s*$", text, re.M):
            continue
        group = path.relative_to(CONF).parts[0]
        found.add(group)
        assert group in GLOBAL_GROUPS, f"{path.relative_to(CONF)}: only presets may be global"
        keys = set(yaml.safe_load(text) or {}) - {"defaults"}
        assert keys <= GLOBAL_GROUPS[group], (
            f"{path.relative_to(CONF)} writes {sorted(keys - GLOBAL_GROUPS[group])}, "
            f"outside what a {group} preset may set ({sorted(GLOBAL_GROUPS[group])})"
        )
    assert {"arena", "chain", "game", "sweep"} <= found  # the check saw the presets
