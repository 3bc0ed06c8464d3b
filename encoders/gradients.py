"""Gradients read by name in dynamic mode: a parameter's, and a logical output's (recorded
on backward for the outputs an encoder watches). Static mode's are in `.static`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import paddle

__all__ = ["OutputGradients", "param_gradient"]


def param_gradient(who: str, p: paddle.Tensor) -> paddle.Tensor:
    """``p.grad`` of the last backward; a clear error when there is none."""
    if p.grad is None:
        raise RuntimeError(
            f"{who}: parameter {p.name!r} has no gradient yet; call "
            "loss.backward() first (frozen parameters never get one)"
        )
    return p.grad


class OutputGradients:
    """The gradients of an encoder's watched outputs, recorded on the next backward."""

    def __init__(self) -> None:
        self.watched: set[str] = set()  #: outputs whose gradient is recorded
        self.grads: dict[str, paddle.Tensor] = {}  #: the last recorded gradient by output

    def watch(self, who: str, outputs: Iterable[str], names: Iterable[str]) -> None:
        """Watch ``names``, each one of the encoder's ``outputs``."""
        outputs = tuple(outputs)
        names = tuple(names)
        for o in names:
            if o not in outputs:
                raise KeyError(f"{who} has no output {o!r}; outputs: {outputs}")
        self.watched.update(names)

    def unwatch(self, names: Iterable[str]) -> None:
        """Stop watching ``names`` (all when empty)."""
        names = tuple(names)
        self.watched.difference_update(names or set(self.watched))

    def hook(self, outs: Mapping[str, paddle.Tensor]) -> None:
        """Record the gradients of the watched ones of a forward's outputs ``outs``."""
        if paddle.in_dynamic_mode() and self.watched and paddle.is_grad_enabled():
            for name in self.watched:
                t = outs.get(name)
                if t is not None and not t.stop_gradient:
                    t.register_hook(self._recorder(name))

    def _recorder(self, name: str) -> Callable[[paddle.Tensor], None]:
        grads = self.grads

        def record(g: paddle.Tensor) -> None:
            grads[name] = g

        return record

    def get(self, who: str, name: str) -> paddle.Tensor:
        """The recorded gradient of output ``name``; a clear error when there is none."""
        if name not in self.grads:
            hint = "" if name in self.watched else f" and call .watch({name!r}) before the forward"
            raise RuntimeError(
                f"{who}: no gradient recorded for output {name!r}; run loss.backward(){hint}"
            )
        return self.grads[name]
