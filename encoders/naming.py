"""Physical names: how a logical path like ``model1.hidden_layer_1`` becomes ``model1.hidden_layer_1.w_0``.

Paddle names a parameter when it is created, from a process-wide name generator
(``linear_0.w_0``). Renaming afterwards works in dynamic mode but not in a static
program (the startup program keeps the old name), so PaddleCraft names parameters
at creation time instead: every logical layer is constructed under
:func:`physical_names`, whose generator gives the layer itself the logical path and
its parameters ``<path>.w_0``, ``<path>.b_0``, ... The same code therefore yields the
same physical names in dynamic and static mode.
"""

from __future__ import annotations

import gc
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from paddle.base.unique_name import UniqueNameGenerator
from paddle.base.unique_name import guard as _name_guard

from paddlecraft.errors import ScopeError

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
    outside an :class:`~encoders.Encoder` so that every parameter an agent owns carries
    the agent's scope::

        with physical_names("policy.value_head"):
            head = paddle.nn.Linear(128, 1)   # policy.value_head.w_0, policy.value_head.b_0
    """
    check_scope_syntax(path)
    with _name_guard(_LogicalNameGenerator(path)):
        yield


def build_named(path: str, factory: Callable[[], T]) -> T:
    """Call ``factory()`` under :func:`physical_names` and return what it built."""
    with physical_names(path):
        return factory()


def check_scope_syntax(scope: str) -> None:
    """Raise :class:`ScopeError` unless ``scope`` is dotted names (``gen``, ``a.b_1``, ``a.layers.0``)."""
    if not isinstance(scope, str) or not _SCOPE_RE.match(scope):
        raise ScopeError(
            f"scope {scope!r} is not a valid name scope: expected dot-separated identifiers "
            "such as 'model1', 'generator.image' or 'enc.layers.0' (letters, digits, "
            "underscores; the first part not starting with a digit)."
        )


class ScopeRegistry:
    """Which name scopes are held by live objects in this process.

    Physical names must be unique per optimizer (Adam keys its moments by name, see
    PADDLE_NOTES) and per static program, so two live encoders may not share a scope.
    The registry holds weak references: a scope is free again once its owner is
    garbage-collected, or after :meth:`release`. This is the one piece of process-wide
    state in the toolkit, on purpose: uniqueness "in the process" needs it.
    """

    def __init__(self) -> None:
        self._owners: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def claim(self, scope: str, owner: object) -> None:
        """Record ``owner`` as the holder of ``scope``; raise :class:`ScopeError` if taken."""
        check_scope_syntax(scope)
        with self._lock:
            held = self._owners.get(scope)
            if held is not None and held is not owner:
                gc.collect()  # layers hold reference cycles; a dead owner may still linger
                held = self._owners.get(scope)
            if held is not None and held is not owner:
                raise ScopeError(
                    f"scope {scope!r} is already used by a live {type(held).__name__} in this "
                    "process; two encoders in one scope would get the same physical parameter "
                    "names. Give this one another scope (e.g. "
                    f"{scope + '_2'!r}), or call encoders.release_scope({scope!r}) "
                    "once the old one is no longer used."
                )
            self._owners[scope] = owner

    def release(self, scope: str) -> None:
        """Free ``scope`` whether or not its owner is still alive."""
        with self._lock:
            self._owners.pop(scope, None)

    def owner(self, scope: str) -> object | None:
        """The live object holding ``scope``, or None."""
        return self._owners.get(scope)


SCOPES = ScopeRegistry()


def release_scope(scope: str) -> None:
    """Free a name scope so a new encoder may use it (the old one keeps its names)."""
    SCOPES.release(scope)
