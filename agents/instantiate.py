"""Config safety: ``_target_`` may only name this toolkit's classes, Paddle optimizers/layers,
or what the user allows explicitly. Hydra's ``instantiate`` calls whatever ``_target_`` names
(``os.system`` included), so every config tree is checked before anything is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.nodes import InterpolationResultNode

from paddlecraft.errors import UnsafeConfigError

DEFAULT_ALLOWED: tuple[str, ...] = (
    "paddlecraft.",
    "paddle.optimizer.",
    "paddle.nn.",
)


def iter_targets(cfg: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Yield ``(key path, target)`` for every ``_target_`` in a config tree."""
    if isinstance(cfg, (DictConfig, ListConfig)) and cfg._is_interpolation():
        node = cfg._dereference_node()
        if isinstance(node, InterpolationResultNode):  # a resolver's value: walk it as such
            cfg = node._value()  # (``${craft.from_data:obs_shape}`` is None until filled)
    if isinstance(cfg, (DictConfig, ListConfig)) and (cfg._is_none() or cfg._is_missing()):
        return  # a typed node set to None / ??? holds nothing to build
    if isinstance(cfg, (DictConfig, Mapping)):
        items = cfg.items_ex(resolve=False) if isinstance(cfg, DictConfig) else cfg.items()
        for k, v in items:
            key = f"{path}.{k}" if path else str(k)
            if k == "_target_":
                yield key, str(v)
            else:
                yield from iter_targets(v, key)
    elif isinstance(cfg, (ListConfig, list, tuple)):
        for i, v in enumerate(cfg):
            yield from iter_targets(v, f"{path}[{i}]")


def _allowed(target: str, allow: Iterable[str]) -> bool:
    return any(target == a or (a.endswith(".") and target.startswith(a)) for a in allow)


def check_targets(cfg: Any, allow: Iterable[str] = ()) -> None:
    """Raise `UnsafeConfigError` unless every ``_target_`` is allowed.

    A target must be named exactly in the allow-list, or match an allowed prefix AND
    resolve to an object defined in an allowed module, so ``paddlecraft.encoders.base.os.system`` is
    refused like ``os.system``.
    """
    allow = (*DEFAULT_ALLOWED, *allow)
    for key, target in iter_targets(cfg):
        reason = None
        if target in allow:  # named exactly: the user vouched for this one object
            _find(key, target)
            continue
        if not _allowed(target, allow):
            reason = "it is not in the allow-list"
        else:
            obj = _find(key, target)
            module = getattr(obj, "__module__", None) or ""
            if not callable(obj) or not _allowed(module + ".", allow):
                reason = f"it resolves to {module or '?'}.{getattr(obj, '__name__', obj)!s}"
        if reason:
            raise UnsafeConfigError(
                f"config key {key}: _target_ {target!r} is refused because {reason}. "
                "Configs may only build this toolkit's classes (paddlecraft.*), "
                "paddle.optimizer.* and paddle.nn.*. To allow your own code, "
                f"add it explicitly: allow_targets=[{target!r}] (or a module prefix ending "
                "in '.')."
            )


def _find(key: str, target: str) -> Any:
    """The object ``target`` names; `UnsafeConfigError` naming the fix when it
    cannot be imported (a misspelled name, or a user's package not on the path)."""
    try:
        return get_object(target)
    except Exception as e:  # an ImportError or AttributeError, said plainly
        cause = e.__cause__ if isinstance(e.__cause__, ModuleNotFoundError) else e
        if (
            isinstance(cause, ModuleNotFoundError)
            and cause.name
            and not cause.name.startswith(("paddlecraft", "paddle"))
        ):
            raise UnsafeConfigError(
                f"config key {key}: _target_ {target!r}: no module named {cause.name!r} can be "
                "imported. Make your package importable: keep it next to your config folder "
                "(--config-dir), set PYTHONPATH=<the folder holding it>, or pip install -e "
                "<your project>"
            ) from e
        raise UnsafeConfigError(
            f"config key {key}: _target_ {target!r} cannot be found ({e}). "
            "Check the spelling of the class or function."
        ) from e


def safe_instantiate(cfg: Any, *args: Any, allow: Iterable[str] = (), **kwargs: Any) -> Any:
    """``hydra.utils.instantiate`` after `check_targets` (plain dicts accepted). An
    object that is not a config (a dataset already built, say) is returned as it is, never
    converted into a config."""
    if not isinstance(cfg, (Mapping, DictConfig, ListConfig, list)):
        return cfg
    if isinstance(cfg, Mapping) and not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    check_targets(cfg, allow)
    return instantiate(cfg, *args, **kwargs)


def built(data: Any, allow: Iterable[str] = ()) -> Any:
    """``data`` as an object: a config (a mapping with ``_target_``) is instantiated (allow-list
    checked); anything else (a dataset built in Python, None) is returned as it is."""
    if isinstance(data, (Mapping, DictConfig)) and "_target_" in data:
        return safe_instantiate(data, allow=allow)
    return data


def to_plain(cfg: Any) -> Any:
    """A resolved plain-Python (JSON-able) copy of a config node."""
    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg
