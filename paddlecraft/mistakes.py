"""The command line's side of "every mistake, one line": Hydra's errors and Hydra's files.

Hydra reports its own mistakes (a misspelled arena, group option or key, a value of the
wrong type) in several lines and exits 1. `run_hydra` runs Hydra with
``HYDRA_FULL_ERROR=1`` so those exceptions reach us, and `hydra_error_line` turns
each into the toolkit's one ``error:`` line (exit code 2), naming the closest valid
names. The folders Hydra made for a refused command are taken back
(`paddlecraft.run_folders`).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from typing import Any

import yaml
from hydra.errors import (
    ConfigCompositionException,
    MissingConfigException,
    OverrideParseException,
)
from omegaconf import DictConfig
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from paddlecraft.errors import command
from paddlecraft.run_folders import folders_noted, take_back


def run_hydra(task: Callable[[], Any], args: Sequence[str]) -> int:
    """Run ``task`` (the ``@hydra.main`` function); a user mistake is one line, exit 2, and
    the folders Hydra made for the refused command are taken back."""
    from paddlecraft.arenas.engine.app import USAGE

    old = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let Hydra's exceptions reach us
    try:
        with folders_noted():
            code = _run_hydra(task, args)
            if code == USAGE:
                take_back()
            return code
    finally:
        if old is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = old


def _run_hydra(task: Callable[[], Any], args: Sequence[str]) -> int:
    """``task()``: 0, or 2 once a mistake's one line is printed; anything else propagates."""
    from paddlecraft.arenas.engine.app import USAGE, USER_ERRORS, user_error

    try:
        task()
    except SystemExit as e:
        if e.code == USAGE:  # refused by the run itself, its line printed
            return USAGE
        raise
    except yaml.MarkedYAMLError as e:
        line = yaml_error_line(e)
    except (OmegaConfBaseException, ConfigCompositionException, OverrideParseException) as e:
        line = hydra_error_line(e, args)
        if line is None:
            raise
    except (*USER_ERRORS, OSError) as e:
        cause = user_error(e)
        if cause is None and isinstance(e, OSError) and e.filename and not _in_run(e):
            cause = e  # Hydra could not create the run folder (the run's own are bugs)
        if cause is None:
            raise
        line = one_line(cause)
    else:
        return 0
    sys.stderr.write(f"error: {line}\n")
    return USAGE


def yaml_error_line(e: yaml.MarkedYAMLError) -> str:
    """``<file>:<line>:<column>: ...`` for a config file that is not valid YAML."""
    mark = e.problem_mark or e.context_mark
    where = f"{mark.name}:{mark.line + 1}:{mark.column + 1}" if mark else "a config file"
    what = " ".join(str(x) for x in (e.context, e.problem) if x)
    return (
        f"{where}: not valid YAML ({what}); fix the file at that line and column "
        "(indentation, a missing ':' or an unclosed bracket or quote)"
    )


def _in_run(e: BaseException) -> bool:
    """Whether ``e`` was raised inside the run (past Hydra's own setup)."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "main_entry":
            return True
        tb = tb.tb_next
    return False


def one_line(e: BaseException) -> str:
    """An exception's message as one line."""
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}; check the path and its permissions"
    return " ".join(str(e).split())


def _close(word: str, options: Iterable[str], n: int = 3, cutoff: float = 0.5) -> list[str]:
    return difflib.get_close_matches(word, list(options), n=n, cutoff=cutoff)


def _group_options(group: str) -> list[str]:
    folder = resources.files("paddlecraft.conf") / group
    if not folder.is_dir():
        return []
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _override_for(key: str, args: Sequence[str]) -> str | None:
    """The command-line override that sets ``key`` or a setting under it."""
    for a in args:
        k = a.split("=", 1)[0].lstrip("+~")
        if k == key or k.startswith(key + "."):
            return a
    return None


def hydra_error_line(e: BaseException, args: Sequence[str]) -> str | None:
    """One line for a Hydra compose error, naming the closest valid names; None if unknown."""
    if isinstance(e, MissingConfigException) and e.missing_cfg_file:
        group, _, name = str(e.missing_cfg_file).rpartition("/")
        options = list(e.options or []) or _group_options(group)
        near = _close(name, options)
        hint = f"did you mean {group}={near[0]}? " if near else ""
        given = next((a for a in args if a.split("=", 1)[-1] == name), f"{group}={name}")
        return f"{given}: no {group} named {name!r}; {hint}options: {', '.join(options)}"
    if isinstance(e, OverrideParseException):
        first = str(e).splitlines()[0]
        return (
            f"cannot parse the command line ({first}); write key=value, quoting values "
            "with spaces or brackets, e.g. 'arena.epochs=3'"
        )
    cause = e.__cause__ if isinstance(e, ConfigCompositionException) else e
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        key = str(cause.full_key)
        given = _override_for(key, args) or key
        first = str(cause).splitlines()[0]
        if isinstance(cause, ValidationError):
            return f"{given}: {first}; give a value of the declared type"
        if isinstance(cause, (ConfigKeyError, AttributeError, KeyError)):
            bad = given.split("=", 1)[0].lstrip("+~")
            merged = _merged_dict_line(bad, args)
            if merged:
                return merged
            moved = _renamed_line(given, key, getattr(cause, "object_type", None), args)
            if moved:
                return moved
            near = _similar_keys(bad, args)
            hint = f"did you mean {' or '.join(near)}?" if near else "see --cfg job for the keys"
            return f"{given}: no setting {bad!r} in this config; {hint}"
        return f"{given}: {first}"
    if isinstance(e, ConfigCompositionException):
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        if not lines:
            return None
        msg = lines[0]
        if msg.startswith("Could not delete from config.") and msg.count("'") >= 2:
            key = msg.split("'")[1]  # a ~key that does not exist: perhaps it was renamed
            moved = _renamed_line(_override_for(key, args) or f"~{key}", key, None, args)
            if moved:
                return moved
        if msg.startswith("Could not override '") and "No match in the defaults list" in msg:
            group = msg.split("'")[1]
            given = _override_for(group, args) or group
            name = given.split("=", 1)[-1]
            near = _close(name, _group_options(group))
            extra = f" (its options: {', '.join(_group_options(group))})" if near else ""
            return (
                f"{given}: this arena's config has no {group!r} to choose; an arena that "
                f"uses it takes it (e.g. arena=selfplay game=...){extra}"
            )
        if msg.startswith("Ambiguous value for argument '"):  # a, b without -m
            given = msg.split("'")[1]
            return (
                f"{given}: several values make a sweep: add -m ({command()} -m {given}); "
                f"for one list value write {given.split('=', 1)[0]}=[{given.split('=', 1)[1]}]"
            )
        merging = "Error merging override "
        if msg.startswith(merging) and isinstance(e.__cause__, ValidationError):
            # a value inside a list (``key=[8,60]`` where pairs are due) leaves the cause
            # without the override's key: name the override and say why
            why = str(e.__cause__).splitlines()[0]
            return f"{msg[len(merging) :]}: {why}; give a value of the declared type"
        if msg.endswith(":") and len(lines) > 1:  # "... raised while composing config:" + why
            msg = f"{msg} {lines[1]}"
        did_you_mean = next((x for x in lines[1:] if x.startswith("Did you mean")), "")
        return f"{msg} {did_you_mean}".strip()
    return None


def check_group_choices(overrides: Sequence[str]) -> None:
    """Refuse an override that picks an option no config group holds (``debug=smok``).

    Hydra refuses such a choice for a group the config needs, but skips it without a word
    for an ``optional`` entry of the defaults list (``debug``, a user's own); this check
    covers every group the same way, naming the closest options. Call it inside Hydra's
    run (``GlobalHydra`` initialised), before any work.
    """
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    loader = GlobalHydra.instance().config_loader()
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        if o.is_delete() or o.is_sweep_override():
            continue
        group = o.key_or_group.split("@", 1)[0]
        value = o.value()
        if "." in group or not isinstance(value, str) or group == "hydra":
            continue
        options = loader.get_group_options(group)
        if not options or value in options:
            continue
        near = _close(value, options)
        hint = f"did you mean {o.get_key_element()}={near[0]}? " if near else ""
        from paddlecraft.errors import ConfigError

        raise ConfigError(
            f"{o.input_line}: no {group} named {value!r}; {hint}options: {', '.join(options)}"
        )


def _merged_dict_line(bad: str, args: Sequence[str]) -> str | None:
    """The line for a ``key={...}`` override whose new keys are refused: Hydra merges a
    dict value into the dict already at ``key`` (its keys stay, new ones are refused);
    None unless ``bad``'s parent was given such a value."""
    parent, _, leaf = bad.rpartition(".")
    given = next(
        (a for a in args if a.split("=", 1)[0].lstrip("+") == parent
         and a.split("=", 1)[-1].lstrip().startswith("{")),
        None,
    )  # fmt: skip
    if given is None:
        return None
    sweep = f"a sweep (-m) keeps only the last value of each key, so there set the new {parent} in a config file of your own (--config-dir)"
    if f"{parent}=null" in args:  # right in one run; a sweep dropped the null
        return (
            f"{given}: {leaf!r} is not a setting of the {parent} this value is merged into; {sweep}"
        )
    return (
        f"{given}: {leaf!r} is not a setting of the {parent} already there, which a dict "
        f"value is merged into, not replacing it; to replace it, set it to null first: "
        f"'{parent}=null' '{given}' (in one run; {sweep})"
    )


def _renamed_line(given: str, key: str, schema: type | None, args: Sequence[str]) -> str | None:
    """``<given>: arena.collect_workers is now arena.workers.count; write ...`` when ``key``
    (dotted, as the error names it) or a parent of it is a setting its schema renamed (the
    ``Config`` dataclass's ``RENAMED``, e.g. self-play's flat keys of 0.2); else None.

    ``schema`` is the type of ``key``'s parent node when the error carries it; otherwise
    the config is composed without the override and each parent's type is looked up.
    """
    from omegaconf import OmegaConf

    from paddlecraft.compat import renamed_settings

    parts = key.split(".")
    found: tuple[str, str, str] | None = None  # (parent path, old key, new dotted key)
    if schema is not None and len(parts) > 1 and parts[-1] in renamed_settings(schema):
        found = (".".join(parts[:-1]), parts[-1], renamed_settings(schema)[parts[-1]])
    else:
        cfg = _compose_without(given.split("=", 1)[0].lstrip("+~"), args)
        node: Any = cfg
        for i in range(len(parts) - 1):
            node = node.get(parts[i]) if isinstance(node, DictConfig) else None
            if not isinstance(node, DictConfig):
                break
            renamed = renamed_settings(OmegaConf.get_type(node) or dict)
            if parts[i + 1] in renamed:
                found = (".".join(parts[: i + 1]), parts[i + 1], renamed[parts[i + 1]])
                break
    if found is None:
        return None
    parent, old, new = found
    old_key, new_key = f"{parent}.{old}", f"{parent}.{new}"
    typed = given.split("=", 1)[0]
    fixed = given.replace(old_key, new_key, 1) if old_key in typed else None
    write = f"; write {fixed}" if fixed else ""
    return f"{given}: {old_key} is now {new_key} (settings were grouped){write}"


def _similar_keys(bad: str, args: Sequence[str]) -> list[str]:
    """Valid dotted keys close to ``bad``: the config composed without the bad override."""
    cfg = _compose_without(bad, args)
    if cfg is None:
        return []
    keys = list(_dotted_keys(cfg))
    leaf = bad.rsplit(".", 1)[-1]
    same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf]
    depth = bad.count(".")
    near = _close(bad, [k for k in keys if k.count(".") == depth], cutoff=0.75)
    if near:  # only the keys about as close as the closest one (a typo has one fix)
        best = difflib.SequenceMatcher(None, bad, near[0]).ratio()
        near = [k for k in near if difflib.SequenceMatcher(None, bad, k).ratio() >= best - 0.02]
    return list(dict.fromkeys(near + same_leaf))[:3]


def _compose_without(bad: str, args: Sequence[str]) -> DictConfig | None:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    rest = [
        a
        for a in args
        if "=" in a and not a.startswith("-") and a.split("=", 1)[0].lstrip("+~") != bad
    ]
    try:
        GlobalHydra.instance().clear()
        with initialize_config_module("paddlecraft.conf", version_base="1.3"):
            return compose("config", overrides=rest)
    except Exception:  # noqa: BLE001 (suggestions are best effort)
        return None


def _dotted_keys(node: Any, prefix: str = "", depth: int = 0) -> Iterable[str]:
    if not isinstance(node, DictConfig) or depth > 5:
        return
    for k in node.keys():
        if not prefix and k == "hydra":
            continue
        path = f"{prefix}{k}"
        yield path
        child = node._get_node(k)  # the node, unresolved (no resolver runs)
        yield from _dotted_keys(child, path + ".", depth + 1)
