"""Structured configs: dataclass schemas in Hydra's ConfigStore.

The engine owns the run-level schemas (run, trainer, data). Each arena family registers
its own components with `register_schemas` (arenas, agents and encoders, derived
from their settings dataclasses), the same way a user's arena package does. Config files
start from a registered schema (``defaults: - /schema/<group>/<name>@_here_``), so a
mistyped key or a wrong type fails when Hydra composes the config, naming the full key
(``Key 'lrr' not in 'ClassifierSchema'  full_key: agents.classifier.lrr``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from paddlecraft.agents.settings import schema_node, signature_schema

from .callbacks import TrainerConfig

# ----------------------------------------------------------------------------- run level


@dataclass
class DataConfig:
    """A dataset: its loader and the shape facts encoder configs interpolate."""

    loader: Any = MISSING  #: {_target_: paddlecraft.craftdata.load_digits, ...}
    channels: int = 1  #: image planes
    image_size: int = 8  #: image side
    #: channels * image_size**2, derived: a config that restates it can only contradict it
    flat_size: int = "${craft.mul:${.channels},${.image_size},${.image_size}}"  # type: ignore[assignment]
    path: Optional[str] = None  #: your data's folder or file (data=image_folder)  # noqa: UP045
    test_path: Optional[str] = None  #: a test folder/file; unset: a seeded share of path  # noqa: UP045
    on_bad_file: str = "stop"  #: a bad data file: stop (one clear error) | skip (log, count)
    workers: int = 0  #: processes decoding data read from files (0: the main process)


@dataclass
class RunConfig:
    """The root config (conf/config.yaml)."""

    seed: int = 0  #: run seed: data order, sampling, global RNG
    resume: Optional[str] = None  #: a run directory to continue  # noqa: UP045
    allow_targets: list[str] = field(default_factory=list)  #: extra _target_ names to allow
    agents: dict[str, Any] = field(default_factory=dict)  #: agents by name
    arena: Any = MISSING  #: the arena (conf/arena/*)
    data: DataConfig = field(default_factory=DataConfig)  #: dataset (conf/data/*)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)  #: engine settings


def schema_of(obj: type) -> type:
    """The Hydra node for a registered object: a dataclass as is, a component's ``Config``
    plus ``_target_``, or (encoders) a schema derived from the constructor signature."""
    if dataclasses.is_dataclass(obj):
        return obj
    if hasattr(obj, "Config"):
        return schema_node(obj)
    return signature_schema(obj)


def register_schemas(schemas: Mapping[str, Mapping[str, type]]) -> None:
    """Store a family's schemas in Hydra's ConfigStore: ``{group: {name: class or dataclass}}``.

    A family (built in or your own) calls this with its ``SCHEMAS`` before Hydra composes;
    config files then start from them (``defaults: - /schema/arena/<name>@_here_``).
    Storing the same schema again replaces it, so calling twice is harmless.
    """
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)  # the engine's own, run-level schemas
    cs.store(group="schema/data", name="data", node=DataConfig)
    for group, nodes in schemas.items():
        for name, obj in nodes.items():
            cs.store(group=group, name=name, node=schema_of(obj))
