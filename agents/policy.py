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

from paddlecraft.compat import policy_layers_0_1
from paddlecraft.paddle_private import is_batch_norm

from .base import Agent, AgentConfig
from .plug import image_inputs
from .policy_copy import numpy_evaluator
from .policy_settings import SEARCH_MOVES, check_policy_settings  # noqa: F401 (re-exported)
from .settings import ConfigError
from .value_head import expected_value

#: added to the logits of illegal actions (finite, so masked terms never produce NaN)
MASK_PENALTY = 1e9
#: the ownership head's classes per cell, in order: empty, the mover's, the opponent's
OWNERSHIP_CLASSES = 3


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
    #: a draw's worth to the first player, its negative to the second (Leela's draw score,
    #: contempt; 0: AlphaZero's), in [-1, 1]: the value targets of drawn games and every
    #: search with this policy (`MCTS` ``draw_score``) score a draw so. Saved with the policy.
    draw_score: float = 0.0
    #: the value head as a classifier (HL-Gauss, `paddlecraft.agents.value_head`): 0 a tanh
    #: output trained by MSE; N >= 2 logits over N bins on [-1, 1] whose softmax's mean is
    #: the value, trained (search updates) by cross-entropy to a Gaussian of ``value_sigma``
    #: bin widths around the target. Searches read the mean either way. Saved with the policy.
    value_bins: int = 0
    value_sigma: float = 0.75
    #: the value head's own hidden layer (``value_hidden``, ReLU), as AlphaZero's value head
    #: has one (256 units) between the shared features and the value: N > 0 its width, 0
    #: none (the value read linearly from the features the policy head reads). Off: the
    #: policy has no such layer (its parameters unchanged). Saved with the policy.
    value_hidden: int = 0
    #: Leela Chess Zero's moves-left head: a third output (``moves_left_head``, sigmoid x
    #: rows x cols) predicting the plies until the game ends; search updates train it on
    #: the self-play records. Off: the policy has no such layer (its parameters unchanged).
    moves_left: bool = False
    #: the moves-left utility of every search with this policy (needs ``moves_left``; 0:
    #: off): a visited move's Q gains ``-Q * clip(weight * (its plies left - the node's),
    #: +-0.1)``, so among winning moves the quicker and among losing ones the slower is
    #: searched more (`MCTS`). Saved with the policy.
    moves_left_weight: float = 0.0
    #: KataGo's auxiliary opponent-policy target: a fourth output (``opponent_policy_head``,
    #: logits over the actions) predicting the opponent's search distribution at its reply;
    #: search updates train it (``arena.update.opponent_policy_coef``). Only the training
    #: reads it, never a search. Off: the policy has no such layer (its parameters unchanged).
    opponent_policy: bool = False
    #: KataGo's ownership target, as Connect Four has it: a fifth output (``ownership_head``,
    #: 3 logits per cell: empty, the mover's, the opponent's) predicting who holds each
    #: cell when the game ends (which side fills which square: the game's zugzwang);
    #: search updates train it (``arena.update.ownership_coef``). Only the training reads
    #: it, never a search. Off: the policy has no such layer (its parameters unchanged).
    ownership: bool = False
    #: KataGo's auxiliary soft policy target: a sixth output (``soft_policy_head``, logits
    #: over the actions) predicting the visit distribution raised to the power
    #: ``arena.update.soft_policy_power`` and renormalised, which tells the low-prior moves
    #: apart; search updates train it (``arena.update.soft_policy_coef``). Only the training
    #: reads it, never a search. Off: the policy has no such layer (its parameters unchanged).
    soft_policy: bool = False
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
    #: a player that searches with this policy (evaluation, tournaments, human games)
    #: evaluates each position with its left-right mirror image and takes the mean of the
    #: two (`mirror_averaged`; twice the network's work per simulation); training searches
    #: do not. Saved with the policy.
    search_mirror: bool = False
    #: an unvisited move's value in every search with this policy (first-play urgency):
    #: None 0 (a draw, AlphaZero's), a number ``r >= 0`` Leela Chess Zero's reduced parent
    #: value, the node's mean over its visited moves minus ``r * sqrt(their prior)``
    #: (`puct`). Saved with the policy.
    search_fpu: Optional[float] = None  # noqa: UP045
    #: a player that searches with this policy (evaluation, tournaments, human games)
    #: takes the network's priors to the power ``1 / t``, renormalised (Leela Chess Zero's
    #: policy softmax temperature, `prior_tempered`): above 1 the search's first visits
    #: spread over more moves. Training searches use the priors as they are. Saved with
    #: the policy.
    search_policy_temperature: float = 1.0


class Policy(Agent):
    """Plays turn-based board games from PettingZoo-style planes with an action mask.

    The encoder (any encoder of the feature contract, built headless and sized from
    ``obs_shape``) reads the board planes ``[B, rows, cols, 2]`` (mover's stones,
    opponent's stones): channels-first ``[B, 2, rows, cols]`` when its input is an image,
    flattened otherwise; its ``pooled`` output is the feature vector. Two linear heads follow: ``policy_head``
    (action logits) and ``value_head`` (tanh, the expected outcome in [-1, 1] for the
    mover; with ``value_bins`` logits over bins on [-1, 1], the value their softmax's
    mean; with ``value_hidden`` it reads a ReLU layer of its own, AlphaZero's value head). Illegal actions get ``logit - 1e9``; log-probabilities come from
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
        (`paddlecraft.compat.policy_layers_0_1`)."""
        return policy_layers_0_1(config, shapes, name)

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
        self.draw_score = float(self.cfg.draw_score)
        self.value_bins, self.value_sigma = int(self.cfg.value_bins), float(self.cfg.value_sigma)
        self.value_hidden_size = int(self.cfg.value_hidden)
        self.moves_left = bool(self.cfg.moves_left)
        self.moves_left_weight = float(self.cfg.moves_left_weight)
        #: the most plies a game can last (a full board): the moves-left head's range
        self.max_plies = obs_shape[0] * obs_shape[1]
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
            bins = max(self.value_bins, 1)  # [feat or hidden] -> [1] (tanh) or [bins] (logits)
            value_in = self.value_hidden_size or feat
            self.value_head = self.make_head("value_head", lambda: nn.Linear(value_in, bins))
            if self.moves_left:  # made last: the other layers' initial weights stay the same
                self.moves_left_head = self.make_head("moves_left_head", lambda: nn.Linear(feat, 1))
            self.opponent_policy = bool(self.cfg.opponent_policy)
            if self.opponent_policy:  # made last, for the same reason
                self.opponent_policy_head = self.make_head(
                    "opponent_policy_head", lambda: nn.Linear(feat, num_actions)
                )
            self.ownership = bool(self.cfg.ownership)
            if self.ownership:  # made last, for the same reason; [feat] -> [cells * 3]
                out = obs_shape[0] * obs_shape[1] * OWNERSHIP_CLASSES
                self.ownership_head = self.make_head("ownership_head", lambda: nn.Linear(feat, out))
            self.soft_policy = bool(self.cfg.soft_policy)
            if self.soft_policy:  # made last, for the same reason
                self.soft_policy_head = self.make_head(
                    "soft_policy_head", lambda: nn.Linear(feat, num_actions)
                )
            if self.value_hidden_size:  # made last, for the same reason; [feat] -> [hidden]
                size = self.value_hidden_size
                self.value_hidden = self.make_head("value_hidden", lambda: nn.Linear(feat, size))
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
        logits, value, _ = self.forward_heads(obs, moves_left=False)
        return logits, value

    def forward_heads(
        self, obs: Any, moves_left: bool = True
    ) -> tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor | None]:
        """``(logits [B, A], value [B], plies left [B])`` (the last ``None`` without the
        moves-left head, or with ``moves_left=False``)."""
        out = self.heads(obs, moves_left=moves_left, opponent=False, ownership=False, soft=False)
        return out["logits"], out["value"], out.get("moves_left")

    def heads(
        self,
        obs: Any,
        moves_left: bool = True,
        opponent: bool = True,
        ownership: bool = True,
        soft: bool = True,
    ) -> dict[str, Any]:
        """Every head's output on one pass of the trunk: ``logits [B, A]``, ``value [B]``,
        and where the policy has those heads (and they are asked for) ``moves_left [B]``
        (plies left), ``opponent_logits [B, A]`` (the opponent's reply, unmasked),
        ``ownership_logits [B, rows, cols, 3]`` (each cell at the game's end: empty, the
        mover's, the opponent's) and ``soft_logits [B, A]`` (the flattened visits)."""
        x = self._prepare(obs)
        h = self.encoder.forward_all(x)["pooled"]  # [B, feature_dim]
        out = {"logits": self.policy_head(h)}  # [B, A]
        hv = F.relu(self.value_hidden(h)) if self.value_hidden_size else h  # [B, hidden or F]
        if self.value_bins:  # [B, bins] -> the softmax's mean [B]
            out["value_logits"] = self.value_head(hv)
            out["value"] = expected_value(out["value_logits"])
        else:
            out["value"] = paddle.tanh(self.value_head(hv)).squeeze(-1)  # [B]
        if moves_left and self.moves_left:
            out["moves_left"] = F.sigmoid(self.moves_left_head(h)).squeeze(-1) * float(
                self.max_plies
            )  # [B]
        if opponent and self.opponent_policy:
            out["opponent_logits"] = self.opponent_policy_head(h)  # [B, A]
        if ownership and self.ownership:  # [B, rows, cols, 3]
            shape = [-1, self.obs_shape[0], self.obs_shape[1], OWNERSHIP_CLASSES]
            out["ownership_logits"] = self.ownership_head(h).reshape(shape)
        if soft and self.soft_policy:
            out["soft_logits"] = self.soft_policy_head(h)  # [B, A]
        return out

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

    @paddle.no_grad()
    def priors_values_and_moves_left(
        self, observations: Any, action_masks: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`priors_and_values` and the moves-left head's plies left ``float64 [B]``
        (an ``Evaluator`` for a search with the moves-left utility)."""
        if not self.moves_left:
            raise ValueError(f"Policy({self.name!r}) has no moves-left head (moves_left=false)")
        was_training = self.training
        if was_training:
            self.eval()
        logits, value, plies = self.forward_heads(np.asarray(observations))
        if was_training:
            self.train()
        masks = np.asarray(action_masks, bool)
        p = np.exp(self.masked_log_probs(logits, masks).numpy().astype(np.float64))
        v, m = value.numpy().astype(np.float64), plies.numpy().astype(np.float64)
        return np.where(masks, p, 0.0), v, m

    def frozen_evaluator(self) -> Callable[[Any, Any], tuple[np.ndarray, ...]]:
        """A search's evaluator with the weights as they are now, for a search that runs
        while they stay so (a collection, an evaluation): `priors_and_values` (with the
        moves-left head, `priors_values_and_moves_left`) over a NumPy copy of the network
        where the encoder has one (``numpy_forward``: the MLP families, `ImageCNNEncoder`)
        and the policy runs on the CPU without mixed precision: the same priors and values
        to float32 rounding, in less time (``python bench/search_bench.py``,
        ``frozen_speedup``). Otherwise the live Paddle evaluator itself."""
        live = self.priors_values_and_moves_left if self.moves_left else self.priors_and_values
        copy = getattr(self.encoder, "numpy_forward", None)
        on_cpu = self.device == "cpu" and not self.amp.enabled
        trunk = copy() if copy is not None and on_cpu else None  # the encoder's input -> [B, F]
        if trunk is None:
            return live
        return numpy_evaluator(self, trunk, self._channels_first, MASK_PENALTY)

    def search_settings(self, frozen: bool = False) -> dict[str, Any]:
        """What a search with this policy uses: ``{"evaluate", "discount", "draw_score",
        "moves_left_weight", "tactics", "proofs", "fpu_reduction"}`` (keyword arguments of
        `PUCTSearch`), as it was trained. ``frozen``: the search runs while the weights
        stay as they are now (`frozen_evaluator`; a cached search assumes as much)."""
        live = self.priors_values_and_moves_left if self.moves_left else self.priors_and_values
        evaluate = self.frozen_evaluator() if frozen else live
        fpu = self.cfg.search_fpu
        return {
            "evaluate": evaluate,
            "discount": self.value_discount,
            "draw_score": self.draw_score,
            "moves_left_weight": self.moves_left_weight,
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
