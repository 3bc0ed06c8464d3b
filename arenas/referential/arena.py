"""ReferentialArena: a speaker and a listener (or populations of them) invent a language.

Each step draws a speaker-listener pair and a batch of targets; the speaker describes each
target with a discrete message, the listener rebuilds the target's attributes
(``game=reconstruction``) or points at it among ``candidates`` objects
(``game=discrimination``). One joint loss, one backward, each agent steps its own optimizer
(`paddlecraft.agents.update_together`).

This module is the one class that draws a step's pair and targets and
scores every pair at evaluation; the rest lives beside it: the worlds (``worlds.py``),
populations, cross-play and the newcomer (``population.py``), the language measures
(``metrics.py``), the files and pictures (``report.py``), the spoken channel
(``spoken.py``) and the message channels (``agents/channel.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from paddlecraft.agents import Agent, update_together
from paddlecraft.agents.channel import RunningBaseline, temperature_at
from paddlecraft.agents.instantiate import built
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine import Arena
from paddlecraft.arenas.engine.rng import capture_rng, restore_rng
from paddlecraft.paddle_private import cross_entropy as _cross_entropy

from . import generations, population
from .checks import check_candidates
from .config import ReferentialConfig, check_settings
from .metrics import analyse
from .worlds import ObjectSplit, World, attribute_world, world_from_data

EOS = 0


EVAL_STREAM = 0xE7A1  #: random-stream id: the evaluation batches (and their noise seed)
ANALYSIS_STREAM = 0xA7A  #: random-stream id: the messages kept for the language analysis


class ReferentialArena(Arena):
    """Speakers and listeners learn to refer; headline: accuracy on held-out objects.

    Args:
        agents: ``speaker`` (`paddlecraft.agents.Sender`) and ``listener``
            (`paddlecraft.agents.Receiver`); with ``speakers``/``listeners`` > 1 the
            arena adds ``speaker_1``... built like ``speaker`` (own weights, own optimizer),
            or uses the one configured under that name (a mixed population).
        data: the objects: a dataset (``load_shape_objects()``, an image folder loaded in
            memory; the engine builds it from ``data.loader``) or its loader config; None:
            the attribute world of the settings.
        seed: run seed (targets, pairs, held-out combinations).
        **settings: `ReferentialConfig` fields.
    """

    Config = ReferentialConfig
    headline = "test_accuracy"

    def __init__(
        self, agents: Mapping[str, Agent], data: Any = None, seed: int = 0, **settings: Any
    ) -> None:
        super().__init__(agents, seed=seed, **settings)
        self.require_agents("speaker", "listener")
        c = self.cfg
        check_settings(c)
        self.world = self._make_world(data)
        check_candidates(c, self.world)
        self.speakers = population.grow(self.agents["speaker"], c.speakers, self.agents)
        self.listeners = population.grow(self.agents["listener"], c.listeners, self.agents)
        self._grown = [a for a in self.speakers[1:] + self.listeners[1:] if a.name not in agents]
        for a in self._grown:
            self.agents[a.name] = a
        self.steps_done = 0
        self.baselines = [RunningBaseline() for _ in self.speakers]
        self.history: list[float] = []  #: batch accuracy of each training step
        self.newcomer: dict[str, float] = {}  #: ease-of-teaching results, once measured
        self.newcomer_curve: list[float] = []  #: the newcomer's batch accuracy per step
        self.last: dict[str, Any] = {}  # the last evaluation's messages and matrix
        self.voice = None
        if c.spoken:
            from .spoken import Voice

            ears = [li.ear for li in self.listeners]
            if any(e is None for e in ears):
                raise ConfigError(
                    "arena.spoken=true: the listener needs an ear, a speech encoder config "
                    "(agents.listener.ear); use arena=referential_spoken"
                )
            self.voice = Voice(c.vocab_size, int(ears[0].encoder.sample_rate))

    def _make_world(self, data: Any) -> World:
        c = self.cfg
        if data is None:  # no data: the settings' attribute world
            return attribute_world(c.n_attributes, c.n_values, c.holdout, self.seed)
        world = world_from_data(built(data))
        if c.game == "reconstruction" and world.train.meanings is None:
            raise ConfigError(
                "arena.game=reconstruction needs objects with attributes; this data has none: "
                "set arena.game=discrimination"
            )
        return world

    # ------------------------------------------------------------------ data order
    def check_config(self, cfg: Any) -> None:
        """The constructor's cross-checks of ``cfg`` (a live ``set`` of ``arena.*``)."""
        check_settings(cfg)

    def steps_per_epoch(self) -> int:
        return self.cfg.steps_per_epoch

    def batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, Any]]:
        for s in range(start, self.cfg.steps_per_epoch):
            yield self.draw(np.random.default_rng([self.seed, epoch, s]))

    def draw(self, rng: np.random.Generator) -> dict[str, Any]:
        """One step's pair, targets [B], candidates [B, K] and target positions [B]."""
        c, n = self.cfg, len(self.world.train)
        pair = (int(rng.integers(len(self.speakers))), int(rng.integers(len(self.listeners))))
        target = rng.integers(n, size=c.batch_size)
        batch = {"pair": pair, "target": target}
        if c.game == "discrimination":
            batch.update(_candidates(target, n, c.train_candidates or c.candidates, rng))
        if c.spoken:
            batch["noise_seed"] = int(rng.integers(2**31))
        return batch

    # ------------------------------------------------------------------ the game
    def temperature(self) -> float:
        c = self.cfg
        return temperature_at(
            self.steps_done, c.temperature, c.temperature_end, c.temperature_decay_steps
        )

    def speak(self, speaker: Agent, x: np.ndarray, greedy: bool) -> dict[str, paddle.Tensor]:
        """The speaker's messages about objects ``x`` through the configured channel."""
        return speaker(speaker.to_tensor(x), self.cfg.channel, self.temperature(), greedy)

    def readings(
        self, listener: Agent, message: paddle.Tensor, batch: dict[str, Any], snr: float | None
    ) -> paddle.Tensor:
        """What ``listener`` makes of ``message``: [B, L, H], or [B, 1, H] when spoken."""
        if self.voice is None:
            return listener(message)
        sym = message.numpy() if message.ndim == 2 else message.argmax(-1).numpy()
        snr = self.cfg.snr_db if snr is None else snr
        wave = self.voice.say(sym, snr, np.random.default_rng(batch["noise_seed"]))  # [B, S]
        return listener.hear(listener.to_tensor(wave))

    def outcome(
        self,
        listener: Agent,
        message: paddle.Tensor,
        split: ObjectSplit,
        batch: dict[str, Any],
        snr: float | None = None,
    ) -> tuple[paddle.Tensor, paddle.Tensor]:
        """Loss and accuracy after each symbol, both [B, L] ([B, 1] spoken), of ``listener``
        reading (or hearing, at ``snr`` dB) ``message``."""
        h = self.readings(listener, message, batch, snr)  # [B, L, H]
        if self.cfg.game == "reconstruction":
            logits = listener.reconstruct(h)  # [B, L, A, V]
            want = split.meanings[batch["target"]]  # [B, A]
            b, n, a = h.shape[0], h.shape[1], want.shape[-1]
            want = listener.to_tensor(np.broadcast_to(want[:, None, :, None], (b, n, a, 1)))
            ce = _cross_entropy(logits, want)  # [B, L, A, 1]
            right = logits.argmax(-1, keepdim=True) == want  # [B, L, A, 1]
            if split.scored is not None:  # attributes not judged count as right
                free = ~split.scored[batch["target"]]  # [B, A]
                right = right | listener.to_tensor(
                    np.broadcast_to(free[:, None, :, None], (b, n, a, 1))
                )
            acc = right.astype("float32").min([-2, -1])
            return ce.sum([-2, -1]), acc  # [B, L] summed over attributes
        cand = listener.to_tensor(split.x[batch["candidates"]])  # [B, K, ...]
        scores = listener.score(h, cand)  # [B, L, K]
        pos = listener.to_tensor(batch["position"]).unsqueeze(1).expand(scores.shape[:2])
        ce = _cross_entropy(scores, pos.unsqueeze(-1)).squeeze(-1)
        return ce, (scores.argmax(-1) == pos).astype("float32")  # [B, L]

    def stop_weights(self, spoken: dict[str, paddle.Tensor]) -> paddle.Tensor:
        """[B, L]: where each message ends. Fixed length: the last symbol. Variable length
        with Gumbel-softmax: P(first end symbol at t) from the straight-through one-hots
        (0/1 forward, differentiable); with REINFORCE: the sampled first end symbol."""
        sym = spoken["symbols"]  # [B, L]
        b, n = sym.shape
        if self.voice is not None:  # one reading of the whole heard message
            return paddle.ones([b, 1])
        if not self.cfg.variable_length:
            return F.one_hot(paddle.full([b], n - 1, "int64"), n)
        if "onehot" in spoken:
            eos = spoken["onehot"][:, :, EOS]  # [B, L]
        else:
            eos = (sym == EOS).astype("float32")
        alive = paddle.cumprod(1.0 - eos, dim=1)  # [B, L] no end symbol up to t
        before = paddle.concat([paddle.ones([b, 1]), alive[:, :-1]], axis=1)
        w = before * eos
        return paddle.concat([w[:, :-1], before[:, -1:]], axis=1)  # the rest ends at L-1

    def play(
        self, speaker: Agent, listener: Agent, batch: dict[str, Any], speaker_learns: bool = True
    ) -> tuple[paddle.Tensor, paddle.Tensor, dict[str, paddle.Tensor]]:
        """(joint loss, per-target accuracy [B], messages) of one pair on a training batch;
        ``speaker_learns=False``: the speaker talks without gradients (a frozen teacher)."""
        c, split = self.cfg, self.world.train
        with paddle.set_grad_enabled(speaker_learns):
            spoken = self.speak(speaker, split.x[batch["target"]], greedy=False)
        message = spoken["onehot"] if c.channel == "gs" else spoken["symbols"]
        loss_t, acc_t = self.outcome(listener, message, split, batch)
        learns_by_reward = c.channel == "reinforce" and speaker_learns
        w = None
        if c.variable_length or self.voice is not None or learns_by_reward:
            w = self.stop_weights(spoken)  # [B, L]
            loss_b, acc = (w * loss_t).sum(1), (w * acc_t).sum(1)  # [B]
        else:  # every message ends at its last symbol: bit for bit (w * x).sum(1), 4 ops fewer
            loss_b, acc = loss_t[:, -1], acc_t[:, -1]  # [B]
        loss = loss_b.mean()
        if learns_by_reward:
            loss = loss + self.reinforce_loss(speaker, spoken, w, loss_b)
        elif c.channel == "gs" and c.gs_entropy_coef > 0 and speaker_learns:
            logp = F.log_softmax(spoken["logits"], axis=-1)  # [B, L, V]
            loss = loss + c.gs_entropy_coef * (logp.exp() * logp).sum(-1).mean()  # - entropy
        return loss, acc, spoken

    def reinforce_loss(
        self, speaker: Agent, spoken: dict, w: paddle.Tensor, loss_b: paddle.Tensor
    ) -> paddle.Tensor:
        """REINFORCE for the speaker: reward -loss minus a running baseline, entropy bonus."""
        i = self.speakers.index(speaker)
        if self.voice is not None:
            w = F.one_hot(
                paddle.full([w.shape[0]], spoken["log_prob"].shape[1] - 1, "int64"),
                spoken["log_prob"].shape[1],
            )
        said = paddle.flip(paddle.cumsum(paddle.flip(w, [1]), 1), [1])  # [B, L] 1 up to the end
        reward = -loss_b.detach()  # [B]
        adv = reward - self.baselines[i].value
        logp = (spoken["log_prob"] * said).sum(1)  # [B]
        ent = (spoken["entropy"] * said).sum(1) / said.sum(1)  # [B]
        self.baselines[i].update(float(reward.mean()))
        return -(adv * logp).mean() - self.cfg.entropy_coef * ent.mean()

    def train_step(self, batch: dict[str, Any]) -> dict[str, float]:
        c, step = self.cfg, self.steps_done
        if generations.due(step, c.iterated_every, c.iterated_until):
            generations.iterate(self, step // c.iterated_every)
        elif generations.due(step, c.reset_listeners_every, c.reset_listeners_until):
            generations.reset_listeners(self, step // c.reset_listeners_every)
        i, j = batch["pair"]
        speaker, listener = self.speakers[i], self.listeners[j]
        for agent in (speaker, listener):
            if not agent.training:  # train() walks every sublayer: only when needed (as classify)
                agent.train()
        loss, acc, _ = self.play(speaker, listener, batch)
        update_together(loss, [speaker, listener])
        self.steps_done += 1
        accuracy = acc.mean().item()  # .item(): float(tensor) is dearer in Paddle
        self.history.append(accuracy)
        return {"loss": loss.item(), "accuracy": accuracy, "temperature": self.temperature()}

    # ------------------------------------------------------------------ evaluation
    @paddle.no_grad()
    def messages(self, speaker: Agent, x: np.ndarray) -> np.ndarray:
        """Greedy messages int64 [N, L] about objects ``x``, in chunks."""
        speaker.eval()
        out = [
            self.speak(speaker, x[i : i + 512], True)["symbols"].numpy()
            for i in range(0, len(x), 512)
        ]
        speaker.train()
        return np.concatenate(out)

    @paddle.no_grad()
    def accuracy(
        self,
        listener: Agent,
        msgs: np.ndarray,
        split: ObjectSplit,
        batch: dict,
        snr: float | None = None,
    ) -> float:
        """Share of objects whose greedy message ``listener`` gets right."""
        listener.eval()
        sym = listener.to_tensor(msgs)
        _, acc_t = self.outcome(listener, sym, split, batch, snr)
        w = self.stop_weights({"symbols": sym})
        listener.train()
        return float((w * acc_t).sum(1).mean())

    def eval_batch(self, name: str, split: ObjectSplit) -> dict[str, Any]:
        """The evaluated objects of a split and their fixed candidates."""
        n = min(len(split), self.cfg.eval_size)
        batch: dict[str, Any] = {"target": np.arange(n)}
        if self.cfg.game == "discrimination":
            rng = np.random.default_rng([self.seed, EVAL_STREAM, name == "test"])
            batch.update(_candidates(batch["target"], len(split), self.cfg.candidates, rng))
        batch["noise_seed"] = int(EVAL_STREAM + (name == "test"))
        return batch

    def evaluate(self) -> dict[str, float]:
        rng = capture_rng()
        splits = self.splits()
        batches = {k: self.eval_batch(k, s) for k, s in splits.items()}
        msgs = {
            sp.name: {k: self.messages(sp, s.x[batches[k]["target"]]) for k, s in splits.items()}
            for sp in self.speakers
        }
        acc = {
            k: np.array(
                [
                    [self.accuracy(li, msgs[sp.name][k], s, batches[k]) for li in self.listeners]
                    for sp in self.speakers
                ]
            )
            for k, s in splits.items()
        }  # [N, M] per split
        sizes = {k: len(b["target"]) for k, b in batches.items()}
        acc["all"] = sum(acc[k] * sizes[k] for k in splits) / sum(sizes.values())  # [N, M]
        if self.voice is not None:  # accuracy against SNR: the first pair, training objects
            sp, li = self.speakers[0], self.listeners[0]
            curve = [
                self.accuracy(li, msgs[sp.name]["train"], splits["train"], batches["train"], snr)
                for snr in self.cfg.eval_snrs
            ]
            self.snr_curve = [float(v) for v in curve]
        restore_rng(rng)
        out = {f"{k}_accuracy": float(acc[k].mean()) for k in splits}  # train, test, more
        # cross-play on every evaluated object: the held-out split alone (10 objects in the
        # default world) moves in steps of 0.1, coarser than the 0.05 the gap is judged by
        out.update(population.crossplay_metrics(acc["all"]))
        if "crossplay_gap" in out:
            out["crossplay_test_gap"] = population.crossplay_metrics(acc["test"])["crossplay_gap"]
        lang = [self.analyse(msgs[sp.name], batches) for sp in self.speakers]
        out.update({k: float(np.mean([d[k] for d in lang])) for k in lang[0]})
        if self.newcomer:
            out.update(self.newcomer)
        if self.voice is not None:
            out.update(
                {f"accuracy_snr_{s:g}": v for s, v in zip(self.cfg.eval_snrs, self.snr_curve)}
            )
        self.last = {"messages": msgs, "batches": batches, "crossplay": acc}
        return out

    def splits(self) -> dict[str, ObjectSplit]:
        """Every evaluated split by name: ``train``, ``test`` and the world's ``more``."""
        return {"train": self.world.train, "test": self.world.test, **self.world.more}

    def analyse(self, msgs: dict[str, np.ndarray], batches: dict[str, dict]) -> dict[str, float]:
        """Language measures of one speaker over (up to analysis_size) train + test objects."""
        c = self.cfg
        m = np.concatenate([msgs["train"], msgs["test"]])
        known = self.world.train.meanings is not None
        meanings = (
            np.concatenate(
                [
                    self.world.train.meanings[batches["train"]["target"]],
                    self.world.test.meanings[batches["test"]["target"]],
                ]
            )
            if known
            else None
        )
        keep = np.random.default_rng([self.seed, ANALYSIS_STREAM]).permutation(len(m))[
            : c.analysis_size
        ]
        keep.sort()
        eos = EOS if c.variable_length else None
        return analyse(None if meanings is None else meanings[keep], m[keep], c.vocab_size, eos)

    # ------------------------------------------------------------------ end of training
    def on_epoch_end(self, epoch: int) -> None:
        super().on_epoch_end(epoch)
        if epoch == self.epochs and self.cfg.newcomer_steps > 0 and not self.newcomer:
            self.newcomer, self.newcomer_curve = population.teach_newcomer(
                self,
                self.listeners[0],
                self.speakers,
                self.history,
                self.cfg.newcomer_steps,
                self.seed,
            )

    def chance_level(self) -> float | None:
        """1/K for discrimination among K candidates; for reconstruction, guessing every
        attribute: the product of 1/(its number of values); None when values are unknown."""
        if self.cfg.game == "discrimination":
            return 1.0 / self.cfg.candidates
        splits = [s.meanings for s in (self.world.train, self.world.test) if s.meanings is not None]
        if not splits:
            return None
        values = np.concatenate(splits).max(0) + 1  # [A] values per attribute
        return float(np.prod(1.0 / values))

    def arena_state(self) -> dict:
        return {
            "steps_done": self.steps_done,
            "baselines": [b.state() for b in self.baselines],
            "history": list(self.history),
            "newcomer": dict(self.newcomer),
            "newcomer_curve": list(self.newcomer_curve),
        }

    def load_arena_state(self, state: dict) -> None:
        self.steps_done = int(state["steps_done"])
        for b, s in zip(self.baselines, state["baselines"]):
            b.load(s)
        self.history = [float(v) for v in state["history"]]
        self.newcomer = dict(state.get("newcomer", {}))
        self.newcomer_curve = [float(v) for v in state.get("newcomer_curve", [])]

    def live_view(self) -> dict[str, Any]:
        """The live page's picture: the last evaluation's messages (a table per split)."""
        from .report import message_panels

        splits = {"train": self.world.train, "test": self.world.test}
        return {"panels": message_panels(self.last or {}, splits, self.speakers[0].name)}

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """messages.jsonl, and for populations the cross-play heat map and matrix."""
        from .report import write_artifacts

        if not self.last:
            self.evaluate()
        curve = getattr(self, "snr_curve", None)
        return write_artifacts(
            run_dir,
            self.last,
            self.splits(),
            [s.name for s in self.speakers],
            [li.name for li in self.listeners],
            self.history,
            self.newcomer_curve,
            list(zip(self.cfg.eval_snrs, curve)) if self.voice is not None and curve else (),
        )


def _candidates(target: np.ndarray, n: int, k: int, rng: np.random.Generator) -> dict[str, Any]:
    """K candidates per target [B, K] (distractors differ from the target) and its position."""
    b = len(target)
    distractors = (target[:, None] + rng.integers(1, n, size=(b, k - 1))) % n  # [B, K-1]
    position = rng.integers(k, size=b)
    at_target = np.arange(k)[None, :] == position[:, None]  # [B, K]
    cand = np.empty((b, k), np.int64)
    cand[at_target] = target
    cand[~at_target] = distractors.reshape(-1)  # row by row, in order
    return {"candidates": cand, "position": position}
