"""The ``paddlecraft`` command (``python run.py`` in a checkout is the same command).

``paddlecraft arena=<name> [key=value ...]`` composes the built-in configs (shipped inside
the package as `paddlecraft.conf`) with Hydra, validates, runs and returns the
headline metric so sweepers can optimise it. The same entry point also takes:

- ``paddlecraft export=<run dir> export.agent=<name>``: export a trained agent
  (`paddlecraft.arenas.engine.export`; no config is composed);
- ``paddlecraft tournament --game connect_four --players ...``: rate players
  (`paddlecraft.arenas.selfplay.tournament`);
- ``paddlecraft summary DIR ... [--by KEY] [--metric NAME]``: summarise run and sweep
  folders (`paddlecraft.arenas.engine.summary`);
- ``paddlecraft live RUN_DIR status|pause|resume|checkpoint|evaluate|stop|set k=v|open``:
  watch and steer a live run (`paddlecraft.livecli`);
- ``paddlecraft --help`` (the arenas and config groups), ``--hydra-help`` (Hydra's own
  help), ``--version``; ``--config-dir DIR`` adds a user's config folder, ``-m`` sweeps.

Runs land in ``./runs/<arena>/<time>`` of the directory the command is run from.
Exit codes: 0 done, 2 a mistake (one ``error:`` line, nothing written), 3 the run
diverged (docs/reliability.md).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from paddlecraft import PADDLE_MISSING, __version__
from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning, import_paddle_quietly
from paddlecraft.mistakes import run_hydra

# Paddle is imported only past --help/--version (both answer at once), after the CPU tuning.

#: the built-in configs, wherever the package lives (a checkout or site-packages)
CONFIG_PATH = "pkg://paddlecraft.conf"
#: config groups shown by --help, in the order a user meets them
HELP_GROUPS = ("arena", "game", "chain", "data", "agent", "encoder", "decoder", "critic",
               "experiment", "sweep", "debug")  # fmt: skip


@hydra.main(config_path=CONFIG_PATH, config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float:
    """Run the configured arena; return its headline metric."""
    from hydra.types import RunMode

    from paddlecraft.arenas.engine.app import USAGE, main_entry
    from paddlecraft.errors import ConfigError
    from paddlecraft.mistakes import check_group_choices

    hc = HydraConfig.get()
    try:
        check_group_choices(hc.overrides.task)  # debug=smok: an optional group's typo
    except ConfigError as e:
        sys.stderr.write(f"error: {e}\n")
        raise SystemExit(USAGE) from None
    if hc.mode == RunMode.MULTIRUN:  # one MLflow store and experiment per sweep
        from paddlecraft.arenas.engine.summary import share_sweep_tracking
        from paddlecraft.arenas.engine.summary.hydra_callback import sweep_dir

        share_sweep_tracking(cfg, sweep_dir(hc.runtime.output_dir, hc.sweep.subdir))
    return main_entry(
        cfg,
        run_dir=hc.runtime.output_dir,
        overrides=list(hc.overrides.task),
        multirun=hc.mode == RunMode.MULTIRUN,
    )


def _summary(text: str) -> str:
    """The first comment line of a config file that says something (not ``@package``)."""
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("#"):
            break
        s = s.lstrip("#").strip()
        if s and not s.startswith("@package"):
            return s
    return ""


def help_text() -> str:
    """``paddlecraft --help``: usage, then every option of every config group, one line each."""
    conf = resources.files("paddlecraft.conf")
    lines = [
        f"PaddleCraft {__version__}: multi-agent, multimodal deep learning on PaddlePaddle.",
        "",
        "usage: paddlecraft arena=<name> [group=option ...] [key=value ...]",
        "       paddlecraft -m <key>=<a>,<b> ...          (sweep: Hydra multirun)",
        "       paddlecraft --config-dir DIR arena=<your arena>   (your own configs)",
        "       paddlecraft export=<run dir> export.agent=<name> [export.onnx=true]",
        "       paddlecraft tournament --game connect_four --players <player> ...",
        "       paddlecraft feed <run dir> <folder or captions file> [--end]   (data=stream)",
        "       paddlecraft resume=<run dir>",
        "       paddlecraft summary <run or sweep dir> ... [--by KEY] [--metric NAME]",
        "       paddlecraft live <run dir> status|pause|resume|checkpoint|evaluate|stop|open|set k=v",
        "       paddlecraft --version | --help | --hydra-help | --cfg job (print the config)",
        "",
        "Swap an agent's encoder: encoder@agents.<agent>.<slot>=<encoder>. Runs land in",
        "./runs/<arena>/<time>. Config groups (group=option):",
    ]
    for group in HELP_GROUPS:
        folder = conf / group
        if not folder.is_dir():
            continue
        options = sorted(
            (p for p in folder.iterdir() if p.name.endswith(".yaml")), key=lambda p: p.name
        )
        lines.append("")
        lines.append(f"{group}:")
        for p in options:
            lines.append(f"  {p.name[:-5]:<24} {_summary(p.read_text())}")
    return "\n".join(lines) + "\n"


def config_dirs(args: Sequence[str]) -> list[str]:
    """The folders ``--config-dir DIR`` / ``-cd DIR`` / ``--config-dir=DIR`` name."""
    out = []
    for i, a in enumerate(args):
        if a in ("--config-dir", "-cd") and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith("--config-dir="):
            out.append(a.split("=", 1)[1])
    return out


def missing_config_dir(args: Sequence[str]) -> str | None:
    """The ``error:`` line for a ``--config-dir`` that is not a folder, else None."""
    for given in config_dirs(args):
        if not Path(given).expanduser().is_dir():
            return (
                f"--config-dir {given}: no such folder; give the folder that holds your "
                "config groups (e.g. my_conf with my_conf/arena/<name>.yaml)"
            )
    return None


def add_config_dir_parent(args: Sequence[str]) -> None:
    """Make a user's package next to their configs importable: the folder that holds
    ``--config-dir DIR`` (``my_project/`` for ``my_project/my_conf``) goes on ``sys.path``,
    last, so it never shadows an installed package."""
    for given in config_dirs(args):
        parent = str(Path(given).expanduser().resolve().parent)
        if parent not in sys.path:
            sys.path.append(parent)


def main(argv: Sequence[str] | None = None) -> int | None:
    """Console-script entry point (``paddlecraft``); ``argv`` defaults to ``sys.argv[1:]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["--version"], ["-V"]):
        sys.stdout.write(f"paddlecraft {__version__}\n")
        return 0
    if args[:1] in (["--help"], ["-h"]):
        sys.stdout.write(help_text())
        return 0
    if args[:1] == ["live"]:  # paddlecraft live RUN_DIR status|pause|...: a client, no Paddle
        from paddlecraft.livecli import main as live_main

        return live_main(args[1:])
    if importlib.util.find_spec("paddle") is None:  # no dependency declares it (docs/install.md)
        sys.stderr.write(f"error: {PADDLE_MISSING}\n")
        return 2
    apply_cpu_tuning()  # before anything imports paddle
    import_paddle_quietly()
    if args[:1] == ["tournament"]:
        from paddlecraft.arenas.selfplay.tournament import main as tournament_main

        tournament_main(args[1:])
        return 0
    if args[:1] == ["feed"]:  # paddlecraft feed RUN_DIR PATH: samples to a data=stream run
        from paddlecraft.feed import main as feed_main

        return feed_main(args[1:])
    if args[:1] == ["summary"]:
        from paddlecraft.arenas.engine.summary.command import main as summary_main

        return summary_main(args[1:])
    from paddlecraft.arenas.engine.export import is_export_command
    from paddlecraft.arenas.engine.export import main as export_main

    if is_export_command(args):  # paddlecraft export=<run dir> export.agent=<name>
        return export_main(args)
    if args[:1] == ["--hydra-help"]:
        args[0] = "--help"
    from paddlecraft.arenas import register_configs
    from paddlecraft.own_arena import register_own_arena_schemas

    register_configs()
    bad_dir = missing_config_dir(args)
    if bad_dir:
        sys.stderr.write(f"error: {bad_dir}\n")
        return 2
    add_config_dir_parent(args)
    register_own_arena_schemas(args)  # your arena's Config is its schema (--config-dir)
    from paddlecraft.arenas.engine.live.config import expand_shorthand

    args = expand_shorthand(args)  # trainer.live=true -> trainer.live.enabled=true
    sys.argv = [sys.argv[0], *args]  # Hydra reads its overrides from sys.argv
    return run_hydra(_hydra_main, args)


def run() -> None:
    """``[project.scripts] paddlecraft``: `main`, its return value as the exit code."""
    sys.exit(main())
