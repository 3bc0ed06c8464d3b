"""``python run.py export=<run dir> export.agent=<name>``: a trained agent, ready to deploy.

Takes the agent from the run's newest checkpoint that verifies (or from a folder that
``Agent.save`` wrote, such as ``runs/selfplay/<time>/policy``) and writes it with
`paddlecraft.agents.export.export_layer` into ``<run dir>/export/<agent>[.<part>]/``.

Settings (``key=value``, like Hydra overrides; this command composes no config):

- ``export=<dir>``: the run directory (or a saved agent folder);
- ``export.agent=<name>``: the agent (optional when the run has one agent);
- ``export.part=<attribute>``: export one of its encoders instead (``encoder`` is a
  captioner's image encoder);
- ``export.onnx=true``: also write ``model.onnx`` (paddle2onnx) checked by onnxruntime;
- ``export.opset=<n>``: ONNX opset (default 17);
- ``export.out=<dir>``: where to write.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddle import nn

from paddlecraft.agents import Agent
from paddlecraft.agents.export import ExportError, export_layer
from paddlecraft.encoders.tensorio import CheckpointError
from paddlecraft.errors import ConfigError

from .checkpoint import latest_good_checkpoint

log = logging.getLogger("paddlecraft")


class ExportConfigError(ConfigError):
    """The export command's settings are wrong; raised before anything is exported."""


@dataclass
class ExportSettings:
    """What ``python run.py export=...`` exports and where."""

    run: str  #: run directory, or a folder written by Agent.save
    agent: str | None = None  #: agent name (optional if the run has only one)
    part: str | None = None  #: export this encoder attribute of the agent instead
    onnx: bool = False  #: also convert to ONNX and check with onnxruntime
    opset: int = 17  #: ONNX opset
    out: str | None = None  #: output folder (default <run>/export/<agent>[.<part>])


def is_export_command(argv: Sequence[str]) -> bool:
    """Whether the command line asks for an export rather than a run."""
    return any(a.startswith("export=") for a in argv)


def parse_settings(argv: Sequence[str]) -> ExportSettings:
    """``export=... export.agent=...`` arguments as `ExportSettings`."""
    known = {"agent", "part", "onnx", "opset", "out"}
    values: dict[str, Any] = {}
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq or not (key == "export" or key.startswith("export.")):
            raise ExportConfigError(
                f"{arg!r}: an export command takes only export=<run dir> and "
                f"export.<{'|'.join(sorted(known))}>=<value>; training settings belong to a run"
            )
        field = "run" if key == "export" else key[len("export.") :]
        if field != "run" and field not in known:
            raise ExportConfigError(
                f"unknown setting {key!r}; choose from export, "
                + ", ".join(f"export.{k}" for k in sorted(known))
            )
        values[field] = value
    if "onnx" in values:
        flag = values["onnx"].lower()
        if flag not in ("true", "false"):
            raise ExportConfigError(f"export.onnx={values['onnx']!r}: expected true or false")
        values["onnx"] = flag == "true"
    if "opset" in values:
        values["opset"] = int(values["opset"])
    return ExportSettings(**values)


def agent_folder(run: Path, agent: str | None) -> Path:
    """The saved-agent folder to export: from the newest good checkpoint, or ``run`` itself."""
    if (run / "agent.json").is_file():
        return run
    found = latest_good_checkpoint(run)
    if found is None:
        raise ExportConfigError(
            f"export={str(run)!r}: no verified checkpoint there (and no agent.json); pass a run "
            "directory with checkpoints/ or a folder written by Agent.save"
        )
    agents = sorted(p.name for p in (found[0] / "agents").iterdir() if p.is_dir())
    if agent is None:
        if len(agents) != 1:
            raise ExportConfigError(
                f"the run has agents {agents}: choose one with export.agent=<name>"
            )
        agent = agents[0]
    if agent not in agents:
        raise ExportConfigError(f"export.agent={agent!r}: the run's agents are {agents}")
    return found[0] / "agents" / agent


def export_run(settings: ExportSettings) -> dict[str, Any]:
    """Load the agent, export it (or one of its parts); return the ``export.json`` record."""
    run = Path(settings.run)
    folder = agent_folder(run, settings.agent)
    agent = Agent.load(folder)
    layer: nn.Layer = agent
    label = agent.name
    if settings.part:
        layer = getattr(agent, settings.part, None)
        if not isinstance(layer, nn.Layer):
            parts = [n for n, _ in agent.named_children()]
            raise ExportConfigError(
                f"export.part={settings.part!r}: {type(agent).__name__} {agent.name!r} has "
                f"no such layer; its parts are {parts}"
            )
        label = f"{agent.name}.{settings.part}"
    out = Path(settings.out) if settings.out else run / "export" / label
    record = export_layer(
        layer, out, onnx=settings.onnx, opset=settings.opset, what=f"agent {label!r}"
    )
    log.info("exported %s from %s -> %s (%s)", label, folder, out, record["checks"])
    return record


def main(argv: Sequence[str]) -> int:
    """Command-line entry (``run.py`` calls it for ``export=...``); returns the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        export_run(parse_settings(argv))
    except (ExportConfigError, CheckpointError) as e:
        sys.stderr.write(f"error: {' '.join(str(e).split())}\n")
        return 2
    except ExportError as e:
        log.error("%s", e)
        return 1
    return 0
