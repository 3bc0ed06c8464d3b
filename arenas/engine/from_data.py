"""Agent settings the built dataset gives: ``${craft.from_data:num_classes}`` in a config.

Composing a config reads no data (``--cfg job`` and sweeps stay pure): the marker resolves
to null there. The app builds the dataset (``data.loader``) first, then replaces every marker
in the agents' configs with what `data_facts` reads off the built dataset: a
classifier's ``num_classes``, a conditional GAN's ``agents.discriminator.num_classes``, the
caption agents' ``words`` (``${craft.from_data:words}``: the training captions' words), a
policy's ``obs_shape`` / ``num_actions`` (from the game, ``data.loader: GameSpec``). The
run's ``config.yaml`` records the filled values. A value the config gives instead is
kept (the arena checks it against the data).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from paddlecraft.agents.settings import ConfigError

__all__ = ["RESOLVER", "data_facts", "fill_from_data", "marked", "register_resolver"]

RESOLVER = "craft.from_data"  #: ``${craft.from_data:<fact>}``: filled from the built dataset
_MARK = re.compile(r"^\$\{" + re.escape(RESOLVER) + r":\s*(\w+)\s*\}$")


def data_facts(data: Any) -> dict[str, Any]:
    """What a built dataset gives its agents: ``num_classes`` (when it has classes),
    ``words`` (caption and speech data: the vocabulary, a tokenizer file or the characters),
    ``obs_shape`` and ``num_actions`` (a game, `GameSpec`)."""
    facts: dict[str, Any] = {}
    k = getattr(data, "num_classes", None)
    if isinstance(k, int) and not isinstance(k, bool) and k > 0:
        facts["num_classes"] = k
    words = getattr(data, "words", None)
    if words:
        facts["words"] = words
    shape = getattr(data, "obs_shape", None)  # a game (GameSpec): its board planes
    if isinstance(shape, (tuple, list)):
        facts["obs_shape"] = [int(s) for s in shape]
    actions = getattr(data, "num_actions", None)
    if isinstance(actions, int) and not isinstance(actions, bool):
        facts["num_actions"] = actions
    return facts


def marked(node: Any, prefix: str) -> dict[str, str]:
    """``{full setting name: fact}`` of every marker under ``node`` (a config or plain data)."""
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=False)  # markers stay strings
    out: dict[str, str] = {}
    items: Any = ()
    if isinstance(node, Mapping):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    elif isinstance(node, str) and (m := _MARK.match(node)):
        out[prefix] = m.group(1)
    for key, value in items:
        out.update(marked(value, f"{prefix}.{key}"))
    return out


def fill_from_data(agents: DictConfig, data: Any, what: str = "the data") -> list[str]:
    """Replace every marker under ``agents`` (``cfg.agents``) with the fact ``data`` gives,
    in place; return the filled settings' full names.

    A fact ``data`` does not have raises `ConfigError` naming the setting (``what``
    names the data in the message).
    """
    facts = data_facts(data) if data is not None else {}
    found = marked(agents, "agents")
    for full, fact in found.items():
        if fact not in facts:
            raise ConfigError(
                f"{full}: {what} gives no {fact} to fill it with; set {full} in the config "
                "(or use data whose loader gives it)"
            )
        OmegaConf.update(agents, full.split(".", 1)[1], facts[fact], merge=False)
    return list(found)


def register_resolver() -> None:
    """Register ``${craft.from_data:...}``: null while composing (the data is not read)."""
    OmegaConf.register_new_resolver(RESOLVER, lambda fact: None, replace=True)
