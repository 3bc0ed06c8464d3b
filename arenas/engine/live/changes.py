"""``set`` on a live run: exactly the settings ``resume=`` may change, applied at a boundary.

The keys are those of `MAY_CHANGE`, refused with resume's own one-line
reason otherwise. Applying one is what a stop and a ``resume=<run> key=value`` would do,
without the restart: a checkpoint of the step is saved first, an agent's optimizer is
rebuilt from its new settings and its state loaded back (the resume path), and the change
is written to ``config.yaml`` and ``resume_changes.jsonl``, so a later resume from that
checkpoint keeps it. A run whose learning rate was set at step k therefore ends
bit-identical to one stopped at k and resumed with that learning rate.

A few resumable settings only take effect when a run starts (loggers, data workers,
``trainer.live`` itself); ``set`` refuses those with a line that says to stop and resume.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from paddlecraft.agents.settings import ConfigError, make_settings, settings_record
from paddlecraft.encoders.tensorio import atomic_write_bytes

from ..resume import CHANGES_FILE, cannot_change, may_change
from ..validate import check_value

if TYPE_CHECKING:
    from ..loop import Loop

log = logging.getLogger("paddlecraft")

#: trainer settings a live ``set`` applies, by the callback attribute that holds them
TRAINER_LIVE = {
    "eval_every": ("Evaluator", "every"),
    "checkpoint_every": ("Checkpointer", "every"),
    "keep_checkpoints": ("Checkpointer", "keep"),
    "log_every": ("JsonlLogger", "every"),
    "early_stopping_patience": ("EarlyStopping", "patience"),
    "progress_every_s": ("Progress", "every_s"),
}


class SettingError(ConfigError):
    """A refused ``set``: ``key`` is the setting it names (the endpoint's 400 answer
    carries it as ``"setting"``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _resume_only(key: str) -> ConfigError:
    return SettingError(
        key,
        f"set: {key} takes effect only when a run starts; stop the run "
        f"(paddlecraft live <run> stop) and resume it with resume=<run> {key}=<value>",
    )


def _flat(prefix: str, node: Any) -> list[str]:
    """Dotted keys of a plain container, its inner nodes included."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _flat(f"{prefix}.{k}", v)
    return out


def known_settings(loop: Loop) -> list[str]:
    """Every dotted setting of the run's agents, arena and trainer (what ``set`` may name)."""

    def plain(cfg: Any) -> Any:
        return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=False)

    keys: list[str] = []
    for name, agent in loop.arena.agents.items():
        fields = {**dict(getattr(agent, "config", None) or {}), **plain(agent.cfg)}
        keys += [k for f, v in fields.items() for k in _flat(f"agents.{name}.{f}", v)]
    keys += [k for f, v in plain(loop.arena.cfg).items() for k in _flat(f"arena.{f}", v)]
    trainer = _trainer(loop)
    if trainer is not None:
        keys += [k for f, v in plain(trainer).items() for k in _flat(f"trainer.{f}", v)]
    return keys


def _trainer(loop: Loop) -> Any:
    """The run's ``trainer`` settings (a ``TrainerConfig``; the live control holds them)."""
    return getattr(_callback(loop, "LiveControl"), "trainer", None)


def _check_finite(key: str, value: Any) -> None:
    """Refuse NaN and infinities anywhere in a value (JSON has neither; no setting takes one)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SettingError(key, f"set: {key}={value}: must be a finite number")
    if isinstance(value, dict):
        for v in value.values():
            _check_finite(key, v)
    elif isinstance(value, list):
        for v in value:
            _check_finite(key, v)


def current_value(loop: Loop | None, key: str) -> Any:
    """The run's value of dotted ``key`` (None when unknown); reading only."""
    if loop is None:
        return None
    head, _, rest = key.partition(".")
    try:
        if head == "agents":
            name, _, field = rest.partition(".")
            agent = loop.arena.agents.get(name)
            if agent is None:
                return None
            top = field.split(".")[0]
            if not hasattr(agent.cfg, top):  # a constructor setting outside Config
                return agent.config.get(field)
            return OmegaConf.select(OmegaConf.structured(agent.cfg), field, default=None)
        if head == "arena":
            if rest == "epochs":
                return loop.arena.epochs
            return OmegaConf.select(OmegaConf.structured(loop.arena.cfg), rest, default=None)
        if head == "trainer":
            if rest == "max_steps":
                return loop.max_steps
            cls_attr = TRAINER_LIVE.get(rest)
            cb = _callback(loop, cls_attr[0]) if cls_attr else None
            return getattr(cb, cls_attr[1]) if cb is not None and cls_attr else None
    except OmegaConfBaseException:
        return None
    return None


def check_keys(args: dict[str, Any], loop: Loop | None = None) -> None:
    """Refuse (one line, `SettingError` naming the key) a key the run does not have (with
    the closest one), one ``resume=`` may not change, or a value out of the range the
    command line takes (`check_value`: the same rule)."""
    known = known_settings(loop) if loop is not None else None
    for key, new in args.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"set: {key!r} is not a setting name")
        head, _, rest = key.partition(".")
        own = head in ("agents", "arena") or (head == "trainer" and _trainer(loop) is not None)
        name = rest.partition(".")[0]
        if loop is not None and head == "agents" and name not in loop.arena.agents:
            raise SettingError(
                key,
                f"set: {key}: the run has no agent {name!r} (agents: {sorted(loop.arena.agents)})",
            )
        if known is not None and own and key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else " (see its config.yaml)"
            raise SettingError(key, f"set: no setting {key} in this run{hint}")
        if not may_change(key):
            raise SettingError(key, f"set: {cannot_change(key, current_value(loop, key), new)}")
        try:
            check_value(key, new)
        except ConfigError as e:
            raise SettingError(key, f"set: {e}") from None
        _check_finite(key, new)  # inside a group's value (a schedule's fields)


def apply_live_changes(
    loop: Loop,
    args: dict[str, Any],
    write: bool = True,
    checkpoint: Callable[[], Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Apply ``{key: value}`` at this boundary (training thread); ``{key: {from, to}}``.

    All keys are checked before any is applied; a refused one changes nothing. With
    ``write=False`` (data-parallel ranks other than 0) nothing is written to disk.
    """
    check_keys(args, loop)
    plan = [(key, new, current_value(loop, key)) for key, new in args.items()]
    for key, new, _ in plan:
        _check_applicable(loop, key, new)
    changes = {key: {"from": old, "to": new} for key, new, old in plan if old != new}
    if not changes:
        return {}
    if write and checkpoint is not None:  # the step's state, before the change
        checkpoint()
    for key, change in changes.items():
        _apply(loop, key, change["to"])
    if write:
        _persist(loop.run_dir, changes, loop.step)
    return changes


def _callback(loop: Loop, cls_name: str) -> Any:
    return next((cb for cb in loop.callbacks if type(cb).__name__ == cls_name), None)


def _check_applicable(loop: Loop, key: str, new: Any) -> None:
    head, _, rest = key.partition(".")
    if head == "agents":
        name, _, field = rest.partition(".")
        if name not in loop.arena.agents:
            raise ConfigError(
                f"set: {key}: the run has no agent {name!r} (agents: {sorted(loop.arena.agents)})"
            )
        agent = loop.arena.agents[name]
        if agent.amp.enabled:
            raise _resume_only(key)
        _try_schedule(_new_cfg(agent.cfg, field, new, key), name, key)
    elif head == "arena":
        if rest == "epochs":
            if not isinstance(new, int) or isinstance(new, bool) or new < 1:
                raise SettingError(key, f"set: arena.epochs must be an integer >= 1, got {new!r}")
            changed = dataclasses.replace(loop.arena.cfg, epochs=new)
        else:
            changed = _new_cfg(loop.arena.cfg, rest, new, key)
        try:  # the arena's cross-checks, as when it was built
            loop.arena.check_config(changed)
        except ConfigError as e:
            raise SettingError(key, f"set: {key}={new!r}: {e}") from None
    elif head == "trainer":
        if rest == "max_steps":
            if new is not None and (not isinstance(new, int) or isinstance(new, bool)):
                raise SettingError(
                    key, f"set: trainer.max_steps must be an integer >= 1 or null, got {new!r}"
                )
            return
        if rest not in TRAINER_LIVE or _callback(loop, TRAINER_LIVE[rest][0]) is None:
            raise _resume_only(key)
        if isinstance(new, bool):
            raise SettingError(key, f"set: {key} must be a number, got {new!r}")
        trainer = _trainer(loop)
        kind = type(getattr(_callback(loop, TRAINER_LIVE[rest][0]), TRAINER_LIVE[rest][1]))
        try:  # the type the command line checks (an int setting refuses 2.5)
            if trainer is not None:
                make_settings(type(trainer), {rest: new}, "trainer")
            elif kind is int and not (isinstance(new, int) or float(new).is_integer()):
                raise ConfigError(f"{key}={new!r}: must be an integer")
        except ConfigError as e:
            raise SettingError(key, f"set: {e}") from None
    else:
        raise _resume_only(key)


def _try_schedule(cfg: Any, agent: str, key: str) -> None:
    """Build the learning-rate schedule of agent settings ``cfg`` once, unused: a schedule
    its class refuses is refused here, before anything is applied (the agent's optimizer
    is rebuilt from it only then)."""
    from paddlecraft.agents.instantiate import safe_instantiate, to_plain
    from paddlecraft.agents.optim import scheduler_rate_arg

    scheduler = to_plain(cfg.lr_scheduler)
    if not scheduler:
        return
    try:
        make = safe_instantiate(scheduler)
        make(**{scheduler_rate_arg(make, agent): cfg.lr})
    except Exception as e:  # noqa: BLE001 (the schedule's own refusal, whatever its type)
        raise SettingError(key, f"set: {key}: {type(e).__name__}: {e}") from None


def _new_cfg(cfg: Any, field: str, new: Any, key: str) -> Any:
    """A copy of settings dataclass ``cfg`` with dotted ``field`` set, type-checked."""
    node = OmegaConf.structured(cfg)
    try:
        if OmegaConf.select(node, field, default="__absent__") == "__absent__":
            raise SettingError(key, f"set: no setting {key} in this run")
        OmegaConf.update(node, field, new, merge=False)
        return OmegaConf.to_object(node)
    except OmegaConfBaseException as e:
        raise SettingError(key, f"set: {key}: {str(e).splitlines()[0]}") from e


def _apply(loop: Loop, key: str, new: Any) -> None:
    head, _, rest = key.partition(".")
    if head == "agents":
        name, _, field = rest.partition(".")
        agent = loop.arena.agents[name]
        with tempfile.TemporaryDirectory(prefix="paddlecraft-set-") as tmp:
            agent.save(tmp)  # what a checkpoint holds; the resume path loads it back
            agent.cfg = _new_cfg(agent.cfg, field, new, key)
            agent.config.update(settings_record(agent.cfg))
            agent.build_optimizer()
            agent.load_state(tmp)
    elif head == "arena":
        if rest == "epochs":
            loop.arena.epochs = loop.arena.cfg.epochs = int(new)
            return
        loop.arena.cfg = _new_cfg(loop.arena.cfg, rest, new, key)
    elif rest == "max_steps":
        loop.max_steps = new
    else:
        cls_name, attr = TRAINER_LIVE[rest]
        setattr(
            _callback(loop, cls_name), attr, type(getattr(_callback(loop, cls_name), attr))(new)
        )


def _persist(run_dir: Path, changes: dict[str, dict[str, Any]], step: int) -> None:
    """``config.yaml`` takes the new values (a later resume keeps them); the change is
    appended to ``resume_changes.jsonl`` as a resume's would be."""
    path = Path(run_dir) / "config.yaml"
    if path.is_file():
        cfg = OmegaConf.load(path)
        for key, change in changes.items():
            OmegaConf.update(cfg, key, change["to"], merge=False, force_add=True)
        atomic_write_bytes(path, OmegaConf.to_yaml(cfg).encode())
    record = {"step": step, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "changes": changes,
              "by": "live set"}  # fmt: skip
    with (Path(run_dir) / CHANGES_FILE).open("a") as f:
        f.write(json.dumps(record, default=str, allow_nan=False) + "\n")
    for key, c in changes.items():
        log.info("live: %s changed %r -> %r from step %d", key, c["from"], c["to"], step)
