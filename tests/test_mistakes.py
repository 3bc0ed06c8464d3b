"""Every mistake, one line: a table of realistic command-line mistakes in every arena.

Each must print exactly ONE ``error:`` line (naming the setting, or the closest valid
names), exit with code 2, show no traceback, and leave nothing on disk (no run folder,
no ``.hydra/``, no log). The table runs through :func:`paddlecraft.cli.main` in one
subprocess (``tests/mistake_driver.py``: importing Paddle once keeps it fast); a few
cases also run as real ``python run.py`` processes, where the interpreter boundary is
the point.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
Q = ["trainer.progress=false"]
SHORT = ["trainer.max_steps=2"]

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
    # sizes and shapes, checked when the agents and arena are built (before the run folder)
    ("hidden_size_zero", ["agents.classifier.encoder.hidden_size=0"], ["agents.classifier.encoder.hidden_size=0", ">= 1"]),
    ("latent_dim_zero", ["arena=gan", "agents.generator.encoder.latent_dim=0"], ["agents.generator.encoder.latent_dim=0", ">= 1"]),
    ("channels_zero", ["encoder@agents.classifier.encoder=cnn", "agents.classifier.encoder.channels=[0,8]"], ["agents.classifier.encoder.channels", ">= 1"]),
    ("speech_encoder_for_images", ["encoder@agents.classifier.encoder=whisper_tiny"], ["agents.classifier.encoder", "WhisperStyleEncoder", "images", "encoder@agents.classifier.encoder=cnn"]),
    ("text_encoder_for_images", ["encoder@agents.classifier.encoder=gru_text"], ["agents.classifier.encoder", "TextEncoder", "images"]),
    ("recognizer_head", ["arena=caption", "chain=asr", "agents.recognizer.head=foo"], ["agents.recognizer.head", "ctc"]),
    ("candidates_over_objects", ["arena=referential", "arena.game=discrimination", "arena.candidates=500"], ["arena.candidates=500", "the limit is 100"]),
    ("train_candidates_over_objects", ["arena=referential", "arena.game=discrimination", "arena.train_candidates=95"], ["arena.train_candidates=95", "the limit is 90"]),
    ("candidates_5000_shapes", ["arena=referential_shapes", "arena.candidates=5000"], ["arena.candidates=5000", "the limit is 3600"]),
    ("candidates_memory", ["arena=referential_shapes", "arena.candidates=600"], ["arena.candidates=600", "GiB", "the limit is 2 GiB"]),
    # the user's own configs and package
    ("own_package_missing", ["--config-dir", "{own_conf}", "arena=mine"], ["mypkg_missing", "PYTHONPATH", "pip install -e"]),
    ("own_yaml_broken", ["--config-dir", "{bad_conf}", "arena=bad"], ["bad.yaml:4:14", "not valid YAML"]),
    # sweeps: a refused -m sweep leaves no multirun/ folder; a list without -m says so
    ("sweep_refused_job", ["-m", "hydra/launcher=basic", "arena.epochs=0"], ["arena.epochs=0"]),
    ("sweep_bad_value", ["-m", "arena.epochs=abc,1"], ["arena.epochs=abc,1", "Integer"]),
    # the default (joblib) launcher: a bad point refuses the sweep before any job starts
    ("sweep_bad_point_joblib", ["-m", "arena.epochs=1,0"], ["arena.epochs=0", ">= 1"]),
    # a dict value is merged into the dict already there; a sweep keeps each key's last value
    ("dict_value_merged", ["arena=selfplay", "game=connect_four", "agents.policy.lr_scheduler={{_target_: paddle.optimizer.lr.OneCycleLR, total_steps: 11}}"], ["'total_steps' is not a setting of the agents.policy.lr_scheduler", "'agents.policy.lr_scheduler=null' 'agents.policy.lr_scheduler={"]),
    ("dict_value_sweep", ["-m", "hydra/launcher=basic", "arena=selfplay", "game=connect_four", "agents.policy.lr_scheduler=null", "agents.policy.lr_scheduler={{_target_: paddle.optimizer.lr.OneCycleLR, total_steps: 11}}"], ["a sweep (-m) keeps only the last value of each key", "--config-dir"]),
    ("list_without_m", ["arena.epochs=1,2"], ["arena.epochs=1,2", "add -m", "arena.epochs=[1,2]"]),
    # a hydra.run.dir / hydra.sweep.dir outside the current folder: the folders it made go too
    ("run_dir_elsewhere", ["arena=caption", "arena.k=1", "hydra.run.dir={outside}/a/b/run"], ["arena.k"]),
    ("sweep_dir_elsewhere", ["-m", "hydra/launcher=basic", "arena.batch_size=0", "hydra.sweep.dir={outside}/sweep"], ["arena.batch_size=0"]),
    ("run_dir_existing_empty", ["arena.epochs=0", "hydra.run.dir={empty}"], ["arena.epochs=0"]),
    # the other commands
    ("export_missing", ["export={tmp}/nope", "export.agent=classifier"], ["nope"]),
    ("export_onnx_bool", ["export={empty}", "export.agent=a", "export.onnx=maybe"], ["export.onnx"]),
    ("export_no_agent", ["export={empty}"], ["no verified checkpoint"]),
    ("tournament_game", ["tournament", "--game", "chess", "--players", "random"], ["--game"]),
    ("tournament_odd", ["tournament", "--games", "3", "--players", "random", "tactical"], ["--games"]),
    ("tournament_player", ["tournament", "--players", "random", "{tmp}/nope:search5"], ["nope"]),
    ("tournament_no_players", ["tournament"], ["--players"]),
    ("feed_timeout_negative", ["feed", "{empty}", "{empty}", "--timeout", "-5"], ["--timeout -5", "> 0"]),
    ("feed_no_arguments", ["feed"], ["run_dir", "usage: paddlecraft feed RUN_DIR"]),
    ("feed_no_path", ["feed", "{empty}"], ["give PATH", "usage: paddlecraft feed"]),
    ("live_no_arguments", ["live"], ["paddlecraft live: give RUN_DIR and a command", "status"]),
    ("live_no_command", ["live", "{empty}"], ["a command after", "status"]),
    ("summary_out_is_a_file", ["summary", "{good_run}", "--out", "{file}"], ["--out", "a file is there", "folder"]),
    ("summary_corrupt_run", ["summary", "{good_run}", "{good_run2}", "{corrupt_run}"], ["1 run(s) cannot be read", "corrupt_run", "results.json is not valid JSON"]),
    ("summary_corrupt_run_alone", ["summary", "{corrupt_run}"], ["corrupt_run", "results.json is not valid JSON"]),
    # an optional defaults entry (debug, debug_arena...) refuses an option it does not hold
    ("debug_typo", ["debug=smok"], ["debug=smok", "did you mean debug=smoke"]),
    ("config_dir_missing", ["--config-dir", "{tmp}/nonexistent", "arena=classify"], ["--config-dir", "nonexistent", "no such folder"]),
    # every slot's kind: image, text, speech; encoder or decoder
    ("text_decoder_for_image_decoder", ["arena=gan", "decoder@agents.generator.encoder=gpt_text"], ["agents.generator.encoder", "TransformerTextDecoder is a text decoder", "takes an image decoder", "decoder@agents.generator.encoder=dcgan"]),
    ("image_encoder_in_text_slot", ["arena=caption", "encoder@agents.listener.text_encoder=resnet18"], ["agents.listener.text_encoder", "ResNetEncoder is an image encoder", "takes a text encoder", "encoder@agents.listener.text_encoder=gru_text"]),
    ("image_encoder_in_speech_slot", ["arena=caption", "chain=asr", "encoder@agents.recognizer.encoder=cnn"], ["agents.recognizer.encoder", "is an image encoder", "takes a speech encoder"]),
    ("image_decoder_in_text_decoder_slot", ["arena=caption", "decoder@agents.captioner.decoder=dcgan"], ["agents.captioner.decoder", "ImageDecoder is an image decoder", "takes a text decoder"]),
]  # fmt: skip
#: the commands of their own (no Hydra run): nothing is added to their arguments
OTHER_COMMANDS = ("tournament", "feed", "live", "summary")
#: a finished run's record, as `paddlecraft summary` reads it
GOOD_RESULTS = {"status": "finished", "headline": "test_accuracy", "headline_mode": "max",
                "metrics": {"test_accuracy": 0.9}, "overrides": ["seed=0"]}  # fmt: skip


#: a user's arena whose package is not importable (nothing named mypkg_missing exists)
OWN_ARENA = """# @package _global_
defaults:
  - /data: digits
  - /agent@agents.classifier: classifier
  - /encoder@agents.classifier.encoder: mlp
allow_targets: [mypkg_missing.MyArena]
arena:
  _target_: mypkg_missing.MyArena
  epochs: 1
"""
#: line 4, column 14: a mapping value where none may start
BROKEN_YAML = "# @package _global_\narena:\n  epochs: 1\n   batch_size: [3\n"


def _fixtures(tmp: Path) -> dict[str, str]:
    one = tmp / "one_class" / "cat"
    one.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(4):
        cv2.imwrite(str(one / f"{i}.png"), rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    (tmp / "a_file").write_text("not a folder\n")
    (tmp / "empty").mkdir()
    (tmp / "outside").mkdir()
    (tmp / "own_conf" / "arena").mkdir(parents=True)
    (tmp / "own_conf" / "arena" / "mine.yaml").write_text(OWN_ARENA)
    (tmp / "bad_conf" / "arena").mkdir(parents=True)
    (tmp / "bad_conf" / "arena" / "bad.yaml").write_text(BROKEN_YAML)
    for name, seed in (("good_run", 0), ("good_run2", 1)):
        (tmp / name).mkdir()
        record = {**GOOD_RESULTS, "overrides": [f"seed={seed}"]}
        (tmp / name / "results.json").write_text(json.dumps(record))
    (tmp / "corrupt_run").mkdir()  # a results.json cut short (a full disk, a copy stopped)
    (tmp / "corrupt_run" / "results.json").write_text(json.dumps(GOOD_RESULTS)[:40])
    return {
        "good_run": str(tmp / "good_run"),
        "good_run2": str(tmp / "good_run2"),
        "corrupt_run": str(tmp / "corrupt_run"),
        "outside": str(tmp / "outside"),
        "own_conf": str(tmp / "own_conf"),
        "bad_conf": str(tmp / "bad_conf"),
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
        other_command = args[0] in OTHER_COMMANDS or args[0].startswith("export=")
        # a mistake that escaped would train: two steps, then it fails its exit code
        short = [] if any(a.startswith("trainer.max_steps") for a in args) else SHORT
        argv = [a.format(**fx) for a in args] + ([] if other_command else [*Q, *short])
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
    # nothing written next to the fixtures either (e.g. a run folder inside them), and the
    # user's own folders given as hydra.run.dir stay, emptied of what Hydra wrote
    assert sorted(p.name for p in Path(fx["empty"]).iterdir()) == []
    assert sorted(p.name for p in Path(fx["outside"]).iterdir()) == []
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


def test_resume_logs_into_its_own_run_and_makes_no_folder(tmp_path):
    """`resume=` writes no runs/<arena>/<time>: its log joins the resumed run's cli.log, and
    the run's .hydra/ record of how it was started is kept."""
    from tests.mistake_driver import run_case

    run_dir, cwd = tmp_path / "run", tmp_path / "cwd"
    cwd.mkdir()
    first = run_case(["trainer.max_steps=2", f"hydra.run.dir={run_dir}", *Q], str(cwd))
    assert first["rc"] == 0 and first["left"] == [], first["stderr"][-3000:]
    started = (run_dir / ".hydra" / "overrides.yaml").read_text()
    again = run_case([f"resume={run_dir}", "trainer.max_steps=3", *Q], str(cwd))
    assert again["rc"] == 0, again["stderr"][-3000:]
    assert again["left"] == []  # nothing under the current folder (no runs/classify/<time>)
    assert (run_dir / ".hydra" / "overrides.yaml").read_text() == started
    assert "resumed from" in (run_dir / "cli.log").read_text()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["step"] == 3
    # the resumed run is the same run: its record keeps the first command line, then the
    # resume's (a sweep summary groups it with its siblings)
    first_line = [ln[2:] for ln in started.splitlines()]
    assert results["overrides"] == [*first_line, f"resume={run_dir}", "trainer.max_steps=3", *Q]


@pytest.mark.parametrize("resume", [False, True], ids=["new_run", "resume"])
def test_visualdl_without_visualdl_installed_names_the_extra(tmp_path, monkeypatch, resume):
    """``trainer.visualdl=true`` where VisualDL is not installed (an optional extra): one
    line naming ``pip install 'paddlecraft[visualdl]'``, exit 2, before any work; a
    resumed run is left as it was (no ImportError traceback, no visualdl/ folder)."""
    from tests.mistake_driver import run_case

    run_dir, cwd = tmp_path / "run", tmp_path / "cwd"
    cwd.mkdir()
    if resume:
        first = run_case(["trainer.max_steps=1", f"hydra.run.dir={run_dir}", *Q], str(cwd))
        assert first["rc"] == 0, first["stderr"][-3000:]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    monkeypatch.setitem(sys.modules, "visualdl", None)  # what `import visualdl` fails on
    args = [f"resume={run_dir}"] if resume else [f"hydra.run.dir={run_dir}"]
    got = run_case([*args, "trainer.visualdl=true", "trainer.max_steps=2", *Q], str(cwd))
    errors = [ln for ln in got["stderr"].splitlines() if ln.startswith("error:")]
    assert got["rc"] == 2 and "Traceback" not in got["stderr"], got["stderr"][-3000:]
    assert len(errors) == 1 and "pip install 'paddlecraft[visualdl]'" in errors[0], errors
    assert "trainer.visualdl=false" in errors[0]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_an_encoder_whose_input_spec_cannot_take_the_images_is_refused():
    """The check after building: one batch of the agent's image shape against the encoder's
    declared input (a custom encoder that takes no size keywords is caught here)."""
    from types import SimpleNamespace

    from paddlecraft.agents.plug import check_image_input
    from paddlecraft.encoders.base import InputSpec
    from paddlecraft.errors import PaddleCraftError

    images = {"in_channels": 1, "image_size": 8, "input_size": 64}
    for fits in (InputSpec((1, None, None)), InputSpec((1, 8, 8)), InputSpec((64,), flatten=True)):
        check_image_input(SimpleNamespace(input_specs={"x": fits}), images, "agents.a.encoder")
    for wrong in (
        InputSpec((80, None)),
        InputSpec((3, None, None)),
        InputSpec((65,), flatten=True),
    ):
        with pytest.raises(PaddleCraftError) as info:
            check_image_input(SimpleNamespace(input_specs={"x": wrong}), images, "agents.a.encoder")
        assert str(info.value).startswith("agents.a.encoder: ")
        assert wrong.describe() in str(info.value) and "[batch, 1, 8, 8]" in str(info.value)


@pytest.mark.parametrize("form", ["--config-dir", "--config-dir="])
def test_own_package_next_to_the_config_folder_is_importable(tmp_path, form):
    from paddlecraft.cli import add_config_dir_parent

    (tmp_path / "my_conf").mkdir()
    (tmp_path / "ownpkg_next_to_conf").mkdir()
    (tmp_path / "ownpkg_next_to_conf" / "__init__.py").write_text("VALUE = 7\n")
    args = (
        [form, str(tmp_path / "my_conf")]
        if form == "--config-dir"
        else [f"{form}{tmp_path / 'my_conf'}"]
    )
    before = list(sys.path)
    try:
        add_config_dir_parent([*args, "arena=mine"])
        assert sys.path[:-1] == before and sys.path[-1] == str(tmp_path)  # last: shadows nothing
        assert __import__("ownpkg_next_to_conf").VALUE == 7
    finally:
        sys.path[:] = before
        sys.modules.pop("ownpkg_next_to_conf", None)


#: the config groups a setting's dotted name starts with
GROUPS = ("agents", "arena", "data", "trainer", "encoder", "decoder", "game", "chain", "export")


#: builtin errors that print a traceback: a message naming a setting must not use them
PLAIN = ("ValueError", "TypeError", "KeyError", "RuntimeError", "IndexError", "LookupError")
#: library code the scan reads: every layer of the package
LIBRARY = ("agents", "arenas", "craftdata", "encoders", "paddlecraft")


def _message(node: ast.AST, local: dict[str, list[ast.AST]]) -> str:
    """The literal text of an error message (f-string holes as {}), through ``+``,
    ``"...".format(...)`` and a message first put in a local name (``local``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            _message(v, local) if isinstance(v, ast.Constant) else "{}" for v in node.values
        )
    if isinstance(node, ast.BinOp):
        return _message(node.left, local) + _message(node.right, local)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _message(node.func.value, local)  # "...".format(...), "...".join(...)
    if isinstance(node, ast.Name):
        return " ".join(_message(v, {}) for v in local.get(node.id, []))
    return ""


def _plain_setting_errors(tree: ast.AST, names: re.Pattern) -> list[tuple[int, str]]:
    """``(line, message)`` of each ``raise <PLAIN>(...)`` in ``tree`` whose message names a
    setting."""
    found = []
    scopes = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    for scope in scopes:
        local: dict[str, list[ast.AST]] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        local.setdefault(target.id, []).append(node.value)
        for node in ast.walk(scope):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            text = _message(node.exc.args[0], local) if node.exc.args else ""
            if name in PLAIN and names.search(text):
                found.append((node.lineno, text))
    return sorted(set(found))


def _setting_names() -> re.Pattern:
    return re.compile(rf"(?<![\w.])({'|'.join(GROUPS)})(\.[\w<>{{}}%]+|=)")


def test_the_plain_error_scan_reads_messages_however_they_are_built():
    source = """
def f(x):
    raise ValueError(f"arena.epochs must be >= 1, got {x}")
def g(x):
    msg = "agents.%s.lr must be >= 0" % x
    raise RuntimeError(msg)
def h(x):
    raise KeyError("trainer.{} is unknown".format(x))
def fine(x):
    raise ConfigError(f"arena.epochs must be >= 1, got {x}")
def internal(x):
    raise ValueError(f"got {x} rows")
"""
    found = _plain_setting_errors(ast.parse(source), _setting_names())
    assert [line for line, _ in found] == [3, 6, 8]


def test_no_plain_error_names_a_setting():
    """A setting-naming error is a PaddleCraftError (one error: line), never a bare
    ValueError / TypeError / KeyError / RuntimeError, anywhere in the library."""
    names = _setting_names()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text[:80]}"
        for top in LIBRARY
        for path in sorted((ROOT / top).rglob("*.py"))
        for line, text in _plain_setting_errors(ast.parse(path.read_text()), names)
    ]
    assert found == [], "\n".join(found)


def test_take_back_removes_only_hydra_files_in_folders_the_command_made(tmp_path):
    from paddlecraft.run_folders import folders_noted, note_new_folder, take_back

    def hydra_writes(d: Path) -> None:
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "config.yaml").write_text("seed: 0\n")
        (d / "cli.log").write_text("[INFO] Instantiating ...\n")

    made, kept, mine = (
        tmp_path / "new" / "deep" / "run",
        tmp_path / "kept" / "run",
        tmp_path / "mine",
    )
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's\n")
    with folders_noted():
        for d in (made, kept, mine):
            note_new_folder(d)
            hydra_writes(d)
        (kept / "config.yaml").write_text("seed: 0\n")  # the run had started: a run's file
        take_back()
    assert not (tmp_path / "new").exists()  # every folder the command made, up to the first
    assert sorted(p.name for p in kept.iterdir()) == [".hydra", "cli.log", "config.yaml"]
    assert sorted(p.name for p in mine.iterdir()) == [".hydra", "cli.log", "notes.txt"]
