"""Small arenas for engine tests: a linear regression arena, and deliberately broken ones.

Regressor builds a plain head (no encoder), so its name is not a held scope and tests may
reuse "reg" freely.
"""

from __future__ import annotations

import math

import numpy as np
import paddle

from paddlecraft.agents import Agent
from paddlecraft.arenas import Arena


class Regressor(Agent):
    """y = w.x + b with one Linear head; trained by MSE."""

    def __init__(self, name: str, dim: int = 4, **common) -> None:
        super().__init__(name, config={"dim": dim}, **common)
        with self.seeded():
            self.head = self.make_head("head", lambda: paddle.nn.Linear(dim, 1))
        self.finish()

    def forward(self, x):
        return self.head(x)


class ToyArena(Arena):
    """Noisy linear regression; uses paddle's global RNG (dropout-like noise) every step."""

    headline = "neg_mse"

    def __init__(self, agents, epochs=2, seed=0, n=64, batch_size=8, nan_at_step=None):
        super().__init__(agents, epochs=epochs, seed=seed)
        self.agent = next(iter(self.agents.values()))
        rng = np.random.default_rng(seed)
        self.x = rng.normal(size=(n, 4)).astype("float32")
        self.y = (self.x @ np.array([1.0, -2.0, 0.5, 3.0], "float32"))[:, None]
        self.batch_size = batch_size
        self.nan_at_step = nan_at_step
        self.steps_done = 0

    def steps_per_epoch(self):
        return len(self.x) // self.batch_size

    def batches(self, epoch):
        idx = self.epoch_rng(epoch).permutation(len(self.x))
        for i in range(0, len(idx), self.batch_size):
            j = idx[i : i + self.batch_size]
            yield self.x[j], self.y[j]

    def train_step(self, batch):
        x, y = batch
        agent = self.agent
        noise = paddle.randn([len(x), 1]) * 0.01
        loss = ((agent(agent.to_tensor(x)) - agent.to_tensor(y) - noise) ** 2).mean()
        agent.update(loss)
        self.steps_done += 1
        value = float(loss)
        if self.nan_at_step is not None and self.steps_done >= self.nan_at_step:
            value = math.nan
        return {"loss": value}

    def evaluate(self):
        agent = self.agent
        with paddle.no_grad():
            pred = agent(agent.to_tensor(self.x)).numpy()
        return {"neg_mse": -float(((pred - self.y) ** 2).mean())}

    def arena_state(self):
        return {"steps_done": self.steps_done}

    def load_arena_state(self, state):
        self.steps_done = state["steps_done"]


class ForgetfulArena(ToyArena):
    """Broken on purpose: keeps its own random generator and never checkpoints it."""

    def __init__(self, agents, **kw):
        super().__init__(agents, **kw)
        self.private_rng = np.random.default_rng(123)

    def train_step(self, batch):
        x, y = batch
        y = y + self.private_rng.normal(size=y.shape).astype("float32")
        return super().train_step((x, y))


class ShufflingArena(ToyArena):
    """Broken on purpose: data order comes from an unseeded global draw."""

    def batches(self, epoch):
        idx = np.random.permutation(len(self.x))
        for i in range(0, len(idx), self.batch_size):
            j = idx[i : i + self.batch_size]
            yield self.x[j], self.y[j]


class MemoryArena(ToyArena):
    """Keeps arrays in its state (a running sum of inputs, the last prediction as a tensor,
    a step counter per batch in int64), which checkpoints store in ``arena.safetensors``."""

    def __init__(self, agents, **kw):
        super().__init__(agents, **kw)
        self.memory = {"sum_x": np.zeros(4, np.float64), "counts": np.zeros(3, np.int64)}
        self.last = paddle.zeros([1])

    def train_step(self, batch):
        out = super().train_step(batch)
        self.memory["sum_x"] += batch[0].sum(0)
        self.memory["counts"][self.steps_done % 3] += 1
        with paddle.no_grad():
            self.last = self.agent(self.agent.to_tensor(batch[0][:1]))[0]
        return out

    def arena_state(self):
        return {**super().arena_state(), "memory": self.memory, "history": [self.last]}

    def load_arena_state(self, state):
        super().load_arena_state(state)
        self.memory = {k: np.array(v) for k, v in state["memory"].items()}
        self.last = paddle.to_tensor(state["history"][0])
