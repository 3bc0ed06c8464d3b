"""Helpers the self-play tests share."""

from __future__ import annotations


def merged(base: dict, kw: dict) -> dict:
    """``base`` with ``kw`` on top, a settings group (a dict) merged key by key."""
    out = dict(base)
    for k, v in kw.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def replay_arena(policy: object, **kw: object) -> object:
    """A tiny tic-tac-toe AlphaZero arena with a replay window; ``kw`` overrides (merged)."""
    from paddlecraft.arenas import SelfPlayArena

    base = {
        "data": "tictactoe", "algo": "alphazero", "epochs": 2, "steps_per_epoch": 2,
        "games_per_step": 8, "augment_mirror": True,
        "update": {"minibatch_size": 16, "epochs": 2, "replay": 300},
        "search": {"simulations": 6},
        "league": {"snapshot_every": 1, "latest_ratio": 1.0},
        "eval": {"games": {"random": 2, "minimax": 2}},
    }  # fmt: skip
    return SelfPlayArena({"policy": policy}, **merged(base, kw))


def keeping(search: object, kept: list) -> object:
    """``search`` (a callable) that appends each of its results to ``kept``."""

    def run(*args: object, **kw: object) -> object:
        kept.append(search(*args, **kw))
        return kept[-1]

    return run


#: a small MLP for tic-tac-toe policies
TTT_MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 32}


def ttt_policy(name: str, **kw: object) -> object:
    """A tic-tac-toe `Policy` over `TTT_MLP`, seed 0; ``kw`` are more settings."""
    from paddlecraft.agents import Policy

    return Policy(name, encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0, **kw)


def script(name: str) -> object:
    """``scripts/<name>.py`` imported as a module (it is no package's)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def targets_script() -> object:
    """``scripts/selfplay_targets.py`` imported as a module."""
    return script("selfplay_targets")


def refused_by_targets_script(monkeypatch: object, capsys: object, out: object, *flags: str) -> str:
    """Run ``scripts/selfplay_targets.py *flags --out out``, which must refuse them before
    any work (an argparse error, no seed folder made): its stderr."""
    import pytest

    monkeypatch.setattr("sys.argv", ["selfplay_targets.py", *flags, "--out", str(out)])
    with pytest.raises(SystemExit):
        targets_script().main()
    assert not (out / "seed0").exists()  # nothing started
    return capsys.readouterr().err


def opinionated(policy: object) -> object:
    """``policy`` with its policy head's weights times 1000 and its value head's times 3: a
    new policy's near-uniform priors (its policy head starts at 0.01 of the usual scale)
    and near-zero values become priors of 0.3-0.6 on the favourite and values around
    +-0.3, so that settings reading them (first-play urgency, a policy temperature)
    change what a search does."""
    import paddle

    with paddle.no_grad():
        for head, scale in ((policy.policy_head, 1000.0), (policy.value_head, 3.0)):
            head.weight.set_value(head.weight * scale)
    return policy


def ttt_boards(n: int = 6, seed: int = 0) -> object:
    """``float32 [n, 3, 3, 2]``: board ``i`` holds ``i`` stones at seeded squares, all of
    one plane (``i % 2``): ``n`` distinct positions for a head to learn apart."""
    import numpy as np

    rng = np.random.default_rng(seed)
    obs = np.zeros((n, 3, 3, 2), np.float32)
    for i in range(n):
        obs[i].reshape(9, 2)[rng.permutation(9)[:i], i % 2] = 1
    return obs
