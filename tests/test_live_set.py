"""A live ``set`` goes through the checks the command line makes (`check_value`, the
settings' types, the arena's cross-checks) before anything is applied or written: a refused
change is a 400 JSON answer naming the setting, and the run goes on as if never asked."""

from __future__ import annotations

import json

import pytest
from live_kit import AtSteps, make_arena, same, weights
from omegaconf import OmegaConf

from paddlecraft.arenas.engine import run_arena, standard_callbacks
from paddlecraft.arenas.engine.live.control import CONTROL_FILE
from paddlecraft.arenas.engine.resume import CHANGES_FILE
from paddlecraft.arenas.engine.validate import check_ranges
from paddlecraft.errors import ConfigError

QUIET = {"progress": False}

#: (name, request body, needle of the refusal, the setting it names)
REFUSED = [
    ("inf", b'{"agents.reg.lr": Infinity}', "agents.reg.lr=inf: must be a finite number",
     "agents.reg.lr"),
    ("nan", b'{"agents.reg.lr": NaN}', "agents.reg.lr=nan: must be a finite number",
     "agents.reg.lr"),
    ("nested nan", b'{"agents.reg.lr_scheduler": {"gamma": NaN}}', "must be a finite number",
     "agents.reg.lr_scheduler"),
    ("negative lr", b'{"agents.reg.lr": -0.1}', "agents.reg.lr=-0.1: must be >= 0",
     "agents.reg.lr"),
    ("negative clip", b'{"agents.reg.grad_clip": -1}', "agents.reg.grad_clip=-1: must be > 0",
     "agents.reg.grad_clip"),
    ("float for int", b'{"trainer.eval_every": 2.5}', "trainer.eval_every", "trainer.eval_every"),
    ("negative count", b'{"trainer.log_every": -3}', "trainer.log_every=-3: must be >= 0",
     "trainer.log_every"),
    ("misspelled", b'{"agents.reg.lrr": 0.1}',
     "set: no setting agents.reg.lrr in this run; did you mean agents.reg.lr?", "agents.reg.lrr"),
    ("misspelled trainer", b'{"trainer.eval_evry": 3}', "did you mean trainer.eval_every?",
     "trainer.eval_evry"),
    ("schedule its class refuses",
     b'{"agents.reg.lr_scheduler": {"_target_": "paddle.optimizer.lr.StepDecay", "_partial_": true}}',
     "step_size", "agents.reg.lr_scheduler"),
    ("one bad of two", b'{"trainer.log_every": 5, "agents.reg.lr": -1}', "agents.reg.lr=-1",
     "agents.reg.lr"),
]  # fmt: skip


def test_a_refused_set_is_a_400_naming_the_setting_and_changes_nothing(tmp_path):
    answers: dict = {}

    def try_sets(loop, c):  # paused at step 2
        for name, body, _, _ in REFUSED:
            r = c.post("/api/set", content=body)
            answers[name] = (r.status_code, r.headers["content-type"], r.json())

    reference = make_arena(epochs=1)
    run_arena(reference, tmp_path / "plain", standard_callbacks(**QUIET))
    arena = make_arena(epochs=1)
    res = run_arena(arena, tmp_path / "live",
                    [*standard_callbacks(live=True, **QUIET), AtSteps([2], try_sets, paused=True)])  # fmt: skip
    assert res["status"] == "finished"  # the run went on
    for name, _, needle, key in REFUSED:
        code, kind, body = answers[name]
        assert code == 400 and kind == "application/json", (name, code, body)
        assert needle in body["error"] and body["setting"] == key, (name, body)
        assert not body["error"].startswith("set: set:"), body
    assert [r["command"] for r in _control(tmp_path / "live")] == ["pause", "resume"]
    assert not (tmp_path / "live" / CHANGES_FILE).exists()
    assert same(weights(arena), weights(reference))


def _control(run_dir):
    return [json.loads(x) for x in (run_dir / CONTROL_FILE).read_text().splitlines()]


@pytest.mark.parametrize(("key", "value"), [("lr", -0.1), ("grad_clip", -1), ("lr", float("inf"))])
def test_the_live_refusal_is_the_command_lines_message(tmp_path, key, value):
    """One rule: the message a live set answers is the one the command line prints."""
    with pytest.raises(ConfigError) as cli:
        check_ranges(OmegaConf.create({"agents": {"reg": {key: value}}}))
    answer: dict = {}

    def try_set(loop, c):
        r = c.post("/api/set", content=json.dumps({f"agents.reg.{key}": value}).encode())
        answer.update(r.json())

    run_arena(make_arena(epochs=1), tmp_path,
              [*standard_callbacks(live=True, **QUIET), AtSteps([1], try_set, paused=True)])  # fmt: skip
    assert answer["error"] == f"set: {cli.value}"


def test_a_good_set_after_refused_ones_is_applied_and_strict_json(tmp_path):
    answers: list = []

    def sets(loop, c):
        answers.append(c.post("/api/set", json={"agents.reg.lr": -1.0}).status_code)
        answers.append(c.post("/api/set", json={"agents.reg.lr": 0.01}).json())

    run_arena(make_arena(epochs=1), tmp_path,
              [*standard_callbacks(live=True, **QUIET), AtSteps([2], sets, paused=True)])  # fmt: skip
    assert answers[0] == 400 and answers[1]["changes"]["agents.reg.lr"]["to"] == 0.01
    lines = (tmp_path / CHANGES_FILE).read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0], parse_constant=_no_constants)


def _no_constants(name: str):
    raise AssertionError(f"non-strict JSON constant {name}")


class ShortArena:
    """Mixed into the toy arena: its constructor would refuse more than 3 epochs."""

    def check_config(self, cfg):
        if cfg.epochs > 3:
            raise ConfigError(f"arena.epochs={cfg.epochs}: this arena runs at most 3 epochs")


def test_an_arena_change_passes_the_arenas_cross_checks_first(tmp_path):
    from toy_arenas import ToyArena

    answers: list = []

    def sets(loop, c):
        answers.append(c.post("/api/set", json={"arena.epochs": 9}))
        answers.append(c.post("/api/set", json={"arena.epochs": 2}))

    arena = make_arena(type("Short", (ShortArena, ToyArena), {}), epochs=1)
    res = run_arena(arena, tmp_path,
                    [*standard_callbacks(live=True, **QUIET), AtSteps([2], sets, paused=True)])  # fmt: skip
    refused, applied = answers
    assert refused.status_code == 400 and refused.json()["setting"] == "arena.epochs"
    assert "at most 3 epochs" in refused.json()["error"]
    assert applied.status_code == 200 and res["epoch"] == 2


def test_selfplay_cross_checks_a_changed_config():
    from types import SimpleNamespace

    from paddlecraft.agents.settings import make_settings
    from paddlecraft.arenas.selfplay.config import CrossChecked, SelfPlayConfig

    cfg = make_settings(SelfPlayConfig, {"epochs": 2, "steps_per_epoch": 2,
                                         "search": {"updates": 4}}, "arena")  # fmt: skip
    arena = CrossChecked()
    arena.policy = SimpleNamespace(cfg=SimpleNamespace(search_proofs=False))
    arena.check_config(cfg)
    with pytest.raises(ConfigError, match="arena.search.updates"):
        arena.check_config(make_settings(SelfPlayConfig, {"epochs": 1, "steps_per_epoch": 2,
                                                          "search": {"updates": 4}}, "arena"))  # fmt: skip
