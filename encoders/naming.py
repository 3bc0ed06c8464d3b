"""Physical names: how a logical path like ``model1.hidden_layer_1`` becomes ``model1.hidden_layer_1.w_0``.

Paddle names a parameter when it is created, from a process-wide name generator
(``linear_0.w_0``). Renaming afterwards works in dynamic mode but not in a static
program (the startup program keeps the old name), so PaddleCraft names parameters
at creation time instead: every logical layer is constructed under
`physical_names`, whose generator gives the layer itself the logical path and
its parameters ``<path>.w_0``, ``<path>.b_0``, ... The same code therefore yields the
same physical names in dynamic and static mode.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from paddlecraft.compat import warn_noop
from paddlecraft.errors import ScopeError
from paddlecraft.paddle_private import UniqueNameGenerator
from paddlecraft.paddle_private import name_guard as _name_guard

T = TypeVar("T")

# dotted identifiers; parts after the first may also be indices (``enc.layers.0``)
_SCOPE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.([A-Za-z_][A-Za-z0-9_]*|[0-9]+))*$")


class _LogicalNameGenerator(UniqueNameGenerator):
    """Names the first layer built under it ``path``; nested layers ``path.<kind>_<n>``.

    Parameter keys arrive as ``<layer full name>.w`` / ``.b`` and are numbered per key,
    so a Linear built under ``model1.hidden_layer_1`` owns ``model1.hidden_layer_1.w_0``
    and ``model1.hidden_layer_1.b_0``.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._named_root = False

    def generate(self, key: str) -> str:
        if "." not in key and not key.startswith("_"):
            # A layer's own name (``linear``, ``conv2d``, ``gru_cell``...).
            if not self._named_root:
                self._named_root = True
                return self.path
            return super().generate(f"{self.path}.{key}")
        return super().generate(key)


@contextmanager
def physical_names(path: str) -> Iterator[None]:
    """Within this block, layers built get parameters named ``<path>.w_0``, ``<path>.b_0``...

    ``path`` is ``<scope>.<logical path>``. Use it for heads and other layers that live
    outside an `Encoder` so that every parameter an agent owns carries
    the agent's scope:

        with physical_names("policy.value_head"):
            head = paddle.nn.Linear(128, 1)   # policy.value_head.w_0, policy.value_head.b_0
    """
    check_scope_syntax(path)
    with _name_guard(_LogicalNameGenerator(path)):
        yield


def build_named(path: str, factory: Callable[[], T]) -> T:
    """Call ``factory()`` under `physical_names` and return what it built."""
    with physical_names(path):
        return factory()


def check_scope_syntax(scope: str) -> None:
    """Raise `ScopeError` unless ``scope`` is dotted names (``gen``, ``a.b_1``, ``a.layers.0``)."""
    if not isinstance(scope, str) or not _SCOPE_RE.match(scope):
        raise ScopeError(
            f"scope {scope!r} is not a valid name scope: expected dot-separated identifiers "
            "such as 'model1', 'generator.image' or 'enc.layers.0' (letters, digits, "
            "underscores; the first part not starting with a digit)."
        )


def check_unique_names(params: Iterable[Any], where: str, fix: str) -> None:
    """Raise `ScopeError` when two different parameters in ``params`` share a name.

    Physical names must be unique per optimizer (Adam keys its moments by ``param.name``:
    two parameters with one name share one set of moments, see PADDLE_NOTES) and per
    static program (a parameter there IS its name). So this is checked where an optimizer
    or a program is built, over what it holds; two encoders elsewhere in the process may
    use one scope. ``where`` names the optimizer or program, ``fix`` the remedy.
    """
    first: dict[str, int] = {}
    clash: list[str] = []
    for p in params:
        if first.setdefault(p.name, id(p)) != id(p) and p.name not in clash:
            clash.append(p.name)
    if clash:
        clash.sort()
        shown = ", ".join(clash[:4]) + (f" and {len(clash) - 4} more" if len(clash) > 4 else "")
        raise ScopeError(
            f"{where} would hold {len(clash)} pair(s) of different parameters with the same "
            f"physical name ({shown}): two encoders or agents were built in one scope. {fix}"
        )


def release_scope(scope: str) -> None:
    """Deprecated, does nothing: scopes are no longer held by the process (names are
    checked per optimizer and per static program instead). Kept so 0.1 code runs."""
    warn_noop("release_scope")


def find_params(table: Mapping[str, list], name: str, who: str, scope: str) -> dict[str, list]:
    """Parameters of ``table`` (``{logical: [Parameter, ...]}``) by logical name, physical
    name or prefix of either: ``{logical: [p, ...]}``; KeyError naming both kinds when none."""
    if name in table:
        return {name: table[name]}
    for logical, params in table.items():
        hit = [p for p in params if p.name == name]
        if hit:
            return {logical: hit}
    found = {lg: ps for lg, ps in table.items() if lg.startswith(name)}
    if not found:
        found = {
            lg: [p for p in ps if p.name.startswith(name)]
            for lg, ps in table.items()
            if any(p.name.startswith(name) for p in ps)
        }
    if not found:
        raise KeyError(
            f"{who} has no parameter matching {name!r}; logical names: "
            f"{list(table)}; physical names start with {scope + '.'!r}"
        )
    return found
