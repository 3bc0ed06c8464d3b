"""Reading what an older PaddleCraft wrote: every rule for old names in one module, with one
rename table (`RENAMED`), all of it removed in PaddleCraft `REMOVED_IN`.

What loads through here: saved agents and run configs whose ``_target_`` names a pre-0.2
top-level package (``encoders.ResNetEncoder``), self-play runs saved with 0.2's flat
settings (``arena.collect_workers``), policies and CTC recognizers saved by 0.1 with
another layer layout, and module attributes that were renamed. The library's classes keep
their hooks (``Agent.upgrade_saved``, ``Arena.upgrade_saved``, a ``Config``'s ``RENAMED``
for a user's own arena); the library's own rules are all here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from paddlecraft.errors import CheckpointError, command

__all__ = [
    "REMOVED",
    "REMOVED_AT",
    "REMOVED_IN",
    "RENAMED",
    "drop_removed",
    "drop_removed_policy",
    "policy_layers_0_1",
    "recognizer_ctc_0_1",
    "renamed_attribute",
    "renamed_settings",
    "settings_as_saved",
    "saved_shapes",
    "upgrade_names",
    "upgrade_opt_names",
    "upgrade_settings",
    "upgrade_target",
    "upgrade_targets",
    "warn_noop",
]

#: the PaddleCraft version that drops everything in this module
REMOVED_IN = "0.4"

#: the one rename table: ``{what was renamed: {old: new}}``
RENAMED: dict[str, dict[str, str]] = {
    # pre-0.2 top-level packages in a saved ``_target_`` (0.2 moved them under paddlecraft.)
    "package": {p: f"paddlecraft.{p}" for p in ("agents", "encoders", "arenas", "craftdata")},
    # self-play's flat 0.2 settings and their 0.3 groups (``arena.<old>`` -> ``arena.<new>``)
    "selfplay_setting": {
        **{k: f"update.{k}" for k in ("minibatch_size", "clip_ratio", "gamma", "gae_lambda",
                                      "value_coef", "policy_coef", "entropy_coef")},
        "update_epochs": "update.epochs",
        **{k: f"search.{k}" for k in ("simulations", "c_puct", "dirichlet_alpha",
                                      "noise_fraction", "temperature_moves", "policy_target")},
        "search_updates": "search.updates",
        "search_every": "search.every",
        "search_games_per_step": "search.games_per_step",
        "search_lr": "search.lr",
        **{k: f"league.{k}" for k in ("latest_ratio", "pool_size", "pool_opponents_per_step",
                                      "snapshot_every", "snapshot_score", "snapshot_min_games",
                                      "train_anchors")},
        "eval_games": "eval.games",
        "final_eval_games": "eval.final_games",
        "search_eval_games": "eval.search_games",
        "eval_simulations": "eval.simulations",
        **{k: f"eval.{k}" for k in ("solver_positions", "headline_metric", "keep_best")},
        "collect_workers": "workers.count",
        "threads_per_worker": "workers.threads",
        "ray_address": "workers.ray_address",
    },
    # module attributes: ``<module>:<old name>`` -> the new name in the same module
    "attribute": {"paddlecraft.arenas.engine.app:_user_error": "user_error"},
    # 0.1 calls that do nothing any more (scopes are not held): the call -> what to do
    "noop": {
        "Agent.release_scopes": "remove the call (names are checked per optimizer)",
        "release_scope": "remove the call (names are checked per optimizer and program)",
    },
}  # fmt: skip


# ---------------------------------------------------------------- _target_ packages
def upgrade_target(target: str) -> str:
    """``encoders.ResNetEncoder`` (a pre-0.2 saved name) -> ``paddlecraft.encoders.ResNetEncoder``."""
    head = target.partition(".")[0]
    new = RENAMED["package"].get(head)
    return f"{new}{target[len(head) :]}" if new and "." in target else target


def upgrade_targets(cfg: Any) -> Any:
    """A plain-container copy of ``cfg`` with every legacy ``_target_`` namespaced.

    Saved agents (``agent.json``) and run configs written before the ``paddlecraft.``
    namespace keep loading: their ``_target_``s are rewritten here, before the allow-list
    check, so nothing outside the toolkit gets through this way.
    """
    if isinstance(cfg, (DictConfig, ListConfig)):
        cfg = OmegaConf.to_container(cfg, resolve=False)
    if isinstance(cfg, Mapping):
        return {
            k: upgrade_target(v) if k == "_target_" and isinstance(v, str) else upgrade_targets(v)
            for k, v in cfg.items()
        }
    if isinstance(cfg, (list, tuple)):
        return [upgrade_targets(v) for v in cfg]
    return cfg


#: the last commit that has the settings of `REMOVED` (``git checkout`` it to read a run
#: that uses one)
REMOVED_AT = "d7dd544"

#: settings removed, by where they lived: measured as not helping, or made constant (a
#: speed switch always on, a fixed value), each with the value that did what the code does
#: now: a saved run or policy holding that value loads without it, one holding another is
#: refused (`drop_removed`); ``docs/results.json`` has the ablations of the measured ones
REMOVED: dict[str, dict[str, Any]] = {
    # a self-play run's ``arena.*``
    "selfplay_setting": {
        "update.opponent_policy_coef": 0.15, "update.ownership_coef": 1.5,
        "update.soft_policy_coef": 1.0, "update.soft_policy_power": 0.25,
        "update.root_value_weight": 0.0, "update.proven_values": False,
        "update.explored_values": "outcome", "update.replay_min": 0,
        "update.surprise_weight": 0.0, "search.opening_dirichlet_alpha": None,
        "search.policy_temperature": 1.0, "search.opening_policy_temperature": None,
        "search.temperature_value_cutoff": None, "search.late_moves": 0,
        "search.late_temperature": 0.5, "search.late_player": None,
        "search.second_player_simulations": None, "search.ply_simulations": None,
        "search.policy_target": "visits", "search.full_fraction": 1.0,
        "search.fast_simulations": 10, "search.archive_starts": 0.0,
        "search.gumbel_considered": 0, "eval.average_last": 0, "eval.keep_best": None,
        # made constant: the evaluation cache and the NumPy copy always on, the policy
        # loss unweighted, search updates at the policy's own rate, the pool rule's bar
        # (`arenas.selfplay.league.SNAPSHOT_SCORE`, `SNAPSHOT_MIN_GAMES`)
        "search.cache": True, "search.network_copy": True, "update.policy_coef": 1.0,
        "search.lr": None, "league.snapshot_score": 0.7, "league.snapshot_min_games": 256,
    },
    # a `Policy`'s settings (``agents.policy.*``)
    "policy_setting": {
        "draw_score": 0.0, "value_bins": 0, "value_sigma": 0.75, "value_hidden": 0,
        "moves_left": False, "moves_left_weight": 0.0, "opponent_policy": False,
        "ownership": False, "soft_policy": False, "search_mirror": False,
        "search_policy_temperature": 1.0,
    },
    # an MLP or board-line encoder's settings (``agents.policy.encoder.*``)
    "encoder_setting": {"parity": False, "residual": False},
}  # fmt: skip


def drop_removed(settings: dict[str, Any], kind: str, where: str) -> list[str]:
    """Take the settings of ``REMOVED[kind]`` out of saved ``settings`` (a plain dict, edited
    in place) where they hold the value that does what the code does now; returns their
    dotted keys. One that holds another value raises `CheckpointError` naming it, ``where``
    it was saved (a prefix such as ``arena.``) and the commit that reads it."""
    dropped = []
    for key, default in REMOVED[kind].items():
        *groups, leaf = key.split(".")
        node: Any = settings
        for g in groups:
            node = node.get(g) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            continue
        value = node[leaf]
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        if value != default:
            raise CheckpointError(
                f"{where}{key}={value!r}: saved by an earlier PaddleCraft with a setting it no "
                f"longer has (removed or made constant); read it with `git checkout {REMOVED_AT}`"
            )
        del node[leaf]
        dropped.append(key)
    return dropped


def drop_removed_policy(config: dict[str, Any], where: str) -> None:
    """`drop_removed` for a saved `Policy`'s ``config`` and its encoder's, in place;
    ``where`` (``agents.policy.``) prefixes the setting in a refusal."""
    drop_removed(config, "policy_setting", where)
    if isinstance(config.get("encoder"), dict):
        drop_removed(config["encoder"], "encoder_setting", f"{where}encoder.")


# ---------------------------------------------------------------- settings
def renamed_settings(config_cls: type) -> Mapping[str, str]:
    """``{old key: new dotted key}`` of settings a ``Config`` dataclass moved (its ``RENAMED``
    class variable; empty when it declares none)."""
    return getattr(config_cls, "RENAMED", None) or {}


def settings_as_saved(config_cls: type, settings: dict[str, Any]) -> dict[str, Any]:
    """Give a saved run's ``settings`` (a plain dict, edited in place) the value each
    setting added since had before it existed, where the run saved none (a ``Config``'s
    ``AS_BEFORE``: ``{"search.reuse": False}``), so that its resume runs as it ran;
    returns ``{dotted key: value}`` for those filled in."""
    filled: dict[str, Any] = {}
    for key, value in (getattr(config_cls, "AS_BEFORE", None) or {}).items():
        *groups, leaf = key.split(".")
        node = settings
        for g in groups:
            node = node.setdefault(g, {})
        if leaf not in node:
            node[leaf] = value
            filled[key] = value
    return filled


def upgrade_settings(config_cls: type, settings: dict[str, Any]) -> dict[str, str]:
    """Move the keys of ``settings`` (a plain dict, edited in place) that ``config_cls``
    renamed (`renamed_settings`) to their new dotted places; returns ``{old: new}``
    for those moved.

    What a saved run's ``config.yaml`` written by an older PaddleCraft goes through before
    it is resumed: ``{"collect_workers": 2}`` becomes ``{"workers": {"count": 2}}``.
    """
    moved: dict[str, str] = {}
    for old, new in renamed_settings(config_cls).items():
        if old not in settings:
            continue
        *groups, leaf = new.split(".")
        node = settings
        for g in groups:
            node = node.setdefault(g, {})
        node[leaf] = settings.pop(old)
        moved[old] = new
    return moved


# ---------------------------------------------------------------- module attributes
def renamed_attribute(module: str, name: str, namespace: Mapping[str, Any]) -> Any:
    """A module's ``__getattr__`` for its renamed attributes: the value under the new name
    (from the module's ``namespace``), with a DeprecationWarning; AttributeError otherwise."""
    new = RENAMED["attribute"].get(f"{module}:{name}")
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is now {module}.{new}; the old name goes in PaddleCraft {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=3,
    )
    return namespace[new]


def warn_noop(call: str) -> None:
    """The DeprecationWarning of a 0.1 call that does nothing any more (``RENAMED["noop"]``)."""
    warnings.warn(
        f"{call}() does nothing any more: {RENAMED['noop'][call]}; it goes in PaddleCraft "
        f"{REMOVED_IN}",
        DeprecationWarning,
        stacklevel=3,
    )


# ---------------------------------------------------------------- saved weights
def upgrade_names(
    arrays: Mapping[str, Any], scope: str, renames: Mapping[str, str | None]
) -> dict[str, Any]:
    """``arrays`` with ``<scope>.<old>...`` keys renamed to ``<scope>.<new>...`` (or dropped)."""
    out: dict[str, Any] = {}
    for key, value in arrays.items():
        for old, new in renames.items():
            prefix = f"{scope}.{old}."
            if key.startswith(prefix):
                key = None if new is None else f"{scope}.{new}.{key[len(prefix) :]}"
                break
        if key is not None:
            out[key] = value
    return out


def upgrade_opt_names(
    tensors: Mapping[str, Any], scope: str, renames: Mapping[str, str | None]
) -> dict[str, Any]:
    """The same for optimizer accumulators keyed ``<kind>/<parameter>``."""
    out: dict[str, Any] = {}
    for key, value in tensors.items():
        acc, sep, pname = key.partition("/")
        if not sep:
            out[key] = value
            continue
        upgraded = upgrade_names({pname: value}, scope, renames)
        out.update({f"{acc}/{k}": v for k, v in upgraded.items()})
    return out


def saved_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Weight shapes by physical name from a safetensors header (no tensor is read)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    except Exception:  # noqa: BLE001 (a missing or damaged file is reported by load_tensors)
        return {}


# ---------------------------------------------------------------- 0.1 layer layouts
def policy_layers_0_1(
    config: dict[str, Any], shapes: Mapping[str, tuple[int, ...]], name: str
) -> dict[str, str | None]:
    """Policies saved before the feature contract (PaddleCraft 0.1) load unchanged.

    Their MLP encoder kept a ``prediction`` layer of ``num_classes`` units whose ReLU
    output was the feature vector (``num_classes`` meant a hidden width); today that
    layer is one more hidden layer (``hidden_layers + 1``, headless), with the same
    weights renamed and the same function. Other encoders saved that way cannot be
    mapped and are refused naming the way out.
    """
    enc = config.get("encoder")
    if not isinstance(enc, dict) or f"{name}.prediction.w_0" not in shapes:
        return {}
    target = str(enc.get("_target_", ""))
    if not target.endswith("ImageMLPEncoder"):
        raise CheckpointError(
            f"agent {name!r} was saved by PaddleCraft 0.1 with a {target.rpartition('.')[2]} "
            "whose 'prediction' layer served as the policy's features; only MLP policies "
            f"of that version can be upgraded. Train it again ({command()} arena=selfplay "
            f"encoder@agents.policy.encoder=...), or load its weights with strict=False"
        )
    width = shapes[f"{name}.prediction.w_0"][1]
    hidden = int(enc.get("hidden_size", width))
    if width != hidden:
        raise CheckpointError(
            f"agent {name!r} was saved by PaddleCraft 0.1 with a last layer of {width} "
            f"units after hidden layers of {hidden}: today's MLP has one width; train it again"
        )
    layers = int(enc.get("hidden_layers", 2))
    enc.pop("num_classes", None)
    enc["hidden_layers"] = layers + 1
    return {"prediction": f"hidden_layer_{layers + 1}"}


def recognizer_ctc_0_1(
    config: dict[str, Any], shapes: Mapping[str, tuple[int, ...]], name: str
) -> dict[str, str | None]:
    """CTC recognizers saved before the feature contract (PaddleCraft 0.1) load unchanged.

    Their CTC head read the GRU's frames while the speech encoder's ``embedding`` layer
    (``embedding_dim``) fed only the pooled vector; today the CTC head reads ``hidden``,
    which passes through ``embedding`` when it exists. Such a save (a CTC head as wide
    as the GRU frames, not ``embedding_dim``) loads with ``embedding_dim: null`` and
    its unused ``embedding`` weights dropped: the same function.
    """
    enc = config.get("encoder")
    ctc = shapes.get(f"{name}.ctc.w_0")
    if (
        not isinstance(enc, dict)
        or config.get("head", "ctc") != "ctc"
        or ctc is None
        or enc.get("embedding_dim") in (None, ctc[0])
        or not str(enc.get("_target_", "")).endswith("SpeechEncoder")
    ):
        return {}
    enc["embedding_dim"] = None
    return {"speech.embedding": None}
