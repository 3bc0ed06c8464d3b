"""Composing reads no data; the settings only the data can give are filled from the built dataset."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine.app import run_from_config, user_error
from paddlecraft.arenas.engine.from_data import data_facts, fill_from_data, marked
from paddlecraft.craftdata.badfiles import BadDataError

#: data config -> (arena overrides, the agent settings the built dataset fills)
FILES = {
    "image_folder": (["arena=classify"], ["agents.classifier.num_classes"]),
    "captions": (["arena=caption"], ["agents.captioner.words", "agents.listener.words"]),
    "speech": (["arena=caption", "chain=asr"], ["agents.recognizer.words"]),
}


@pytest.mark.parametrize("data", sorted(FILES))
def test_a_missing_data_path_composes_and_is_refused_at_build(data, tmp_path, compose_config):
    arena, filled = FILES[data]
    missing = tmp_path / "nonexistent.file"
    cfg = compose_config(*arena, f"data={data}", f"data.path={missing}")
    resolved = OmegaConf.to_container(cfg, resolve=True)  # --cfg job: no file is read
    assert sorted(marked(cfg.agents, "agents")) == filled
    for full in filled:  # null until the run builds the data
        node = resolved
        for key in full.split("."):
            node = node[key]
        assert node is None, full
    run = tmp_path / "run"
    with pytest.raises(Exception) as info:
        run_from_config(cfg, run)
    cause = user_error(info.value)
    assert isinstance(cause, BadDataError), info.value
    assert str(cause).startswith(f"data.path={str(missing)!r}")
    assert not (run / "config.yaml").exists()  # refused before any work


@pytest.mark.parametrize("data", sorted(FILES))
def test_an_unset_data_path_names_the_setting(data, tmp_path, compose_config):
    cfg = compose_config(*FILES[data][0], f"data={data}")
    with pytest.raises(Exception) as info:
        run_from_config(cfg, tmp_path / "run")
    assert str(user_error(info.value)).startswith("data.path is not set")


def test_markers_at_any_depth_are_filled_and_a_missing_fact_is_refused(compose_config):
    cfg = compose_config("arena=gan_conditional")
    want = ["agents.discriminator.num_classes", "agents.generator.encoder.num_classes"]
    assert sorted(marked(cfg.agents, "agents")) == want
    assert sorted(fill_from_data(cfg.agents, SimpleNamespace(num_classes=7))) == want
    assert cfg.agents.generator.encoder.num_classes == 7 == cfg.agents.discriminator.num_classes
    assert marked(cfg.agents, "agents") == {}  # nothing left to fill
    again = compose_config("arena=gan_conditional")
    with pytest.raises(
        ConfigError, match=r"agents\.\w+(\.encoder)?\.num_classes: the data gives no num_classes"
    ):
        fill_from_data(again.agents, SimpleNamespace(name="no labels"), "the data")


def test_data_facts_read_the_built_dataset(tmp_path: Path):
    from paddlecraft.craftdata import load_digits

    assert data_facts(load_digits(seed=0)) == {"num_classes": 10}
    assert data_facts(SimpleNamespace(num_classes=0, words=[])) == {}  # nothing to give
    assert data_facts(SimpleNamespace(words=["a", "b"])) == {"words": ["a", "b"]}


@pytest.mark.parametrize("game, shape, actions", [("tictactoe", [3, 3, 2], 9),
                                                  ("connect_four", [6, 7, 2], 7)])  # fmt: skip
def test_the_policy_is_sized_from_the_game(game, shape, actions, compose_config):
    """conf/game/* restate no sizes: the policy's obs_shape and num_actions come from the
    built GameSpec (data.loader), as a classifier's class count comes from its dataset."""
    from paddlecraft.arenas.engine.app import build_agents, build_data

    text = (Path(__file__).resolve().parents[1] / "conf" / "game" / f"{game}.yaml").read_text()
    assert "obs_shape:" not in text and "num_actions:" not in text
    cfg = compose_config("arena=selfplay", f"game={game}")
    assert sorted(marked(cfg.agents, "agents")) == [
        "agents.policy.num_actions", "agents.policy.obs_shape",
    ]  # fmt: skip
    assert cfg.agents.policy.num_actions is None  # composing knows no game yet
    spec = build_data(cfg)
    policy = build_agents(cfg, spec)["policy"]
    assert list(policy.obs_shape) == list(spec.obs_shape) == shape
    assert policy.num_actions == spec.num_actions == actions
    assert list(cfg.agents.policy.obs_shape) == shape  # recorded in the run's config


def test_a_policy_without_sizes_says_where_they_come_from(make_scope):
    from paddlecraft.agents import Policy

    mlp = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 8}
    with pytest.raises(ConfigError, match=r"agents\.\w+\.num_actions is not set.*GameSpec"):
        Policy(make_scope("pol"), encoder=mlp, obs_shape=[3, 3, 2], num_actions=None)
