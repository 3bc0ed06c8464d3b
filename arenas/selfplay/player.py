"""Trained policies as players: raw (greedy network) or with PUCT search, batched or one board.

    player = arenas.search_player("runs/selfplay/<time>", game="connect_four", simulations=200)
    action = player(observation, action_mask)   # PettingZoo classic planes + mask -> int

Observations are PettingZoo's classic encoding (``connect_four_v3``, ``tictactoe_v3``):
planes ``[rows, cols, 2]`` from the mover's side and the same action numbering, so the
player drops into PettingZoo's own environments.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents import Agent, Policy
from paddlecraft.errors import ConfigError

from ..games import GAMES, Player
from ..games.core import BoardGame
from ..games.evaluators import ensemble_averaged
from ..games.search import (
    MOVE_RULES,
    CachedEvaluator,
    NetworkEvaluator,
    PUCTSearch,
    TreeReuse,
    played_moves,
)


def load_policy(source: str | os.PathLike | Policy, name: str | None = None) -> Policy:
    """A `Policy` from itself, a saved policy folder, or a run folder
    (its ``policy/``)."""
    if isinstance(source, Policy):
        return source
    path = Path(source)
    if (path / "policy").is_dir():
        path = path / "policy"
    if not path.is_dir():
        raise FileNotFoundError(
            f"no saved policy at {source}: give a self-play run folder (with policy/), a "
            "saved policy folder or an agents.Policy"
        )
    kwargs = {"name": name} if name else {}
    policy = Agent.load(path, **kwargs)
    if not isinstance(policy, Policy):
        raise ConfigError(f"{path} holds a {type(policy).__name__}, not an agents.Policy")
    policy.eval()
    return policy


def _rules(game: str | type[BoardGame]) -> type[BoardGame]:
    if isinstance(game, type) and issubclass(game, BoardGame):
        return game
    name = str(game).split(":", 1)[-1].removesuffix("_v3")
    if name not in GAMES:
        raise ValueError(f"game must be one of {sorted(GAMES)} (or their _v3 names), got {game!r}")
    return GAMES[name]


def _check_partners(policy: Policy, partners: tuple[Policy, ...]) -> None:
    """Raise unless every partner can average its network's results with ``policy``'s: the
    same boards and moves and the same value discount (the values mean the same thing)."""

    def key(p: Policy) -> tuple[Any, ...]:
        return tuple(p.obs_shape), p.num_actions, p.value_discount

    mine = key(policy)
    for other in partners:
        theirs = key(other)
        if mine != theirs:
            raise ValueError(
                f"partners: Policy({other.name!r}) cannot join Policy({policy.name!r})'s "
                "ensemble: (board, moves, value_discount) differ, "
                f"{theirs} against {mine}; pass policies trained with the same game and "
                "value settings"
            )


class PolicyPlayer(Player):
    """The network alone: its most probable legal move. With ``partners`` (other policies
    of the same game), the most probable legal move of the members' mean priors (an
    ensemble, `ensemble_averaged`)."""

    def __init__(
        self, policy: Policy, name: str = "policy", partners: tuple[Policy, ...] = ()
    ) -> None:
        self.policy, self.name, self.partners = policy, name, tuple(partners)
        _check_partners(policy, self.partners)

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        masks = self._masks(action_masks)
        if not self.partners:
            return np.asarray(self.policy.act(observations, masks, greedy=True))
        nets = [p.priors_and_values for p in (self.policy, *self.partners)]
        priors = ensemble_averaged(nets)(np.asarray(observations), masks)[0]  # [B, A]
        return np.where(masks, priors, -1.0).argmax(axis=1)


class SearchPlayer(Player):
    """PUCT search guided by a policy's priors and value; plays the move its rule picks.

    The rule (`played_moves`) is ``move``, by default the policy's ``search_move`` (the
    most visited move, ties at random from ``rng``; or the best lower confidence bound).
    No root noise, temperature 0. Batched: one search over
    all the boards of a call, one network call per simulation. Values are backed up with
    the policy's ``value_discount``, the one it was trained with. With ``cache`` (the default) the network's results are kept
    by position for the player's life (`CachedEvaluator`): the next move's search reuses
    the last one's, and the network is a NumPy copy of the weights as they were when the
    player was made (`Policy.frozen_evaluator`); make a new player once the policy has
    trained further (``cache=False``: Paddle's forward on the weights as they are). With ``reuse`` each search
    starts from the subtree the player's previous search left below the move played and
    the opponent's reply (`TreeReuse`, as AlphaZero plays its games), so ``simulations``
    add to the visits kept there; found by position, so it holds across batches whose
    games end at different moves. Off by default: an evaluation's ``search200`` is 200
    fresh simulations per move. With ``partners``
    (other policies of the same game, value discount and heads) every simulation's
    network results are the mean of the policy's and the partners' (`ensemble_averaged`:
    a deep ensemble; one network call per member); the search's other settings are the
    policy's.
    """

    def __init__(
        self,
        policy: Policy,
        game: str | type[BoardGame],
        simulations: int = 200,
        c_puct: float = 1.5,
        name: str | None = None,
        cache: bool = True,
        move: str | None = None,
        reuse: bool = False,
        partners: tuple[Policy, ...] = (),
    ) -> None:
        self.policy, self.rules = policy, _rules(game)
        if tuple(policy.obs_shape) != self.rules.obs_shape():
            raise ValueError(
                f"the policy is sized for boards {list(policy.obs_shape)}, but {self.rules.name} "
                f"has {list(self.rules.obs_shape())}: pass the game the policy was trained on"
            )
        self.move = str(policy.cfg.search_move if move is None else move)
        if self.move not in MOVE_RULES:
            raise ValueError(f"SearchPlayer: move={self.move!r}, expected one of {MOVE_RULES}")
        # cached: the weights stay as now, so a copy of them serves as well
        frozen = cache
        settings = policy.search_settings(frozen=frozen)
        self.partners = tuple(partners)
        _check_partners(policy, self.partners)
        if self.partners:
            others = [p.search_settings(frozen=frozen)["evaluate"] for p in self.partners]
            settings["evaluate"] = ensemble_averaged([settings["evaluate"], *others])
        if cache:
            settings["evaluate"] = CachedEvaluator(NetworkEvaluator(settings["evaluate"]))
        self.search = PUCTSearch(self.rules, simulations=simulations, c_puct=c_puct, **settings)
        #: the subtrees kept for the next move's search (None: every search fresh)
        self.reuse = TreeReuse() if reuse else None
        self.name = name or f"search{simulations}" + ("reuse" if reuse else "")

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        legal = self._masks(action_masks)
        obs = np.asarray(observations).reshape(-1, *self.rules.obs_shape())
        cur, mask = self.rules.from_planes(obs)
        training = self.policy.training
        self.policy.eval()  # once per search, not once per simulation
        res = self.search.search(cur, mask, reuse=self.reuse)
        if training:
            self.policy.train()
        moves = played_moves(res, self.move, legal, rng)
        if self.reuse is not None:
            self.reuse.played(moves)
        return moves


def evaluation_searcher(policy: Policy, rules: Any, cfg: Any) -> SearchPlayer:
    """The searching player of a self-play arena's evaluations, made per evaluation (the
    weights as they are then): ``cfg`` is ``arena`` (``eval.simulations``,
    ``search.c_puct``)."""
    return SearchPlayer(policy, rules, cfg.eval.simulations, cfg.search.c_puct)


def search_player(
    source: str | os.PathLike | Policy,
    game: str = "connect_four",
    simulations: int = 200,
    c_puct: float = 1.5,
    seed: int = 0,
    name: str | None = None,
    reuse: bool = False,
) -> Callable[[Any, Any], int]:
    """``player(observation, action_mask) -> action`` for one PettingZoo classic board.

    Args:
        source: a self-play run folder, a saved policy folder or an ``paddlecraft.agents.Policy``.
        game: ``connect_four`` or ``tictactoe`` (``connect_four_v3`` works too).
        simulations: PUCT simulations per move (0: the network's greedy move).
        c_puct: exploration constant.
        seed: breaks ties between equally visited moves.
        name: scope to load a saved policy under (default: its saved name; give another
            one while a policy of that name is alive in this process).
        reuse: each move's search starts from the subtree the last one left (`SearchPlayer`);
            make a new player for each game.
    """
    policy = load_policy(source, name)
    player: Player = (
        SearchPlayer(policy, game, simulations, c_puct, reuse=reuse)
        if simulations > 0
        else PolicyPlayer(policy)
    )
    rng = np.random.default_rng(seed)

    def play(observation: Any, action_mask: Any) -> int:
        return int(player.act(np.asarray(observation)[None], np.asarray(action_mask)[None], rng)[0])

    play.player = player  # type: ignore[attr-defined]
    return play
