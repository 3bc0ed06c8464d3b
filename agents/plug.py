"""The agent's side of the encoder feature contract: sizes filled in from what the agent
knows (its data, game or chain), contradictions refused, the contract checked.

`make_encoder` calls these; an agent of your own passes its
input sizes with `image_inputs` (images, board planes) or plain keywords
(``vocab_size``...). See docs/write-encoder.md for the contract itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from hydra.utils import get_object

from .instantiate import upgrade_target
from .settings import ConfigError


def constructor_params(target: Any) -> set[str]:
    """Keyword names the ``_target_``'s constructor takes (empty when it cannot be read)."""
    if not isinstance(target, str):
        return set()
    try:
        obj = get_object(upgrade_target(target))
        init = obj.__init__ if isinstance(obj, type) else obj
        return set(inspect.signature(init).parameters)
    except (ImportError, AttributeError, ValueError, TypeError):
        return set()


def image_inputs(shape: Any, channels_last: bool = False) -> dict[str, Any]:
    """Encoder input sizes of images (or board planes) of one ``shape``; {} for None.

    ``shape`` is [C, H, W] ([H, W, C] with ``channels_last``, as board planes are): gives
    ``in_channels``, ``image_size`` (an int when square, else [H, W]) and ``input_size``
    (the flat length), the keywords `Agent.make_encoder` fills in.
    """
    if shape is None:
        return {}
    dims = [int(d) for d in shape]
    if len(dims) != 3:
        raise ConfigError(f"an image shape is [channels, height, width], got {dims}")
    c, h, w = (dims[2], dims[0], dims[1]) if channels_last else dims
    return {"in_channels": c, "image_size": h if h == w else [h, w], "input_size": c * h * w}


def _as_size(value: Any) -> Any:
    """Sizes compared by value: ``8`` and ``[8, 8]`` are one image side, lists are tuples."""
    if isinstance(value, (list, tuple)):
        t = tuple(value)
        return t[0] if len(t) == 2 and t[0] == t[1] else t
    return value


def sized_config(
    cfg: dict[str, Any],
    setting: str,
    inputs: Mapping[str, Any] | None = None,
    forced: Mapping[str, Any] | None = None,
    headless: bool = False,
) -> dict[str, Any]:
    """``cfg`` with every size in ``inputs`` its constructor takes filled in where unset.

    A value the config gives that contradicts ``inputs`` raises `ConfigError` naming
    ``<setting>.<key>``; ``forced`` keywords are set whatever the config says; ``headless``
    sets ``num_classes=None``. Keywords the constructor does not take are left out.
    """
    cfg = dict(cfg)
    params = constructor_params(cfg.get("_target_"))
    for key, value in (inputs or {}).items():
        if key not in params or value is None:
            continue
        given = cfg.get(key)
        if given is None or given == "???":
            cfg[key] = value
        elif _as_size(given) != _as_size(value):
            raise ConfigError(
                f"{setting}.{key}={given!r} but this agent's input gives {value!r}; leave "
                f"{key} out of the encoder config (it is filled in from the data)"
            )
    for key, value in {**(forced or {}), **({"num_classes": None} if headless else {})}.items():
        if key in params:
            cfg[key] = value
    return cfg


def check_contract(enc: Any, setting: str) -> None:
    """Raise `ConfigError` unless ``enc`` gives ``pooled`` [B, feature_dim] and an int
    ``feature_dim`` (what agents read of any encoder)."""
    if "pooled" not in getattr(enc, "output_names", ()) or not isinstance(
        getattr(enc, "feature_dim", None), int
    ):
        raise ConfigError(
            f"{setting}: {type(enc).__name__} does not follow the encoder contract (a "
            "'pooled' output [B, feature_dim] and an int feature_dim); see "
            "docs/write-encoder.md"
        )
