"""Structured configs: dataclass schemas in Hydra's ConfigStore.

Each config file in ``conf/`` starts from one of these schemas (``defaults: -
/schema/<group>/<name>@_here_``), so a mistyped key or a wrong type fails when Hydra
composes the config, with Hydra's message naming the full key
(``Key 'lrr' not in 'AgentConfig'  full_key: agents.classifier.lrr``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# ----------------------------------------------------------------------------- encoders


@dataclass
class ImageMLPEncoderConfig:
    """encoders.ImageMLPEncoder: the seed's MLP."""

    _target_: str = "encoders.ImageMLPEncoder"
    input_size: int = 784  #: flat input size (C*H*W)
    hidden_size: int = 784  #: width of hidden_layer_1 and hidden_layer_2
    num_classes: int = 10  #: size of the prediction layer


@dataclass
class ImageCNNEncoderConfig:
    """encoders.ImageCNNEncoder: conv blocks -> embedding [-> prediction]."""

    _target_: str = "encoders.ImageCNNEncoder"
    in_channels: int = 1  #: input planes
    image_size: Any = 8  #: side, or [H, W]
    channels: list[int] = field(default_factory=lambda: [32, 64])  #: one block per entry
    embedding_dim: int = 128  #: size of the embedding output
    num_classes: Optional[int] = 10  #: None: embedding only  # noqa: UP045
    arch: str = "lenet"  #: lenet | resnet
    min_spatial: int = 4  #: blocks stop halving the image below this size


# ----------------------------------------------------------------------------- agents


@dataclass
class AgentConfig:
    """Settings every agent takes (agents.Agent)."""

    _target_: str = MISSING  #: the agent class, e.g. agents.Classifier
    device: str = "cpu"  #: cpu | gpu | gpu:N
    seed: Optional[int] = 0  #: seeds the agent's initial weights  # noqa: UP045
    lr: float = 1e-3  #: learning rate
    optimizer: Any = field(
        default_factory=lambda: {"_target_": "paddle.optimizer.Adam", "_partial_": True}
    )  #: a _partial_ paddle.optimizer config
    lr_scheduler: Any = None  #: optional _partial_ paddle.optimizer.lr config
    grad_clip: Optional[float] = None  #: global-norm gradient clipping  # noqa: UP045


@dataclass
class ClassifierConfig(AgentConfig):
    """agents.Classifier: an encoder with class logits."""

    _target_: str = "agents.Classifier"
    encoder: Any = MISSING  #: an encoder config (conf/encoder/*)
    label_smoothing: float = 0.0  #: cross-entropy label smoothing


# ----------------------------------------------------------------------------- arenas, data


@dataclass
class ClassifyArenaConfig:
    """arenas.ClassifyArena: supervised classification."""

    _target_: str = "arenas.ClassifyArena"
    epochs: int = 20  #: passes over the training split
    batch_size: int = 64  #: training minibatch
    eval_batch_size: int = 1024  #: evaluation minibatch


@dataclass
class DataConfig:
    """A dataset: its loader and the shape facts encoder configs interpolate."""

    loader: Any = MISSING  #: {_target_: craftdata.load_digits, ...}
    channels: int = 1  #: image planes
    image_size: int = 8  #: image side
    flat_size: int = 64  #: channels * image_size**2
    num_classes: int = 10  #: label count


@dataclass
class TrainerConfig:
    """The engine's callbacks (arenas.callbacks)."""

    eval_every: int = 0  #: evaluate every N steps; 0 = at each epoch end
    log_every: int = 10  #: metrics.jsonl / VisualDL every N steps
    checkpoint_every: int = 0  #: checkpoint every N steps; 0 = only when the run stops
    keep_checkpoints: int = 3  #: how many checkpoints to keep
    early_stopping_patience: int = 0  #: stop after N evaluations without improvement; 0 = off
    progress: bool = True  #: progress bar with ETA
    visualdl: bool = False  #: log to VisualDL (pip install visualdl)
    nan_guard: bool = True  #: stop on NaN/inf metrics, keep the last good checkpoint
    max_steps: Optional[int] = None  #: stop after N steps (smoke runs)  # noqa: UP045


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


SCHEMAS: dict[str, dict[str, type]] = {
    "schema/encoder": {"mlp": ImageMLPEncoderConfig, "cnn": ImageCNNEncoderConfig},
    "schema/agent": {"agent": AgentConfig, "classifier": ClassifierConfig},
    "schema/arena": {"classify": ClassifyArenaConfig},
    "schema/data": {"data": DataConfig},
}


#: modules holding a ``SCHEMAS`` dict like the one above (one per arena family)
SCHEMA_MODULES: tuple[str, ...] = (
    "arenas.schema",
    "arenas.gan",
    "arenas.selfplay",
    "arenas.caption",
)


def register_configs() -> None:
    """Put the schemas in Hydra's ConfigStore (idempotent; run.py and tests call it)."""
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
    for module in SCHEMA_MODULES:
        for group, nodes in importlib.import_module(module).SCHEMAS.items():
            for name, node in nodes.items():
                cs.store(group=group, name=name, node=node)
