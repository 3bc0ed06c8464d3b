"""One declaration per setting: a dataclass is a component's signature, schema and record.

An agent or arena declares its settings once, as a dataclass whose fields carry ``#:``
doc comments:

    @dataclass
    class ClassifierConfig(AgentConfig):
        encoder: Any = MISSING  #: an encoder config (conf/encoder/*)
        label_smoothing: float = 0.0  #: cross-entropy label smoothing

    class Classifier(Agent):
        Config = ClassifierConfig

That dataclass is

- the constructor's signature: ``Classifier("clf", encoder=..., lr=3e-4)`` checks the keywords
  with `make_settings` (an unknown or mistyped key fails naming the known ones);
- the Hydra schema: `schema_node` adds ``_target_`` and the family stores it in Hydra's
  ConfigStore, so ``python run.py agents.classifier.lrr=1`` fails at compose time;
- the saved record: ``agent.json`` holds ``asdict(agent.cfg)``, from which
  `paddlecraft.agents.Agent.load` rebuilds the agent.

Encoders keep plain constructor signatures; `signature_schema` derives their schema.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar, Union  # noqa: UP035 (OmegaConf needs typing forms)

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from paddlecraft.compat import renamed_settings
from paddlecraft.errors import ConfigError

T = TypeVar("T")


def _plain(value: Any) -> Any:
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def make_settings(config_cls: type[T], given: Mapping[str, Any], who: str) -> T:
    """Build ``config_cls`` from keyword settings, type-checked; clear errors name ``who.key``.

    Values are converted the way Hydra would (``"3"`` for an ``int`` field becomes 3); a
    required field (``MISSING``) left unset, an unknown key or a wrong type raises
    `ConfigError` naming the setting and the fix.
    """
    fields = {f.name: f for f in dataclasses.fields(config_cls)}  # type: ignore[arg-type]
    unknown = sorted(k for k in given if k not in fields)
    moved = [k for k in unknown if k in renamed_settings(config_cls)]
    if moved:
        new = renamed_settings(config_cls)[moved[0]]
        raise ConfigError(
            f"{who}.{moved[0]} is now {who}.{new} (settings were grouped; "
            f"see the field docs in {config_cls.__module__})"
        )
    if unknown:
        raise ConfigError(
            f"{who}: unknown setting(s) {unknown}; {config_cls.__name__} takes "
            f"{sorted(fields)}. Fix the key name (see the field docs in {config_cls.__module__})."
        )
    values = {k: _plain(v) for k, v in given.items()}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(config_cls), values)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "?"
        first = str(e).splitlines()[0]
        raise ConfigError(f"{who}.{key}: {first}. Give a value of the declared type.") from e
    missing = [k for k in fields if OmegaConf.is_missing(merged, k)]
    if missing:
        raise ConfigError(
            f"{who}: required setting(s) {missing} not given; set them, "
            f"e.g. {who}.{missing[0]}=<value>"
        )
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def settings_record(cfg: Any) -> dict[str, Any]:
    """The JSON-able record of a settings dataclass (what ``agent.json`` stores)."""
    return dataclasses.asdict(cfg)


def target_of(cls: type) -> str:
    """The import path Hydra's ``_target_`` uses for ``cls``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def schema_node(cls: type) -> type:
    """The Hydra schema of a component: its ``Config`` dataclass plus ``_target_``."""
    config = cls.Config
    return dataclasses.make_dataclass(
        f"{cls.__name__}Schema",
        [("_target_", str, dataclasses.field(default=target_of(cls)))],
        bases=(config,),
    )


_SCHEMA_TYPES = (int, float, bool, str)
#: encoder keywords an agent fills in from its data (paddlecraft.encoders.base.INPUT_KEYS)
#: and its role (num_classes; a decoder's cond_dim): unset (None, any type) in an encoder's schema
FILLED_BY_AGENT = (
    "in_channels",
    "image_size",
    "input_size",
    "vocab_size",
    "num_classes",
    "cond_dim",
)


def _schema_type(annotation: Any) -> Any:
    """An OmegaConf-compatible form of a signature annotation (``Any`` when in doubt)."""
    if annotation in _SCHEMA_TYPES:
        return annotation
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (Union, getattr(__import__("types"), "UnionType", Union)) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and rest[0] in _SCHEMA_TYPES:
            return Optional[rest[0]]  # noqa: UP045
    return Any


def signature_schema(cls: type, skip: tuple[str, ...] = ("self", "scope")) -> type:
    """A Hydra schema dataclass from a class's constructor signature (encoders use this).

    Parameters without a default become required (``MISSING``); annotations OmegaConf
    cannot check become ``Any``; the sizes an agent fills in (`FILLED_BY_AGENT`)
    default to None (unset), so a config names the architecture only.
    """
    sig = inspect.signature(cls.__init__)
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable forward references: check nothing rather than fail
        hints = {}
    fields: list[tuple[str, Any, Any]] = [
        ("_target_", str, dataclasses.field(default=target_of(cls)))
    ]
    for name, p in sig.parameters.items():
        if name in skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name in FILLED_BY_AGENT:
            fields.append((name, Any, dataclasses.field(default=None)))
            continue
        default = MISSING if p.default is inspect.Parameter.empty else p.default
        typ = _schema_type(hints.get(name, Any))
        if isinstance(default, (list, dict, tuple)):
            value = list(default) if isinstance(default, tuple) else default
            fields.append((name, Any, dataclasses.field(default_factory=lambda v=value: v)))
        else:
            if default is not MISSING and default is not None and typ is not Any:
                if not isinstance(default, typing.get_args(typ) or (typ,)):
                    typ = Any
            fields.append((name, typ, dataclasses.field(default=default)))
    return dataclasses.make_dataclass(f"{cls.__name__}Schema", fields)


DEFAULT_OPTIMIZER = {"_target_": "paddle.optimizer.Adam", "_partial_": True}


@dataclass
class AgentConfig:
    """Settings every agent takes (each agent's ``Config`` extends this)."""

    device: str = "cpu"  #: cpu | gpu | gpu:N
    seed: Optional[int] = 0  #: seeds the agent's initial weights; None: the global stream  # noqa: UP045
    lr: float = 1e-3  #: learning rate given to the optimizer (or its scheduler)
    optimizer: Any = field(default_factory=lambda: dict(DEFAULT_OPTIMIZER))
    #: ^ a _partial_ paddle.optimizer config
    lr_scheduler: Any = (
        None  #: optional _partial_ paddle.optimizer.lr config: gets learning_rate=lr, or
        #: max_learning_rate=lr where it takes that (OneCycleLR: lr is the cycle's peak)
    )
    grad_clip: Optional[float] = None  #: clip gradients to this global norm  # noqa: UP045
    freeze: list[str] = field(default_factory=list)
    #: ^ logical layers of the agent's encoders to freeze at start, e.g. [stem, layer1]
    amp: str = "off"  #: mixed precision: off | bf16 | fp16 (GPU; refused on CPU)
    amp_level: str = "O1"  #: Paddle AMP level: O1 (per-op lists) | O2 (half-precision weights)
