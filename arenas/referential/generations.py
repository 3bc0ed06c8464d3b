"""New generations of agents in a referential game, on a step schedule.

- Listener resets (Li & Bowling 2019, ease of teaching): every listener starts again from
  fresh weights; the speakers keep talking and must keep a language a newcomer picks up.
- Iterated learning (Ren et al. 2020): the speakers' language passes to new agents. The
  old speaker's greedy messages about the training objects are the teacher's; a fresh
  speaker learns to say them (cross-entropy, teacher-forced) and a fresh listener learns
  to read them, both for ``imitation_steps`` steps; then the new pair interacts. A language
  that is easier to learn survives the bottleneck better: compositional ones are.

Everything here runs inside one training step and is seeded by the run seed and the
generation, so a resumed run replays it exactly.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import paddle

from paddlecraft.agents import Agent
from paddlecraft.paddle_private import cross_entropy as _cross_entropy

from .worlds import World


class Game(Protocol):
    """What a new generation needs of a referential game (the arena, seen from here)."""

    cfg: Any  #: the game's settings (``batch_size``, ``imitation_steps``)
    seed: int  #: the run seed
    world: World
    speakers: list[Agent]
    listeners: list[Agent]

    def messages(self, speaker: Agent, x: np.ndarray) -> np.ndarray:
        """Greedy messages int64 [N, L] about objects ``x``."""

    def outcome(
        self, listener: Agent, message: paddle.Tensor, split: Any, batch: dict[str, Any]
    ) -> tuple[paddle.Tensor, paddle.Tensor]:
        """Loss and accuracy after each symbol, both [B, L]."""

    def stop_weights(self, spoken: dict[str, paddle.Tensor]) -> paddle.Tensor:
        """[B, L]: where each message ends."""


__all__ = ["Game", "due", "fresh", "iterate", "reset_listeners"]

IMITATION_STREAM = 0x171  #: random-stream id of the imitation batches: ``[seed, id, gen, step]``


def due(step: int, every: int, until: int) -> bool:
    """Whether a new generation starts before training step ``step`` (0-based): every
    ``every`` steps (0: never), never at step 0, none after ``until`` (0: to the end)."""
    return bool(every) and 0 < step <= (until or step) and not step % every


def fresh(agent: Agent, run_seed: int, gen: int) -> None:
    """Fresh weights and optimizer state for ``agent``, seeded by the run seed, the agent's
    own seed and the generation ``gen``."""
    seed = ((run_seed * 7919 + (agent.seed or 0)) * 7919 + gen) % 2**31
    agent.set_state_dict(type(agent)(agent.name, **{**agent.config, "seed": seed}).state_dict())
    agent.build_optimizer()


def reset_listeners(arena: Game, gen: int) -> None:
    """Every listener starts again (generation ``gen``)."""
    for li in arena.listeners:
        fresh(li, arena.seed, gen)


def iterate(arena: Game, gen: int) -> None:
    """One iterated-learning generation: each speaker's language, taught to a fresh speaker
    and a fresh listener for ``arena.cfg.imitation_steps`` steps (speaker ``i`` teaches the
    new speaker ``i``; the listeners learn from the teachers drawn as in training)."""
    c, train = arena.cfg, arena.world.train
    said = [arena.messages(sp, train.x) for sp in arena.speakers]  # int64 [N, L] each
    for agent in (*arena.speakers, *arena.listeners):
        fresh(agent, arena.seed, gen)
        if not agent.training:
            agent.train()
    n = len(train)
    for s in range(c.imitation_steps):
        rng = np.random.default_rng([arena.seed, IMITATION_STREAM, gen, s])
        i, j = int(rng.integers(len(arena.speakers))), int(rng.integers(len(arena.listeners)))
        target = rng.integers(n, size=c.batch_size)  # [B]
        want = said[i][target]  # [B, L] the teacher's symbols
        speaker, listener = arena.speakers[i], arena.listeners[j]
        sym = speaker.to_tensor(want)
        logits = speaker.teacher_forced(speaker.to_tensor(train.x[target]), sym)  # [B, L, V]
        speaker.update(_cross_entropy(logits, sym.unsqueeze(-1)).mean())
        loss_t, _ = arena.outcome(listener, sym, train, {"target": target})  # [B, L]
        w = arena.stop_weights({"symbols": sym})  # [B, L] where each message ends
        listener.update((w * loss_t).sum(1).mean())
