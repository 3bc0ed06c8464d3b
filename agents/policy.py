"""Policy: an actor-critic agent for board games (an encoder, a policy head, a value head)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle
import paddle.nn.functional as F
from omegaconf import MISSING
from paddle import nn

from paddlecraft.compat import drop_removed_policy, policy_layers_0_1
from paddlecraft.paddle_private import is_batch_norm

from .base import Agent, AgentConfig
from .plug import image_inputs
from .settings import ConfigError

#: added to the logits of illegal actions (finite, so masked terms never produce NaN)
MASK_PENALTY = 1e9
#: the search's move rules (``paddlecraft.arenas.games.search.MOVE_RULES``; agents do not
#: import the arenas): what ``search_move`` accepts
SEARCH_MOVES = ("visits", "lcb")


@dataclass
class PolicyConfig(AgentConfig):
    """paddlecraft.agents.Policy settings."""

    encoder: Any = MISSING  #: encoder config (conf/encoder/*); sized from obs_shape, headless
    #: [rows, cols, planes]; from the game in a run (``${craft.from_data:obs_shape}``)
    obs_shape: Optional[list[int]] = field(default_factory=lambda: [3, 3, 2])  # noqa: UP045
    num_actions: Optional[int] = 9  #: size of the action space; from the game in a run  # noqa: UP045
    #: per-ply discount of what the value head predicts (1: the game's outcome). Below 1,
    #: search updates train it on ``+-value_discount ** plies-to-the-end`` and every search
    #: with this policy backs values up with the same discount, so a sooner win and a later
    #: loss are worth more. Saved with the policy: a loaded one searches as it was trained.
    value_discount: float = 1.0
    #: every search with this policy scores the positions the rules decide within two
    #: plies exactly (the mover has a winning move; the opponent has two it cannot both
    #: block) and searches no further below them (`MCTS` ``tactics``). Saved with the policy.
    search_tactics: bool = False
    #: every search with this policy backs proven values up (MCTS-Solver: `MCTS`
    #: ``proofs``) and, where it proves the root, plays and trains toward the moves it
    #: proved best. Saved with the policy.
    search_proofs: bool = False
    #: how a player that searches with this policy picks the move it plays (evaluation,
    #: tournaments, human games; training games still sample from the visits): ``visits``
    #: the most visited move, ``lcb`` the best lower bound ``Q - 1 / sqrt(N)`` among the
    #: visited moves (`played_moves`). Saved with the policy.
    search_move: str = "visits"
    #: an unvisited move's value in every search with this policy (first-play urgency):
    #: None 0 (a draw, AlphaZero's), a number ``r >= 0`` Leela Chess Zero's reduced parent
    #: value, the node's mean over its visited moves minus ``r * sqrt(their prior)``
    #: (`puct`). Saved with the policy.
    search_fpu: Optional[float] = None  # noqa: UP045


class Policy(Agent):
    """Plays turn-based board games from PettingZoo-style planes with an action mask.

    The encoder (any encoder of the feature contract, built headless and sized from
    ``obs_shape``) reads the board planes ``[B, rows, cols, 2]`` (mover's stones,
    opponent's stones): channels-first ``[B, 2, rows, cols]`` when its input is an image,
    flattened otherwise; its ``pooled`` output is the feature vector. Two linear heads follow: ``policy_head``
    (action logits) and ``value_head`` (tanh, the expected outcome in [-1, 1] for the
    mover). Illegal actions get ``logit - 1e9``; log-probabilities come from
    ``log_softmax`` of the masked logits, never from ``paddle.distribution.Categorical``
    (which normalises by the sum, see PADDLE_NOTES). BatchNorm layers, if the encoder
    has any, always use their running statistics so that the policy that collected a
    batch and the one that is updated compute the same function (PPO's ratio needs that).

    Settings: `PolicyConfig` (plus the `AgentConfig` ones:
    device, seed, lr, optimizer...). ``policy.act(observations, action_masks,
    greedy=True)`` works on batches (or one board) and always returns legal actions;
    ``policy.priors_and_values`` is a search's evaluator; ``Agent.load(dir)`` restores a
    saved policy for play outside any arena.
    """

    Config = PolicyConfig

    @classmethod
    def upgrade_saved(
        cls, config: dict[str, Any], shapes: Mapping[str, tuple[int, ...]], name: str
    ) -> dict[str, str | None]:
        """Policies saved before the feature contract (PaddleCraft 0.1) load unchanged
        (`paddlecraft.compat.policy_layers_0_1`); settings removed since load where they
        hold the value the code now has, else are refused (`paddlecraft.compat.drop_removed`)."""
        drop_removed_policy(config, f"agents.{name}.")
        return policy_layers_0_1(config, shapes, name)

    @classmethod
    def upgrade_saved_settings(cls, config: dict[str, Any], where: str) -> None:
        """A saved run's ``agents.<name>`` settings brought up to date
        (`paddlecraft.compat.drop_removed_policy`)."""
        drop_removed_policy(config, where)

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        for key in ("obs_shape", "num_actions"):
            if getattr(self.cfg, key) is None:
                raise ConfigError(
                    f"agents.{name}.{key} is not set: a run fills it from the game "
                    "(data.loader: GameSpec); in Python pass it, e.g. "
                    "Policy(..., obs_shape=list(spec.obs_shape), num_actions=spec.num_actions)"
                )
        obs_shape = tuple(int(s) for s in self.cfg.obs_shape)
        num_actions, encoder = int(self.cfg.num_actions), self.cfg.encoder
        if len(obs_shape) != 3:
            raise ConfigError(
                f"agents.{name}.obs_shape must be [rows, cols, planes], got {obs_shape}"
            )
        self.obs_shape, self.num_actions = obs_shape, int(num_actions)
        check_policy_settings(name, self.cfg)
        self.value_discount = float(self.cfg.value_discount)
        with self.seeded():
            self.encoder = self.make_encoder(
                encoder,
                inputs=image_inputs(obs_shape, channels_last=True),
                headless=True,
                features=True,
            )
            feat = self.encoder.feature_dim
            first = next(iter(self.encoder.input_specs.values()))
            # image encoders read [B, planes, rows, cols]; flat ones [B, rows * cols * planes]
            self._channels_first = len(first.shape) == 3
            self.policy_head = self.make_head("policy_head", lambda: nn.Linear(feat, num_actions))
            self.value_head = self.make_head("value_head", lambda: nn.Linear(feat, 1))
            with paddle.no_grad():  # near-uniform first policy: small policy-head weights
                self.policy_head.weight.set_value(self.policy_head.weight * 0.01)
                self.policy_head.bias.set_value(paddle.zeros_like(self.policy_head.bias))
        self.finish()

    # ------------------------------------------------------------------ modes
    def train(self, mode: bool = True) -> Policy:  # type: ignore[override]
        super().train(mode)
        if mode:
            for layer in self.sublayers():
                if is_batch_norm(layer):
                    layer.eval()
        return self

    # ------------------------------------------------------------------ forward
    def _prepare(self, obs: Any) -> paddle.Tensor:
        # numpy in, or a tensor (a static-graph Value when exported: no numpy calls then)
        is_array = isinstance(obs, (np.ndarray, list, tuple))
        x = self.to_tensor(np.asarray(obs, np.float32)) if is_array else obs
        if x.dtype != paddle.float32:
            x = x.astype("float32")
        if self._channels_first:
            return x.transpose([0, 3, 1, 2])  # [B, rows, cols, 2] -> [B, 2, rows, cols]
        return x.flatten(1)  # [B, rows * cols * 2]

    def forward(self, obs: Any) -> tuple[paddle.Tensor, paddle.Tensor]:
        """``(logits [B, A], value [B])`` for planes ``[B, rows, cols, 2]``."""
        x = self._prepare(obs)
        h = self.encoder.forward_all(x)["pooled"]  # [B, feature_dim]
        return self.policy_head(h), paddle.tanh(self.value_head(h)).squeeze(-1)  # [B, A], [B]

    def masked_log_probs(self, logits: paddle.Tensor, mask: Any) -> paddle.Tensor:
        """``log_softmax`` of logits with illegal actions pushed to ~-1e9."""
        m = mask if isinstance(mask, paddle.Tensor) else self.to_tensor(np.asarray(mask, bool))
        return F.log_softmax(logits + (m.astype(logits.dtype) - 1.0) * MASK_PENALTY, axis=-1)

    def evaluate_actions(
        self, obs: Any, mask: Any, actions: Any
    ) -> tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor]:
        """``(log_prob [B], entropy [B], value [B])`` of ``actions`` (for PPO / A2C losses)."""
        logits, value = self(obs)
        logp_all = self.masked_log_probs(logits, mask)
        a = actions if isinstance(actions, paddle.Tensor) else self.to_tensor(actions, "int64")
        logp = paddle.take_along_axis(logp_all, a.reshape([-1, 1]), axis=1).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp, entropy, value

    def export_signature(self) -> tuple[dict[str, tuple[tuple[int, ...], str]], list[str]]:
        """``({input: (shape without batch, dtype)}, [output names])`` for `paddlecraft.agents.export`."""
        return {"obs": (self.obs_shape, "float32")}, ["logits", "value"]

    # ------------------------------------------------------------------ acting
    @paddle.no_grad()
    def act(
        self,
        observations: Any,
        action_masks: Any,
        greedy: bool = True,
        rng: Any = None,
        return_info: bool = False,
    ) -> Any:
        """Legal actions for a batch of boards (or one board).

        Args:
            observations: planes ``[B, rows, cols, 2]`` (or ``[rows, cols, 2]``).
            action_masks: ``[B, num_actions]`` (or ``[num_actions]``), nonzero = legal.
            greedy: the most probable legal action; else sample from the masked policy.
            rng: ``np.random.Generator`` or the ``np.random`` module for sampling
                (default: numpy's global stream, which checkpoints capture).
            return_info: also return ``(log_prob, value)`` numpy arrays.

        Returns int64 actions ``[B]`` (an int for one board), each legal.
        """
        obs = np.asarray(observations)
        masks = np.asarray(action_masks).astype(bool)
        single = obs.ndim == len(self.obs_shape)
        if single:
            obs, masks = obs[None], masks[None]
        if obs.shape[1:] != self.obs_shape or masks.shape[1:] != (self.num_actions,):
            raise ValueError(
                f"Policy({self.name!r}).act: expected observations [B, {', '.join(map(str, self.obs_shape))}] "
                f"and masks [B, {self.num_actions}], got {list(obs.shape)} and {list(masks.shape)}"
            )
        if len(obs) and not masks.any(axis=1).all():
            raise ValueError(f"Policy({self.name!r}).act: a board has no legal action")
        was_training = self.training
        if was_training:  # eval() walks every sublayer: only when there is a mode to change
            self.eval()
        logits, value = self(obs) if len(obs) else (None, None)
        if was_training:
            self.train()
        if logits is None:
            out = np.zeros(0, np.int64)
            info = (np.zeros(0, np.float32), np.zeros(0, np.float32))
        else:
            logp = self.masked_log_probs(logits, masks).numpy().astype(np.float64)
            if greedy:
                out = np.where(masks, logp, -np.inf).argmax(axis=1).astype(np.int64)
            else:
                out = sample_from_log_probs(logp, masks, rng if rng is not None else np.random)
            info = (logp[np.arange(len(out)), out].astype(np.float32), value.numpy())
        if single:
            out = int(out[0])
        return (out, *info) if return_info else out

    @paddle.no_grad()
    def priors_and_values(
        self, observations: Any, action_masks: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(priors float64 [B, A], values float64 [B])`` for a search (an ``Evaluator``).

        Priors are the masked policy's probabilities (0 on illegal moves); values are the
        value head's expected outcome in [-1, 1] for the player to move.
        """
        was_training = self.training
        if was_training:  # eval() walks every sublayer: only when there is a mode to change
            self.eval()
        logits, value = self(np.asarray(observations))
        if was_training:
            self.train()
        logp = self.masked_log_probs(logits, np.asarray(action_masks, bool))
        p = np.exp(logp.numpy().astype(np.float64))
        return np.where(np.asarray(action_masks, bool), p, 0.0), value.numpy().astype(np.float64)

    def frozen_evaluator(self) -> Callable[[Any, Any], tuple[np.ndarray, ...]]:
        """A search's evaluator with the weights as they are now, for a search that runs
        while they stay so (a collection, an evaluation): `priors_and_values` over a NumPy copy of the network
        where the encoder has one (``numpy_forward``: the MLP families, `ImageCNNEncoder`)
        and the policy runs on the CPU without mixed precision: the same priors and values
        to float32 rounding, in less time (``python bench/search_bench.py``,
        ``frozen_speedup``). Otherwise the live Paddle evaluator itself."""
        copy = getattr(self.encoder, "numpy_forward", None)
        on_cpu = self.device == "cpu" and not self.amp.enabled
        trunk = copy() if copy is not None and on_cpu else None  # the encoder's input -> [B, F]
        if trunk is None:
            return self.priors_and_values
        return numpy_evaluator(self, trunk, self._channels_first)

    def search_settings(self, frozen: bool = False) -> dict[str, Any]:
        """What a search with this policy uses: ``{"evaluate", "discount", "tactics",
        "proofs", "fpu_reduction"}`` (keyword arguments of `PUCTSearch`), as it was trained. ``frozen``: the search runs while the weights
        stay as they are now (`frozen_evaluator`; a cached search assumes as much)."""
        evaluate = self.frozen_evaluator() if frozen else self.priors_and_values
        fpu = self.cfg.search_fpu
        return {
            "evaluate": evaluate,
            "discount": self.value_discount,
            "tactics": bool(self.cfg.search_tactics),
            "proofs": bool(self.cfg.search_proofs),
            "fpu_reduction": None if fpu is None else float(fpu),
        }


def sample_from_log_probs(logp: np.ndarray, masks: np.ndarray, rng: Any) -> np.ndarray:
    """Sample one action per row from log-probabilities ``[B, A]``, never an illegal one."""
    p = np.where(masks, np.exp(logp - logp.max(axis=1, keepdims=True)), 0.0)
    cdf = np.cumsum(p, axis=1)
    u = rng.random(len(p))[:, None] * cdf[:, -1:]
    out = (cdf <= u).sum(axis=1)  # first index whose cdf exceeds u
    out = np.minimum(out, p.shape[1] - 1)
    bad = ~masks[np.arange(len(out)), out]
    if bad.any():  # u landed on a rounding edge: take the last legal action instead
        last = p.shape[1] - 1 - np.argmax(masks[:, ::-1], axis=1)
        out[bad] = last[bad]
    return out.astype(np.int64)


def check_policy_settings(name: str, cfg: Any) -> None:
    """Raise a `ConfigError` for the first setting of ``cfg`` (a `PolicyConfig`) out of its
    range, naming it, what it expects and an example, before any layer is built."""
    if not 0 < float(cfg.value_discount) <= 1:
        raise ConfigError(
            f"agents.{name}.value_discount={cfg.value_discount!r}: must be in (0, 1] "
            f"(1: the game's outcome undiscounted); e.g. agents.{name}.value_discount=0.95"
        )
    if cfg.search_move not in SEARCH_MOVES:
        raise ConfigError(
            f"agents.{name}.search_move={cfg.search_move!r}: expected one of "
            f"{', '.join(SEARCH_MOVES)}; e.g. agents.{name}.search_move=lcb"
        )
    if cfg.search_fpu is not None and not float(cfg.search_fpu) >= 0:
        raise ConfigError(
            f"agents.{name}.search_fpu={cfg.search_fpu!r}: must be null (an unvisited "
            f"move is worth 0) or >= 0 (the node's mean minus that reduction); e.g. "
            f"agents.{name}.search_fpu=0"
        )


def numpy_evaluator(
    policy: Policy, trunk: Callable[[np.ndarray], np.ndarray], channels_first: bool
) -> Callable[[Any, Any], tuple[np.ndarray, np.ndarray]]:
    """``policy``'s search evaluator over ``trunk`` (its encoder's ``numpy_forward``: the
    encoder's input, ``[B, planes, rows, cols]`` if ``channels_first`` else flattened ->
    features ``[B, F]``) and NumPy copies of its heads: ``(priors float64 [B, A], values
    float64 [B])``, as `Policy.priors_and_values` to float32 rounding. Illegal moves'
    logits get ``- MASK_PENALTY``, as in `Policy.masked_log_probs`."""
    pw, pb = (np.array(t.numpy()) for t in (policy.policy_head.weight, policy.policy_head.bias))
    vw, vb = (np.array(t.numpy()) for t in (policy.value_head.weight, policy.value_head.bias))
    penalty = np.float32(MASK_PENALTY)

    def evaluate(observations: Any, action_masks: Any) -> tuple[np.ndarray, np.ndarray]:
        masks = np.asarray(action_masks, bool)  # [B, A]
        x = np.asarray(observations, np.float32)  # [B, rows, cols, planes]; `_prepare`'s
        h = trunk(x.transpose(0, 3, 1, 2) if channels_first else x.reshape(len(x), -1))  # [B, F]
        logits = h @ pw + pb + (masks.astype(np.float32) - 1.0) * penalty
        z = logits - logits.max(axis=1, keepdims=True)  # log_softmax, as in Paddle's
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))  # [B, A] float32
        priors = np.where(masks, np.exp(logp.astype(np.float64)), 0.0)
        return priors, np.tanh(h @ vw + vb)[:, 0].astype(np.float64)  # [B, A], [B]

    return evaluate
