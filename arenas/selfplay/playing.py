"""Playing self-play games, the same code in the learner's process and in collection
workers: batched games to the end (`play_games`), the controllers that choose the moves
(`make_controller`), and a worker's slice of a step (`play_task`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from paddlecraft.agents import Policy

from ..games import GameSpec, Player
from .alphazero import search_controller
from .league import OpponentPool, Snapshot
from .search_config import SearchConfig

#: a controller maps (planes, masks) of the games where it moves to actions and a dict of
#: per-move arrays to record (``{"logp", "value"}`` for PPO, ``{"pi", "root_value"}`` for
#: search), or None
Controller = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, Any]]

#: one seat-controller of a collection plan: ``("learner", weights)`` samples and records
#: log-probabilities and values; ``("search", (weights, arena.search))`` plays with
#: PUCT search and records visit distributions; ``("snapshot", weights)`` samples;
#: ``("anchor", name)`` is a scripted baseline
PlanEntry = tuple[str, Any]


def play_games(
    spec: GameSpec,
    n: int,
    seat_controllers: np.ndarray,
    controllers: Sequence[Controller],
    record: int | None = None,
    check: Callable[[], None] | None = None,
) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
    """Play ``n`` games of ``spec`` to the end, all at once.

    ``seat_controllers[g, s]`` is the index in ``controllers`` that plays seat ``s`` of
    game ``g``; each move, every controller gets one batched call with the boards it has
    to move on. Returns ``(winner [n], records, total moves)``, where ``records`` holds,
    per move, the boards, masks, actions and recorded arrays of controller ``record``.
    ``check`` is called before each move (the arena's ``check_interrupt``: a stop or a
    pause abandons the collection there). A record's ``ply`` is the stones on the board.
    """
    game = spec.make(n)
    records: list[dict[str, np.ndarray]] = []
    moves = 0
    while not game.done.all():
        if check is not None:
            check()
        idx = np.flatnonzero(~game.done)
        planes, masks = game.observe(idx)
        who = seat_controllers[idx, game.to_move[idx]]
        actions = np.zeros(len(idx), np.int64)
        for c in np.unique(who):
            sel = who == c
            a, extra = controllers[c](planes[sel], masks[sel])
            actions[sel] = a
            if record is not None and c == record:
                records.append(
                    {
                        "ply": game.moves[idx[sel]].astype(np.int64),
                        "game": idx[sel],
                        "obs": planes[sel],
                        "mask": masks[sel],
                        "action": a,
                        **(extra or {}),
                    }
                )
        game.step(actions, idx)
        moves += len(idx)
    return game.winner.copy(), records, moves


def frozen_policy(name: str, config: Mapping[str, Any]) -> Policy:
    """An opponent network: ``paddlecraft.agents.Policy`` with ``config``, in eval mode, never trained.

    Built seeded, so building one never draws from a global stream (resume-safe); its
    initial weights are overwritten by whatever it is loaded with.
    """
    policy = Policy(name, **{**config, "seed": 0})
    policy.eval()
    return policy


KINDS = ("learner", "search", "snapshot", "anchor")


def make_controller(
    kind: str, actor: Any, rng: np.random.Generator, rules: Any = None, search: Any = None
) -> Controller:
    """The one controller factory of collection, in the learner's process and in workers.

    ``actor`` is the network (``learner``: samples and records log-probabilities and
    values; ``snapshot``: samples; ``search``: PUCT search on ``rules`` with the ``search``
    settings, ``arena.search``, recording visit targets) or a scripted `Player`
    (``anchor``). Every draw comes from ``rng``.
    """
    if kind == "anchor":
        return lambda o, m: (actor.act(o, m, rng=rng), None)
    if kind == "search":
        return search_controller(actor, rules, search, rng)
    if kind == "learner":
        return lambda o, m: _with_info(actor.act(o, m, greedy=False, rng=rng, return_info=True))
    if kind == "snapshot":
        return lambda o, m: (actor.act(o, m, greedy=False, rng=rng), None)
    raise ValueError(f"unknown controller kind {kind!r}: {' | '.join(KINDS)}")


def play_task(
    task: dict,
    spec: GameSpec,
    net: Callable[[int], Any],
    baselines: Mapping[str, Player],
    check: Callable[[], None] | None = None,
) -> tuple[np.ndarray, list[dict[str, np.ndarray]], int]:
    """A worker's slice: the plan's weights loaded into its own networks, then played
    (``check`` is called before each move, as `play_games` does)."""
    rng = np.random.default_rng(task["seed"])
    controllers: list[Controller] = []
    for k, (kind, arg) in enumerate(task["plan"]):
        if kind not in KINDS:
            make_controller(kind, None, rng)  # raises, naming the kinds
        search = None
        if kind == "anchor":
            actor = baselines[arg]
        else:
            actor = net(k)
            weights, search = arg if kind == "search" else (arg, None)
            OpponentPool.load_into(actor, Snapshot(kind, 0, weights))
        controllers.append(make_controller(kind, actor, rng, spec.rules, search))
    seats = np.asarray(task["seats"])
    return play_games(spec, len(seats), seats, controllers, task["record"], check)


def _with_info(out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, Any]:
    a, logp, value = out
    return a, {"logp": logp, "value": value}


def run_search(run: str | Path) -> tuple[GameSpec, SearchConfig]:
    """A saved run's game and training search settings (``arena.search`` of its
    ``config.yaml`` over `SearchConfig`'s defaults), as the analysis scripts replay them."""
    cfg = OmegaConf.load(Path(run) / "config.yaml")
    search = OmegaConf.merge(OmegaConf.structured(SearchConfig), cfg.arena.search)
    return GameSpec(str(cfg.data.loader.name)), OmegaConf.to_object(search)


def own_games(
    policy: Policy, spec: GameSpec, search: SearchConfig, games: int, seed: int = 0
) -> list[dict[str, np.ndarray]]:
    """``games`` self-play games of ``policy``'s training searches on both sides, every
    move recorded (`play_games`' records)."""
    act = search_controller(policy, spec.rules, search, np.random.default_rng(seed))
    seats = np.zeros((games, 2), np.int64)
    return play_games(spec, games, seats, [act], record=0)[1]
