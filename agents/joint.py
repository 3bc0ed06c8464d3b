"""One loss, several agents: one backward, each agent steps its own optimizer once."""

from __future__ import annotations

from collections.abc import Iterable

import paddle

from .base import Agent
from .settings import ConfigError


def update_together(
    loss: paddle.Tensor,
    agents: Iterable[Agent],
    *,
    batch_share: float | None = None,
    grad_norm: bool = False,
) -> dict[str, float | None]:
    """One backward over a loss shared by several agents; each steps its own optimizer once.

    The referential-game pattern: ``loss = game_loss(speaker(x), listener(...))``, then
    ``update_together(loss, [speaker, listener])``. Each agent keeps its own optimizer,
    learning rate, grad clip, frozen parameters and data-parallel all-reduce; a parameter
    one agent borrows from another is stepped once, by its owner. Agents that took part in
    the forward pass but are not listed keep their weights (detach them, or their
    gradients accumulate until their own next update). Returns ``{name: grad norm or None}``.

    fp16 loss scaling is per agent, so agents with ``amp=fp16`` cannot share one backward:
    that is refused (use bf16, or separate losses with `Agent.update`).
    """
    agents = list(agents)
    names = [a.name for a in agents]
    if not agents or len(set(names)) != len(names):
        raise ValueError(f"update_together needs distinct agents, got {names}")
    scaled = [a.name for a in agents if a.amp.scaler is not None]
    if scaled:
        raise ConfigError(
            f"update_together: agents {scaled} use amp=fp16, whose loss scale is per agent; "
            "set agents.<name>.amp=bf16 (or off) for agents that share a loss"
        )
    idle = [a.name for a in agents if a.optimizer is None]
    if idle:
        raise RuntimeError(f"agent {idle[0]!r} has no trainable parameters to update")
    loss.backward()
    return {a.name: a.step_gradients(batch_share, grad_norm) for a in agents}
