"""Which PettingZoo Parallel environment a run builds, and the groups of its agents.

``arena.env.name`` is one of the mpe2 tasks by its versioned name (`MPE_TASKS`:
``simple_spread_v3`` ...), or a module path whose ``parallel_env(**kwargs)`` (or AEC
``env(**kwargs)``, converted with PettingZoo's ``aec_to_parallel``) makes the environment
(``pettingzoo.butterfly.pistonball_v6``). A user's own environment class is named
explicitly in ``arena.env.cls`` (``mypkg.envs:MyEnv``): it is imported with importlib and
must be a ``pettingzoo.ParallelEnv`` (or ``AECEnv``) subclass; configs build nothing else.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from paddlecraft.agents.settings import ConfigError

#: the mpe2 tasks the env group names (conf/env/*): versioned name -> module
MPE_TASKS: dict[str, str] = {
    "simple_v3": "mpe2.simple_v3",
    "simple_adversary_v3": "mpe2.simple_adversary_v3",
    "simple_crypto_v3": "mpe2.simple_crypto_v3",
    "simple_push_v3": "mpe2.simple_push_v3",
    "simple_reference_v3": "mpe2.simple_reference_v3",
    "simple_speaker_listener_v4": "mpe2.simple_speaker_listener_v4",
    "simple_spread_v3": "mpe2.simple_spread_v3",
    "simple_tag_v3": "mpe2.simple_tag_v3",
    "simple_world_comm_v3": "mpe2.simple_world_comm_v3",
}
#: the extra each optional package comes with
EXTRAS: dict[str, str] = {"mpe2": "mpe", "pettingzoo": "pettingzoo", "pygame": "mpe"}


def _missing_extra(module: str, err: ImportError) -> ConfigError:
    top = (err.name or module).split(".")[0]
    extra = EXTRAS.get(top, EXTRAS.get(module.split(".")[0], "mpe"))
    return ConfigError(
        f"arena.env: {module!r} needs the package {top!r}, which is not installed: "
        f"pip install 'paddlecraft[{extra}]'"
    )


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if e.name and module.startswith(e.name) and e.name.split(".")[0] not in EXTRAS:
            raise ConfigError(f"arena.env.name={module!r}: no such module ({e})") from None
        raise _missing_extra(module, e) from None


def _to_parallel(env: Any, what: str) -> Any:
    """``env`` as a ParallelEnv: an AEC env goes through ``aec_to_parallel``."""
    from pettingzoo import AECEnv, ParallelEnv
    from pettingzoo.utils.conversions import aec_to_parallel

    if isinstance(env, ParallelEnv):
        return env
    if isinstance(env, AECEnv):
        return aec_to_parallel(env)
    raise ConfigError(f"{what} made a {type(env).__name__}, not a PettingZoo ParallelEnv or AECEnv")


def resolve_class(path: str) -> type:
    """``pkg.module:Class`` -> the class, checked to be a PettingZoo ParallelEnv or AECEnv."""
    if not isinstance(path, str) or ":" not in path:
        raise ConfigError(
            f"arena.env.cls={path!r}: give 'package.module:ClassName' (a ParallelEnv subclass)"
        )
    module, _, name = path.partition(":")
    mod = _import(module)
    klass = getattr(mod, name, None)
    try:
        from pettingzoo import AECEnv, ParallelEnv
    except ImportError as e:
        raise _missing_extra("pettingzoo", e) from None
    if not (isinstance(klass, type) and issubclass(klass, (ParallelEnv, AECEnv))):
        raise ConfigError(
            f"arena.env.cls={path!r}: {name!r} in {module} is not a pettingzoo.ParallelEnv "
            "(or AECEnv) subclass"
        )
    return klass


def make_env(name: str | None, kwargs: Mapping[str, Any] | None = None, cls: str | None = None,
             render_mode: str | None = None) -> Any:  # fmt: skip
    """A ParallelEnv from ``arena.env``'s ``name`` / ``cls`` and ``kwargs``.

    Unknown names fail with the closest task names; a missing extra with one line naming it.
    """
    kw = dict(kwargs or {})
    if render_mode is not None:
        kw["render_mode"] = render_mode
    if cls:
        return _to_parallel(resolve_class(cls)(**kw), f"arena.env.cls={cls!r}")
    if not name:
        raise ConfigError("arena.env.name is not set: choose a task, e.g. env=simple_spread")
    if name in MPE_TASKS:
        module = MPE_TASKS[name]
    elif "." in name:
        module = name
    else:
        close = difflib.get_close_matches(name, list(MPE_TASKS), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ConfigError(
            f"arena.env.name={name!r}: unknown environment{hint} Known tasks: "
            f"{', '.join(sorted(MPE_TASKS))}; or give a module path (pkg.module with "
            "parallel_env()) or arena.env.cls=pkg.module:Class"
        )
    mod = _import(module)
    make = getattr(mod, "parallel_env", None) or getattr(mod, "env", None)
    if make is None:
        raise ConfigError(f"arena.env.name={name!r}: {module} has no parallel_env() or env()")
    try:
        env = make(**kw)
    except TypeError as e:
        raise ConfigError(f"arena.env.kwargs: {name} does not take them ({e})") from None
    return _to_parallel(env, f"arena.env.name={name!r}")


def default_groups(agents: Sequence[str]) -> dict[str, list[str]]:
    """BenchMARL's default grouping: agents named ``<group>_<index>`` form ``<group>``
    (``adversary_0, adversary_1, agent_0`` -> adversary, agent); others are their own group."""
    groups: dict[str, list[str]] = {}
    for a in agents:
        m = re.fullmatch(r"(.+?)_\d+", a)
        groups.setdefault(m.group(1) if m else a, []).append(a)
    return groups


def check_groups(groups: Mapping[str, Sequence[str]], env: Any) -> dict[str, list[str]]:
    """``arena.groups`` checked against the environment: every agent in exactly one group,
    every group naming agents that exist and share one observation and action space."""
    agents = list(env.possible_agents)
    out: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for g, members in groups.items():
        members = [str(m) for m in members]
        if not members:
            raise ConfigError(f"arena.groups.{g} names no agent; the environment has {agents}")
        for m in members:
            if m not in agents:
                close = difflib.get_close_matches(m, agents, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(
                    f"arena.groups.{g}: no agent {m!r} in the environment{hint}; it has {agents}"
                )
            if m in seen:
                raise ConfigError(f"arena.groups: {m!r} is in both {seen[m]} and {g}")
            seen[m] = g
        spaces = {(repr(env.observation_space(m)), repr(env.action_space(m))) for m in members}
        if len(spaces) > 1:
            raise ConfigError(
                f"arena.groups.{g}: {members} have different observation or action spaces; a "
                "group shares one policy, so split them into groups of equal spaces"
            )
        out[str(g)] = members
    left = [a for a in agents if a not in seen]
    if left:
        raise ConfigError(f"arena.groups: agents {left} are in no group; add them to one")
    return out
