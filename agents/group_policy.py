"""GroupPolicy: the one policy every agent of a group acts with in arena=marl (parameter sharing).

An `paddlecraft.agents.Agent` (own scope, optimizer, device, seed) holding an observation
encoder (any encoder of the feature contract, ``encoder@agents.<group>.encoder=...``), an
actor head (categorical logits, or a Gaussian's mean with a learned log-std per action
dimension) and a critic MLP: on the agent's own observation (IPPO) or on every agent's
observation concatenated, plus the agent's one-hot index in its group (MAPPO's centralised
critic). Its sizes come from the environment: the arena calls `GroupPolicy.bind` before
the first step, and the saved ``agent.json`` records them, so ``Agent.load`` rebuilds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle
import paddle.nn.functional as F
from omegaconf import MISSING
from paddle import nn

from .base import Agent, AgentConfig
from .instantiate import to_plain
from .plug import constructor_params, image_inputs
from .settings import ConfigError

HEADS = ("auto", "categorical", "gaussian")


@dataclass
class GroupPolicyConfig(AgentConfig):
    """GroupPolicy settings (plus the `AgentConfig` ones: device, seed, lr, optimizer...)."""

    encoder: Any = MISSING  #: encoder config (conf/encoder/*): sized from the observation, headless
    #: the action head: auto (categorical for Discrete spaces, gaussian for Box), categorical
    #: or gaussian; a categorical head for a Box space is refused
    head: str = "auto"
    critic_hidden: int = 64  #: width of the critic's two hidden layers (ReLU)
    log_std_init: float = -0.5  #: the Gaussian head's initial log standard deviation
    #: the observation's shape (vector [d] or image [H, W, C]): set by the arena from the env
    obs_shape: Optional[list[int]] = None  # noqa: UP045
    #: Discrete: the number of actions; Box: the action dimension (set by the arena)
    num_actions: Optional[int] = None  # noqa: UP045
    action_low: Optional[list[float]] = None  #: Box bounds (set by the arena), else None  # noqa: UP045
    action_high: Optional[list[float]] = None  #: Box bounds (set by the arena)  # noqa: UP045
    obs_scale: float = 1.0  #: observations are multiplied by it (1/255 for uint8 images)
    critic_input: Optional[int] = None  #: the critic's input length (set by the arena)  # noqa: UP045
    #: the environment's agents that act with this policy (set by the arena)
    members: Optional[list[str]] = None  # noqa: UP045


class GroupPolicy(Agent):
    """One group's actor-critic; ``act`` works on ``[B, *obs_shape]`` batches.

    Its parameters exist once, whatever the number of agents in the group: every agent's
    observation goes through the same weights (parameter sharing, as BenchMARL's
    ``share_params``); give an agent its own policy by giving it its own group.
    """

    Config = GroupPolicyConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        if self.cfg.head not in HEADS:
            raise ConfigError(f"agents.{name}.head={self.cfg.head!r}: choose one of {HEADS}")
        self.built_ = False
        if self.cfg.obs_shape is not None and self.cfg.num_actions is not None:
            self._build()

    # ------------------------------------------------------------------ building
    def bind(
        self, obs_space: Any, act_space: Any, critic_input: int, members: list[str] | None = None
    ) -> None:
        """Size the policy for a group's spaces (gymnasium ``Box`` / ``Discrete``) and build it.

        A policy built already (loaded, or resumed) must match them. A continuous (Box)
        action space with ``head=categorical`` is refused, naming the settings.
        """
        discrete = hasattr(act_space, "n")
        if not discrete and self.cfg.head == "categorical":
            raise ConfigError(
                f"agents.{self.name}.head=categorical, but the group's actions are continuous "
                f"({act_space}); use head=gaussian (or auto), or set continuous_actions=false in "
                "arena.env.kwargs"
            )
        if discrete and self.cfg.head == "gaussian":
            raise ConfigError(
                f"agents.{self.name}.head=gaussian, but the group's actions are discrete "
                f"({act_space}); use head=categorical (or auto)"
            )
        shape = [int(s) for s in obs_space.shape]
        sizes = {
            "obs_shape": shape,
            "num_actions": int(act_space.n) if discrete else int(np.prod(act_space.shape)),
            "action_low": None if discrete else [float(v) for v in np.ravel(act_space.low)],
            "action_high": None if discrete else [float(v) for v in np.ravel(act_space.high)],
            "obs_scale": 1.0 / 255 if np.dtype(obs_space.dtype) == np.uint8 else 1.0,
            "critic_input": int(critic_input),
            "members": None if members is None else [str(m) for m in members],
        }
        if self.built_:
            saved = {k: getattr(self.cfg, k) for k in sizes}
            if saved != sizes:
                raise ConfigError(
                    f"agents.{self.name} was built for {saved}, but the environment gives {sizes}"
                )
            return
        for k, v in sizes.items():
            setattr(self.cfg, k, v)
            self.config[k] = v
        self._build()

    def _build(self) -> None:
        c = self.cfg
        self.obs_shape = tuple(int(s) for s in c.obs_shape)
        self.num_actions = int(c.num_actions)
        self.continuous = c.action_low is not None
        if self.continuous and c.head == "categorical":
            raise ConfigError(f"agents.{self.name}.head=categorical cannot act in a Box space")
        image = len(self.obs_shape) == 3
        if len(self.obs_shape) not in (1, 3):
            raise ConfigError(
                f"agents.{self.name}: observations of shape {list(self.obs_shape)}; a group "
                "policy reads vectors [d] or images [H, W, C]"
            )
        inputs = (
            image_inputs(self.obs_shape, channels_last=True)
            if image
            else {"input_size": self.obs_shape[0]}
        )
        setting = f"agents.{self.name}.encoder"
        target = to_plain(c.encoder).get("_target_") if c.encoder is not None else None
        params = constructor_params(target)
        if not image and "input_size" not in params and {"in_channels", "image_size"} & params:
            raise ConfigError(
                f"{setting}: {str(target).rsplit('.', 1)[-1]} reads images, but the group's "
                f"observations are vectors of {self.obs_shape[0]}; choose a vector encoder, "
                f"e.g. encoder@{setting}=mlp"
            )
        with self.seeded():
            self.encoder = self.make_encoder(c.encoder, inputs=inputs, headless=True, features=True)
            first = next(iter(self.encoder.input_specs.values()))
            self._channels_first = len(first.shape) == 3
            if self._channels_first and not image:
                raise ConfigError(
                    f"{setting}: {type(self.encoder).__name__} reads images, but the group's "
                    f"observations are vectors of {self.obs_shape[0]}; choose a vector "
                    f"encoder, e.g. encoder@{setting}=mlp"
                )
            feat, n, width = self.encoder.feature_dim, self.num_actions, int(c.critic_hidden)
            self.actor_head = self.make_head("actor_head", lambda: nn.Linear(feat, n))
            with paddle.no_grad():  # a near-uniform (or near-zero-mean) first policy
                self.actor_head.weight.set_value(self.actor_head.weight * 0.01)
                self.actor_head.bias.set_value(paddle.zeros_like(self.actor_head.bias))
            if self.continuous:
                self.log_std = self.make_head("log_std", lambda: nn.Linear(1, n, bias_attr=False))
                with paddle.no_grad():
                    self.log_std.weight.set_value(paddle.full([1, n], float(c.log_std_init)))
            k = int(c.critic_input)
            self.critic = self.make_head(
                "critic",
                lambda: nn.Sequential(
                    nn.Linear(k, width),
                    nn.ReLU(),
                    nn.Linear(width, width),
                    nn.ReLU(),
                    nn.Linear(width, 1),
                ),  # fmt: skip
            )
        self.built_ = True
        self.finish()

    # ------------------------------------------------------------------ forward
    def _prepare(self, obs: Any) -> paddle.Tensor:
        x = obs if isinstance(obs, paddle.Tensor) else self.to_tensor(np.asarray(obs, np.float32))
        x = x.astype("float32") * float(self.cfg.obs_scale)
        if self._channels_first:
            return x.transpose([0, 3, 1, 2])  # [B, H, W, C] -> [B, C, H, W]
        return x.flatten(1)  # [B, prod(obs_shape)]

    def actor(self, obs: Any) -> paddle.Tensor:
        """Logits ``[B, A]`` (categorical) or the Gaussian's mean ``[B, dim]``."""
        h = self.encoder.forward_all(self._prepare(obs))["pooled"]  # [B, feature_dim]
        return self.actor_head(h)

    def value(self, critic_in: Any) -> paddle.Tensor:
        """The critic's (normalised) value ``[B]`` for inputs ``[B, critic_input]``."""
        x = critic_in if isinstance(critic_in, paddle.Tensor) else self.to_tensor(critic_in)
        return self.critic(x.astype("float32")).squeeze(-1)

    def std(self) -> paddle.Tensor:
        """The Gaussian's standard deviation ``[dim]``."""
        return paddle.exp(self.log_std.weight[0])

    def log_prob_entropy(
        self, out: paddle.Tensor, actions: paddle.Tensor
    ) -> tuple[paddle.Tensor, paddle.Tensor]:
        """``(log pi(a) [B], entropy [B])`` for the actor's output ``out`` and actions."""
        if self.continuous:
            log_std = self.log_std.weight[0]  # [dim]
            z = (actions - out) / paddle.exp(log_std)
            logp = (-0.5 * z * z - log_std - 0.5 * float(np.log(2 * np.pi))).sum(-1)
            ent = (log_std + 0.5 * float(np.log(2 * np.pi * np.e))).sum() * paddle.ones_like(logp)
            return logp, ent
        logp_all = F.log_softmax(out, axis=-1)  # [B, A]
        picked = paddle.take_along_axis(logp_all, actions.astype("int64").unsqueeze(-1), axis=-1)
        ent = -(paddle.exp(logp_all) * logp_all).sum(-1)
        return picked.squeeze(-1), ent

    @paddle.no_grad()
    def sample(
        self, obs: np.ndarray, rng: np.random.Generator, greedy: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(actions, log pi(actions))`` for ``obs [B, *obs_shape]``; the draws come from
        ``rng`` (NumPy), so a run's actions are a function of its random streams."""
        out = self.actor(obs).numpy().astype(np.float64)  # [B, A] or [B, dim]
        if self.continuous:
            std = self.std().numpy().astype(np.float64)
            act = out if greedy else out + std * rng.standard_normal(out.shape)
            z = (act - out) / std
            logp = (-0.5 * z * z - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
            return act.astype(np.float32), logp.astype(np.float32)
        logp_all = out - out.max(-1, keepdims=True)
        logp_all -= np.log(np.exp(logp_all).sum(-1, keepdims=True))
        if greedy:
            act = logp_all.argmax(-1)
        else:  # inverse CDF with one uniform per row
            cdf = np.cumsum(np.exp(logp_all), -1)
            u = rng.random(len(cdf))[:, None] * cdf[:, -1:]
            act = np.minimum((cdf < u).sum(-1), self.num_actions - 1)
        return act.astype(np.int64), logp_all[np.arange(len(act)), act].astype(np.float32)

    def act(self, obs: np.ndarray, greedy: bool = True, seed: int = 0) -> np.ndarray:
        """Actions for a batch of observations ``[B, *obs_shape]`` (greedy: the most likely
        action, or the Gaussian's mean clipped into the bounds)."""
        act, _ = self.sample(obs, np.random.default_rng(seed), greedy=greedy)
        if self.continuous:
            act = np.clip(act, self.cfg.action_low, self.cfg.action_high).astype(np.float32)
        return act
