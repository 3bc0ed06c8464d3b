"""Self-play's grouped settings: the defaults of the flat 0.2 names kept, each group's
checks, an old key refused naming its new place, and a run saved with the flat keys
upgraded and resumed bit-identically."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf
from safetensors.numpy import load_file

from paddlecraft.agents.settings import ConfigError, make_settings
from paddlecraft.arenas.engine.app import run_config
from paddlecraft.arenas.engine.resume import CHANGES_FILE, upgrade_saved_config
from paddlecraft.arenas.selfplay.config import SelfPlayConfig, check_settings
from paddlecraft.compat import REMOVED, upgrade_settings

#: SelfPlayConfig of PaddleCraft 0.2 (one flat dataclass): every field and its default
FLAT_DEFAULTS = {
    "epochs": 10, "steps_per_epoch": 20, "games_per_step": 256, "algo": "ppo",
    "update_epochs": 4, "minibatch_size": 512, "clip_ratio": 0.2, "gamma": 0.99,
    "gae_lambda": 0.95, "value_coef": 0.5, "policy_coef": 1.0, "entropy_coef": 0.01,
    "simulations": 50, "c_puct": 1.5, "dirichlet_alpha": 1.0, "noise_fraction": 0.25,
    "temperature_moves": 8, "policy_target": "visits", "latest_ratio": 0.5, "pool_size": 16,
    "pool_opponents_per_step": 4, "snapshot_every": 10, "snapshot_score": 0.7,
    "snapshot_min_games": 256, "train_anchors": {}, "eval_games": {},
    "final_eval_games": None, "search_eval_games": {}, "eval_simulations": 200,
    "solver_positions": 0, "headline_metric": None, "augment_mirror": False,
    "keep_best": None, "search_updates": 0, "search_every": 1,
    "search_games_per_step": None, "search_lr": None, "init_policy": None,
    "collect_workers": 0, "threads_per_worker": 1, "ray_address": None,
}  # fmt: skip

#: settings added after 0.2 (no flat name): their place and default
ADDED = {
    "update.replay": 0, "update.average_duplicates": False, "search.reuse": False,
    "search.forced_playouts": 0.0,
}  # fmt: skip
#: 0.2's flat settings removed since (`paddlecraft.compat.REMOVED`): their places
GONE = {
    "policy_target": "search.policy_target", "policy_coef": "update.policy_coef",
    "search_lr": "search.lr", "snapshot_score": "league.snapshot_score",
    "snapshot_min_games": "league.snapshot_min_games", "keep_best": "eval.keep_best",
}  # fmt: skip


def flat(arena: dict) -> dict:
    """An arena config as PaddleCraft 0.2 saved it: every grouped setting at the top."""
    out = {k: v for k, v in arena.items() if not isinstance(v, dict) or k in FLAT_DEFAULTS}
    for old, new in SelfPlayConfig.RENAMED.items():
        group, leaf = new.split(".")
        out[old] = arena[group][leaf] if old not in GONE else FLAT_DEFAULTS[old]
    return out


def test_every_flat_setting_has_its_place_and_its_default():
    nested = OmegaConf.structured(SelfPlayConfig)
    for old, default in FLAT_DEFAULTS.items():
        if old in GONE:  # removed: its 0.2 default is what the code does now
            assert REMOVED["selfplay_setting"][GONE[old]] == default, old
            continue
        value = OmegaConf.select(nested, SelfPlayConfig.RENAMED.get(old, old))
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        assert value == default, old
    for key, default in ADDED.items():
        assert OmegaConf.select(nested, key) == default, key
    groups = [f for f in dataclasses.fields(SelfPlayConfig) if dataclasses.is_dataclass(f.type)
              or f.name in ("update", "search", "league", "eval", "workers")]  # fmt: skip
    leaves = (
        len(dataclasses.fields(SelfPlayConfig))
        - len(groups)
        + sum(len(OmegaConf.to_container(nested[f.name])) for f in groups)
    )
    # nothing lost; what was added since is listed
    assert leaves == len(FLAT_DEFAULTS) - len(GONE) + len(ADDED) == 35 + len(ADDED)


def test_upgrade_moves_flat_keys_into_their_groups():
    saved = {"_target_": "x", "epochs": 3, "collect_workers": 2, "search_updates": 4,
             "eval_games": {"random": 8}, "final_eval_games": None, "update_epochs": 1}  # fmt: skip
    moved = upgrade_settings(SelfPlayConfig, saved)
    assert saved == {"_target_": "x", "epochs": 3, "workers": {"count": 2},
                     "search": {"updates": 4}, "eval": {"games": {"random": 8},
                     "final_games": None}, "update": {"epochs": 1}}  # fmt: skip
    assert moved["collect_workers"] == "workers.count" and len(moved) == 5
    assert upgrade_settings(SelfPlayConfig, saved) == {}  # upgraded once is up to date


def test_an_old_key_in_python_names_its_new_place():
    with pytest.raises(ConfigError) as e:
        make_settings(SelfPlayConfig, {"collect_workers": 2}, "arena")
    assert "arena.collect_workers is now arena.workers.count" in str(e.value)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"algo": "dqn"}, "arena.algo must be one of"),
        ({"update": {"epochs": 0}}, "arena.update.epochs=0: must be >= 1"),
        ({"update": {"minibatch_size": 0}}, "arena.update.minibatch_size=0: must be >= 1"),
        ({"search": {"simulations": 0}}, "arena.search.simulations=0: must be >= 1"),
        ({"search": {"temperature_moves": -1}}, "arena.search.temperature_moves=-1: must be >= 0"),
        ({"search": {"updates": 5}}, "arena.search.updates must be in [0, epochs x steps_per_epoch = 4]"),
        ({"search": {"games_per_step": 0}}, "arena.search.games_per_step must be >= 1"),
        ({"search": {"every": 0}}, "arena.search.every must be >= 1"),
        ({"league": {"latest_ratio": 1.5}}, "arena.league.latest_ratio must be in [0, 1]"),
        ({"league": {"pool_size": 0}}, "arena.league.pool_size=0: must be >= 1"),
        ({"league": {"snapshot_every": -1}}, "arena.league.snapshot_every=-1: must be >= 0"),
        ({"league": {"pool_opponents_per_step": -1}}, "arena.league.pool_opponents_per_step=-1"),
        ({"eval": {"simulations": 0}}, "arena.eval.simulations=0: must be >= 1"),
        ({"eval": {"solver_positions": -1}}, "arena.eval.solver_positions=-1: must be >= 0"),
        ({"workers": {"count": -1}}, "arena.workers.count must be >= 0"),
        ({"workers": {"threads": 0}}, "arena.workers.threads >= 1, got 0 and 0"),
    ],
)  # fmt: skip
def test_each_group_checks_its_values(settings, words):
    cfg = make_settings(SelfPlayConfig, {"epochs": 2, "steps_per_epoch": 2, **settings}, "arena")
    with pytest.raises(ConfigError) as e:
        check_settings(cfg)
    assert words in str(e.value) and "\n" not in str(e.value)
    check_settings(make_settings(SelfPlayConfig, {"epochs": 2, "steps_per_epoch": 2}, "arena"))


# ----------------------------------------------------------------------------- resume
TINY = ["arena=selfplay", "game=tictactoe", "arena.epochs=2", "arena.steps_per_epoch=2",
        "arena.games_per_step=16", "arena.update.minibatch_size=64", "arena.search.updates=1",
        "arena.search.simulations=4", "arena.league.snapshot_every=1",
        "arena.eval.games.random=2", "arena.eval.games.minimax=2",
        "arena.eval.final_games.random=2", "arena.eval.final_games.minimax=2",
        "trainer.checkpoint_every=1", "trainer.progress=false"]  # fmt: skip


def _weights(run_dir: Path) -> dict[str, np.ndarray]:
    return load_file(str(run_dir / "policy" / "weights.safetensors"))


def test_a_run_saved_with_flat_keys_resumes_bit_identically(compose_config, tmp_path):
    """A run folder whose config.yaml has 0.2's flat keys resumes (upgraded on load) exactly
    as the same folder saved with today's grouped keys does."""

    def run(run_dir: Path, *overrides: str) -> dict:
        return run_config(compose_config(*TINY, *overrides), run_dir, overrides=list(overrides))

    grouped, old = tmp_path / "grouped", tmp_path / "flat"
    run(grouped, "trainer.max_steps=2")
    shutil.copytree(grouped, old)
    saved = yaml.safe_load((old / "config.yaml").read_text())
    saved["arena"] = flat(saved["arena"])
    assert "collect_workers" in saved["arena"] and "workers" not in saved["arena"]
    (old / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))  # order matters
    upgraded = yaml.safe_load((old / "config.yaml").read_text())
    assert upgrade_saved_config(upgraded)["arena.search_updates"] == "arena.search.updates"
    today = yaml.safe_load((grouped / "config.yaml").read_text())["arena"]
    for key in ADDED:  # 0.2 had no such setting: the upgraded config leaves it to its default
        group, leaf = key.split(".")
        assert today[group].pop(leaf) == ADDED[key]
    assert upgraded["arena"] == today

    outs = [run(d, f"resume={d}", "trainer.max_steps=null") for d in (grouped, old)]
    assert outs[0]["status"] == outs[1]["status"] == "finished" and outs[1]["step"] == 4
    assert outs[0]["metrics"] == outs[1]["metrics"]
    a, b = _weights(grouped), _weights(old)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    record = json.loads((old / CHANGES_FILE).read_text())
    assert record["changes"] == {"trainer.max_steps": {"from": 2, "to": None}}
    # the changed config.yaml is written in today's names
    assert yaml.safe_load((old / "config.yaml").read_text())["arena"]["search"]["updates"] == 1


# ------------------------------------------------------------------ removed settings
def test_a_removed_setting_loads_at_its_old_default_and_is_refused_otherwise():
    """A run saved before a setting was removed (`paddlecraft.compat.REMOVED`) resumes
    where the setting did what the code does now, and is refused in one line naming it and
    the commit that reads it where it did not."""
    from paddlecraft.arenas import SelfPlayArena
    from paddlecraft.compat import REMOVED_AT
    from paddlecraft.errors import CheckpointError

    saved = {
        "epochs": 2,
        "search": {"late_moves": 0, "simulations": 5, "cache": True, "network_copy": True,
                   "lr": None},
        "update": {"policy_coef": 1.0, "epochs": 3},
        "league": {"snapshot_score": 0.7, "snapshot_min_games": 256, "pool_size": 4},
        "eval": {"average_last": 0, "keep_best": None},
    }  # fmt: skip
    SelfPlayArena.upgrade_saved(saved)
    assert saved == {"epochs": 2, "search": {"simulations": 5}, "update": {"epochs": 3},
                     "league": {"pool_size": 4}, "eval": {}}  # fmt: skip
    for group, key, value in [("search", "late_moves", 4), ("search", "cache", False),
                              ("search", "network_copy", False), ("search", "lr", 0.02),
                              ("update", "policy_coef", 0.0), ("league", "snapshot_score", 0.0),
                              ("league", "snapshot_min_games", 64),
                              ("eval", "keep_best", "win_rate_vs_random")]:  # fmt: skip
        with pytest.raises(CheckpointError) as e:
            SelfPlayArena.upgrade_saved({group: {key: value}})
        assert f"arena.{group}.{key}={value!r}: saved by an earlier PaddleCraft" in str(e.value)
        assert f"git checkout {REMOVED_AT}" in str(e.value) and "\n" not in str(e.value)


def test_a_policy_saved_with_a_removed_setting_loads_or_is_refused(make_scope, tmp_path):
    """A saved policy whose ``agent.json`` holds a removed setting at its old default loads
    as today's; with another value, `Agent.load` refuses it naming the setting."""
    from selfplay_kit import ttt_policy

    from paddlecraft.agents import Agent
    from paddlecraft.compat import REMOVED_AT
    from paddlecraft.errors import CheckpointError

    policy = ttt_policy(make_scope("removed"))
    policy.save(tmp_path / "p")
    meta_file = tmp_path / "p" / "agent.json"
    meta = json.loads(meta_file.read_text())
    meta["config"].update(value_bins=0, moves_left=False)
    meta["config"]["encoder"]["residual"] = False
    meta_file.write_text(json.dumps(meta))
    loaded = Agent.load(tmp_path / "p", name=make_scope("loaded"))
    obs = np.zeros((1, 3, 3, 2), np.float32)
    assert np.array_equal(loaded(obs)[1].numpy(), policy(obs)[1].numpy())
    meta["config"]["value_bins"] = 51
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=rf"agents\.\w+\.value_bins=51: .*{REMOVED_AT}"):
        Agent.load(tmp_path / "p", name=make_scope("refused"))
