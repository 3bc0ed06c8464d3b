"""Every mistake, one line: a table of realistic command-line mistakes in every arena.

Each must print exactly ONE ``error:`` line (naming the setting, or the closest valid
names), exit with code 2, show no traceback, and leave nothing on disk (no run folder,
no ``.hydra/``, no log). The table runs through :func:`paddlecraft.cli.main` in one
subprocess (``tests/mistake_driver.py``: importing Paddle once keeps it fast); a few
cases also run as real ``python run.py`` processes, where the interpreter boundary is
the point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
Q = ["trainer.progress=false"]

# (name, command-line arguments, words the one error line must contain).
# {tmp} is a scratch folder with fixtures; {file} a plain file; {one_class} an image
# folder with a single class; {empty} an empty folder.
TABLE: list[tuple[str, list[str], list[str]]] = [
    # Hydra compose errors: misspelled arena, group option, key; wrong types
    ("arena_typo", ["arena=clasify"], ["arena=clasify", "did you mean arena=classify"]),
    ("encoder_group_no_package", ["encoder=cnnn"], ["encoder@agents.classifier.encoder"]),
    ("encoder_option_typo", ["encoder@agents.classifier.encoder=cnnn"], ["encoder=cnn"]),
    ("game_without_selfplay", ["game=connect4"], ["game=connect4", "arena=selfplay"]),
    ("game_typo", ["arena=selfplay", "game=connect4"], ["did you mean game=connect_four"]),
    ("data_typo", ["data=mnistt"], ["did you mean data=mnist"]),
    ("agent_name_typo", ["agents.classifer.lr=1"], ["agents.classifier.lr"]),
    ("top_level_epochs", ["epochs=5"], ["epochs=5", "did you mean arena.epochs"]),
    ("top_level_lr", ["lr=abc"], ["lr=abc", "did you mean agents.classifier.lr"]),
    ("arena_key_typo", ["arena.epoch=3"], ["did you mean arena.epochs"]),
    ("selfplay_key_typo", ["arena=selfplay", "arena.gamez_per_step=8"], ["arena.games_per_step"]),
    ("gan_key_typo", ["arena=gan", "arena.n_critc=2"], ["arena.n_critic"]),
    ("epochs_not_int", ["arena.epochs=abc"], ["arena.epochs=abc", "Integer"]),
    ("lr_not_float", ["agents.classifier.lr=abc"], ["agents.classifier.lr=abc", "Float"]),
    ("batch_size_float", ["arena.batch_size=1.5"], ["arena.batch_size=1.5", "Integer"]),
    ("seed_not_int", ["seed=abc"], ["seed=abc"]),
    ("unparsable", ["arena.epochs=[1"], ["cannot parse"]),
    # values no run can use, refused before any work
    ("epochs_zero", ["arena.epochs=0"], ["arena.epochs=0", ">= 1"]),
    ("epochs_negative", ["arena.epochs=-1"], ["arena.epochs=-1", ">= 1"]),
    ("batch_negative", ["arena.batch_size=-5"], ["arena.batch_size=-5", ">= 1"]),
    ("batch_zero", ["arena.batch_size=0"], ["arena.batch_size=0"]),
    ("eval_batch_zero", ["arena.eval_batch_size=0"], ["arena.eval_batch_size=0"]),
    ("workers_negative", ["data.workers=-1"], ["data.workers=-1", ">= 0"]),
    ("checkpoint_every_negative", ["trainer.checkpoint_every=-1"], ["trainer.checkpoint_every"]),
    ("keep_negative", ["trainer.keep_checkpoints=-2"], ["trainer.keep_checkpoints"]),
    ("max_steps_zero", ["trainer.max_steps=0"], ["trainer.max_steps=0"]),
    ("lr_negative", ["agents.classifier.lr=-0.1"], ["agents.classifier.lr=-0.1", ">= 0"]),
    ("grad_clip_negative", ["agents.classifier.grad_clip=-1"], ["agents.classifier.grad_clip"]),
    ("unknown_agent_setting", ["+agents.classifier.dropout=0.1"], ["dropout"]),
    ("gpu_on_cpu", ["agents.classifier.device=gpu"], ["agents.classifier.device"]),
    ("amp_on_cpu", ["agents.classifier.amp=bf16"], ["agents.classifier.amp"]),
    ("unsafe_target", ["agents.classifier.optimizer._target_=os.system"], ["os.system"]),
    # other arenas' own settings
    ("caption_k", ["arena=caption", "arena.k=1"], ["arena.k must be >= 2"]),
    ("caption_task", ["arena=caption", "arena.task=poems"], ["arena.task must be one of"]),
    ("gan_n_critic", ["arena=gan", "arena.n_critic=0"], ["arena.n_critic must be >= 1"]),
    ("gan_batch", ["arena=gan", "arena.batch_size=0"], ["arena.batch_size=0"]),
    ("gan_lr_negative", ["arena=gan", "agents.generator.lr=-1"], ["agents.generator.lr=-1"]),
    ("selfplay_minibatch", ["arena=selfplay", "arena.update.minibatch_size=0"], ["arena.update.minibatch_size=0"]),
    ("selfplay_epochs", ["arena=selfplay", "arena.epochs=0"], ["arena.epochs=0"]),
    ("selfplay_algo", ["arena=selfplay", "arena.algo=dqn"], ["arena.algo must be one of"]),
    ("selfplay_games_zero", ["arena=selfplay", "arena.games_per_step=0"], ["arena.games_per_step=0"]),
    ("selfplay_pool_zero", ["arena=selfplay", "arena.league.pool_size=0"], ["arena.league.pool_size=0"]),
    # a flat setting of 0.2 names its new place (settings were grouped)
    ("selfplay_old_key", ["arena=selfplay", "arena.collect_workers=2"], ["arena.collect_workers is now arena.workers.count", "write arena.workers.count=2"]),
    ("selfplay_old_search_key", ["arena=selfplay", "arena.search_updates=400"], ["arena.search_updates is now arena.search.updates"]),
    ("selfplay_old_dict_key", ["arena=selfplay", "game=connect_four", "~arena.search_eval_games.mcts1000"], ["arena.search_eval_games is now arena.eval.search_games"]),
    ("alphazero_simulations", ["arena=selfplay", "arena.algo=alphazero", "arena.search.simulations=0"], ["arena.search.simulations=0"]),
    ("gan_loss", ["arena=gan", "arena.loss=hinge2"], ["arena.loss=hinge2", "wgan_gp"]),
    ("gan_eval_samples", ["arena=gan", "arena.eval_samples=0"], ["arena.eval_samples=0"]),
    ("caption_chain_typo", ["arena=caption", "chain=asrr"], ["did you mean chain=asr"]),
    ("caption_beam_zero", ["arena=caption", "arena.beam_size=0"], ["arena.beam_size=0"]),
    ("optimizer_typo", ["agents.classifier.optimizer._target_=paddle.optimizer.Adamm"], ["Adamm"]),
    ("device_typo", ["agents.classifier.device=cpuu"], ["agents.classifier.device"]),
    ("bool_typo", ["trainer.visualdl=maybe"], ["trainer.visualdl=maybe"]),
    # data and files
    ("mnist_missing", ["data=mnist", "data.loader.path={tmp}/nope"], ["data.loader.path"]),
    ("image_folder_no_path", ["data=image_folder"], ["data.path is not set"]),
    ("image_folder_missing", ["data=image_folder", "data.path={tmp}/nope"], ["nope"]),
    ("single_class", ["data=image_folder", "data.path={one_class}"], ["at least 2"]),
    (
        "pretrained_missing",
        ["encoder@agents.classifier.encoder=resnet18", "agents.classifier.encoder.pretrained={tmp}/w.safetensors"],
        ["w.safetensors", "does not exist"],
    ),  # fmt: skip
    ("run_dir_under_a_file", ["hydra.run.dir={file}/run"], ["is a file, not a folder"]),
    ("resume_missing", ["resume={tmp}/nonexistent"], ["no such run directory"]),
    ("resume_not_a_run", ["resume={empty}"], ["no config.yaml"]),
    # the other commands
    ("export_missing", ["export={tmp}/nope", "export.agent=classifier"], ["nope"]),
    ("export_onnx_bool", ["export={empty}", "export.agent=a", "export.onnx=maybe"], ["export.onnx"]),
    ("export_no_agent", ["export={empty}"], ["no verified checkpoint"]),
    ("tournament_game", ["tournament", "--game", "chess", "--players", "random"], ["--game"]),
    ("tournament_odd", ["tournament", "--games", "3", "--players", "random", "tactical"], ["--games"]),
    ("tournament_player", ["tournament", "--players", "random", "{tmp}/nope:search5"], ["nope"]),
    ("tournament_no_players", ["tournament"], ["--players"]),
]  # fmt: skip


def _fixtures(tmp: Path) -> dict[str, str]:
    one = tmp / "one_class" / "cat"
    one.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(4):
        cv2.imwrite(str(one / f"{i}.png"), rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    (tmp / "a_file").write_text("not a folder\n")
    (tmp / "empty").mkdir()
    return {
        "tmp": str(tmp),
        "file": str(tmp / "a_file"),
        "one_class": str(tmp / "one_class"),
        "empty": str(tmp / "empty"),
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("mistakes")
    fx = _fixtures(tmp / "fixtures")
    cases = []
    for name, args, _ in TABLE:
        cwd = tmp / "cwd" / name
        cwd.mkdir(parents=True)
        other_command = args[0] == "tournament" or args[0].startswith("export=")
        argv = [a.format(**fx) for a in args] + ([] if other_command else Q)
        cases.append({"name": name, "args": argv, "cwd": str(cwd)})
    (tmp / "cases.json").write_text(json.dumps(cases))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    r = subprocess.run(
        [sys.executable, "-m", "tests.mistake_driver", str(tmp / "cases.json"), str(tmp / "out.jsonl")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    records = [json.loads(line) for line in (tmp / "out.jsonl").read_text().splitlines()]
    assert [x["name"] for x in records] == [c["name"] for c in cases]
    # nothing written next to the fixtures either (e.g. a run folder inside them)
    assert sorted(p.name for p in Path(fx["empty"]).iterdir()) == []
    return {x["name"]: x for x in records}


@pytest.mark.parametrize(("name", "args", "words"), TABLE, ids=[t[0] for t in TABLE])
def test_mistake_is_one_error_line_exit_2_and_leaves_nothing(outcomes, name, args, words):
    got = outcomes[name]
    text = got["stderr"] + got["stdout"]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert "Traceback" not in text, text[-3000:]
    assert got["rc"] == 2, text[-3000:]
    assert len(errors) == 1, text[-3000:]
    for w in words:
        assert w in errors[0], (w, errors[0])
    assert got["left"] == [], got["left"]  # no run folder, no .hydra/, no log


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args, *Q],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["arena=clasify"], "did you mean arena=classify"),  # fails while Hydra composes
        (["arena.batch_size=-5"], "arena.batch_size=-5"),  # after Hydra made the run folder
    ],
)
def test_real_process_exit_code_and_one_line(args, words, tmp_path):
    r = _run(args, tmp_path)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr[-2000:]
    assert len(errors) == 1 and words in errors[0]
    assert list(tmp_path.iterdir()) == []  # runs/<arena>/<time> was taken back
