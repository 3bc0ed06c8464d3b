"""Agents saved by an older PaddleCraft load with the same function (Agent.upgrade_saved).

``tests/data/policy-0.1`` is the tic-tac-toe policy exactly as PaddleCraft 0.1 saved it (the
zoo entry before the feature contract renamed its last layer); the recognizer's old layout
is rebuilt here from today's zoo entry by adding back what 0.1 saved beside it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.zoo import zoo_path
from paddlecraft.encoders.tensorio import CheckpointError, sha256_file

OLD_POLICY = Path(__file__).resolve().parent / "data" / "policy-0.1"


def _params(agent: Agent) -> dict[str, np.ndarray]:
    """Parameters by their name under the agent's scope."""
    return {p.name.split(".", 1)[1]: p.numpy() for p in agent.parameters()}


def _rewrite(folder: Path, weights: dict[str, np.ndarray], config_edit) -> None:
    """Write ``weights`` and edit ``agent.json``'s config, keeping its checksum right."""
    save_file(weights, str(folder / "weights.safetensors"))
    meta = json.loads((folder / "agent.json").read_text())
    config_edit(meta["config"])
    meta["sha256"]["weights.safetensors"] = sha256_file(folder / "weights.safetensors")
    (folder / "agent.json").write_text(json.dumps(meta))


def test_a_policy_saved_by_0_1_loads_as_todays_with_the_same_moves(tmp_path):
    saved = json.loads((OLD_POLICY / "agent.json").read_text())
    assert saved["config"]["encoder"]["num_classes"] == 128  # the 0.1 layout
    old = Agent.load(OLD_POLICY, name="old")
    today = Agent.pretrained("tictactoe-policy", name="today")
    assert isinstance(old, Policy) and old.cfg.encoder["hidden_layers"] == 3
    a, b = _params(old), _params(today)
    assert a.keys() == b.keys() and "hidden_layer_3.w_0" in a
    assert all(np.array_equal(a[k], b[k]) for k in a)
    rng = np.random.default_rng(0)
    cells = rng.integers(0, 3, (64, 3, 3))
    obs = np.stack([cells == 1, cells == 2], -1).astype(np.float32)
    masks = (cells == 0).reshape(64, 9)
    masks[~masks.any(1)] = True  # a full board: any move (only the comparison matters)
    np.testing.assert_array_equal(old.act(obs, masks), today.act(obs, masks))
    # saved again, it is today's layout: loads with nothing to upgrade
    old.save(tmp_path / "again")
    again = json.loads((tmp_path / "again" / "agent.json").read_text())["config"]["encoder"]
    assert "num_classes" not in again and again["hidden_layers"] == 3
    assert _params(Agent.load(tmp_path / "again", name="again")).keys() == a.keys()


def test_the_optimizer_state_of_an_old_policy_follows_its_renamed_layer(tmp_path):
    pol = Policy("pol", encoder={"_target_": "paddlecraft.encoders.ImageMLPEncoder",
                                 "hidden_size": 16, "hidden_layers": 2}, seed=0)  # fmt: skip
    obs = np.zeros((4, 3, 3, 2), np.float32)
    masks = np.ones((4, 9), bool)
    logp, _, value = pol.evaluate_actions(obs, masks, np.arange(4))
    pol.update(-logp.mean() + (value**2).mean())
    pol.save(tmp_path / "new")
    # the same agent in 0.1's layout: its last hidden layer was 'prediction' (num_classes)
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "new", old)
    weights = {k.replace("hidden_layer_2.", "prediction."): v
               for k, v in load_file(str(old / "weights.safetensors")).items()}  # fmt: skip
    opt = {k.replace("hidden_layer_2.", "prediction."): v
           for k, v in load_file(str(old / "optimizer.safetensors")).items()}  # fmt: skip
    assert any("prediction." in k for k in opt)
    save_file(opt, str(old / "optimizer.safetensors"))
    meta = json.loads((old / "agent.json").read_text())
    meta["sha256"]["optimizer.safetensors"] = sha256_file(old / "optimizer.safetensors")
    (old / "agent.json").write_text(json.dumps(meta))

    def as_0_1(config: dict) -> None:
        config["encoder"] = {**config["encoder"], "num_classes": 16, "hidden_layers": 1}

    _rewrite(old, weights, as_0_1)
    loaded, fresh = Agent.load(old, name="pol"), Agent.load(tmp_path / "new", name="pol")
    assert _params(loaded).keys() == _params(fresh).keys()
    from paddlecraft.agents.optim import optimizer_state

    got, _ = optimizer_state(loaded.optimizer)
    want, _ = optimizer_state(fresh.optimizer)
    assert got.keys() == want.keys() and any("hidden_layer_2" in k for k in got)
    for k in want:
        np.testing.assert_array_equal(got[k].numpy(), want[k].numpy())


def test_a_ctc_recognizer_saved_before_the_contract_loads_as_todays(tmp_path):
    old = tmp_path / "recognizer-0.1"
    shutil.copytree(zoo_path("spoken-digit-recognizer"), old)
    weights = load_file(str(old / "weights.safetensors"))
    rows = weights["recognizer.ctc.w_0"].shape[0]  # the GRU's frame width (192)
    rng = np.random.default_rng(0)
    # 0.1 also saved an 'embedding' layer (embedding_dim 128) that fed only the pooled vector
    weights["recognizer.speech.embedding.w_0"] = rng.standard_normal((rows, 128)).astype("f4")
    weights["recognizer.speech.embedding.b_0"] = np.zeros(128, "f4")
    _rewrite(old, weights, lambda c: c["encoder"].update(embedding_dim=128))
    loaded = Agent.load(old, name="recognizer")
    today = Agent.pretrained("spoken-digit-recognizer", name="recognizer")
    assert loaded.cfg.encoder["embedding_dim"] is None  # the CTC head reads the GRU frames
    a, b = _params(loaded), _params(today)
    assert a.keys() == b.keys() and not any("embedding" in k for k in a)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    waves = [rng.standard_normal(n).astype(np.float32) * 0.1 for n in (8000, 12000)]
    assert loaded.transcribe(waves) == today.transcribe(waves)


def test_an_old_policy_with_another_encoder_is_refused_naming_the_way_out():
    shapes = {"policy.prediction.w_0": (32, 64)}
    config = {"encoder": {"_target_": "paddlecraft.encoders.ImageCNNEncoder", "num_classes": 64}}
    with pytest.raises(CheckpointError, match=r"saved by PaddleCraft 0\.1 .*Train it again"):
        Policy.upgrade_saved(config, shapes, "policy")
    assert Policy.upgrade_saved({"encoder": {}}, {"policy.hidden_layer_1.w_0": (2, 2)}, "p") == {}
