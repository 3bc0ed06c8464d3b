"""A person plays the current policy, with its search, while a self-play run trains.

The live page (``trainer.live=true``) shows a board; clicks go to the routes
`play_routes` adds under ``/api/arena/play``: ``new`` (the person moves first or
second), ``move`` (the person's move) and ``reply`` (the policy's move). Every finished
game is appended to ``human_games.jsonl`` in the run folder and counted in the run's
``results.json`` (`human_score`).

Why the reply runs on the training thread (``live.call_soon``): the search reads the
policy's weights, and a step updates them in place; running between steps reads one
consistent set without copying the network each move, and Paddle is not driven from two
threads at once. The reply changes nothing the run carries: ties are broken by the
game's own generator (``(seed, 0x4855, game number, ply)``, never a run stream), the network
is evaluated under ``no_grad`` and its train/eval mode is restored (``SearchPlayer``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from paddlecraft.agents import Policy
from paddlecraft.errors import PaddleCraftError

from ..engine.live.control import RunEnded
from ..games.core import BoardGame
from .liveview import stone_cell
from .player import SearchPlayer

HUMAN_GAMES = "human_games.jsonl"
RESULTS = ("human_win", "policy_win", "draw")


#: random-stream id: the policy's replies to a person, ``[seed, id, game, ply]``
REPLY_STREAM = 0x4855


class PlayError(PaddleCraftError, ValueError):
    """A move or request the current human game cannot take (answered with HTTP 400)."""


def first_player_cells(game: BoardGame) -> np.ndarray:
    """Cells ``int [rows, cols]`` of game 0: 0 empty, 1 the first player's, 2 the second's."""
    planes = game.planes(game.cur[:1], game.mask[:1])[0]  # [rows, cols, 2], mover first
    mover, other = planes[..., 0].astype(np.int64), planes[..., 1].astype(np.int64)
    first, second = (mover, other) if game.moves[0] % 2 == 0 else (other, mover)
    return first * 1 + second * 2


@dataclass
class HumanGame:
    """One game between a person and the policy."""

    number: int  #: 1 for the first game of the run folder
    human_first: bool
    board: BoardGame
    moves: list[int] = field(default_factory=list)
    last: tuple[int, int] | None = None
    started: float = field(default_factory=time.time)

    @property
    def human_seat(self) -> int:
        return 0 if self.human_first else 1

    @property
    def result(self) -> str | None:
        """None while it runs, else one of `RESULTS`."""
        if not self.board.done[0]:
            return None
        w = int(self.board.winner[0])
        if w < 0:
            return "draw"
        return "human_win" if w == self.human_seat else "policy_win"

    def to_move(self) -> str | None:
        """``"human"``, ``"policy"`` or None when the game is over."""
        if self.board.done[0]:
            return None
        return "human" if int(self.board.moves[0]) % 2 == self.human_seat else "policy"


def human_score(run_dir: str | os.PathLike) -> dict[str, int]:
    """The policy's record against people from ``human_games.jsonl``: games, wins, draws,
    losses (wins and losses are the policy's)."""
    path = Path(run_dir) / HUMAN_GAMES
    out = {"games": 0, "wins": 0, "draws": 0, "losses": 0}
    if not path.is_file():
        return out
    key = {"policy_win": "wins", "draw": "draws", "human_win": "losses"}
    for line in path.read_text().splitlines():
        if line.strip():
            out["games"] += 1
            out[key[json.loads(line)["result"]]] += 1
    return out


class HumanPlay:
    """The current human game against ``policy`` (one at a time; a new one replaces an
    unfinished one, which is not recorded).

    Args:
        policy: the run's learning policy (read, never changed).
        rules: the game's native rules (``ConnectFour``, ``TicTacToe``).
        run_dir: where ``human_games.jsonl`` is appended.
        simulations: PUCT simulations per policy move (0: the network's greedy move).
        c_puct: the search's exploration constant.
        seed: the run seed (each game's tie-breaking generator derives from it).
        step: returns the run's current update (written with each finished game).
    """

    def __init__(
        self,
        policy: Policy,
        rules: type[BoardGame],
        run_dir: str | os.PathLike,
        simulations: int,
        c_puct: float,
        seed: int,
        step: Callable[[], int],
    ) -> None:
        self.policy, self.rules = policy, rules
        self.path = Path(run_dir) / HUMAN_GAMES
        self.simulations, self.c_puct, self.seed = int(simulations), float(c_puct), int(seed)
        self.step = step
        self.game: HumanGame | None = None
        self.lock = threading.Lock()
        self._searcher: SearchPlayer | None = None

    # ------------------------------------------------------------------ the game
    def new(self, human_first: bool) -> dict[str, Any]:
        """Start a game; numbered after the games already recorded in the run folder."""
        with self.lock:
            number = human_score(self.path.parent)["games"] + 1
            self.game = HumanGame(number, bool(human_first), self.rules(1))
            return self._state()

    def human_move(self, action: Any) -> dict[str, Any]:
        """Play the person's ``action`` (the column; for tic-tac-toe the cell ``row*3+col``)."""
        with self.lock:
            game = self._running("human")
            try:
                a = int(action)
            except (TypeError, ValueError):
                raise PlayError(f"move: expected an integer action, got {action!r}") from None
            legal = np.flatnonzero(game.board.legal_mask()[0])
            if a not in legal:
                raise PlayError(
                    f"move: action {a} is not legal here; legal actions are {legal.tolist()}"
                )
            self._play(game, a)
            return self._state()

    def policy_move(self) -> dict[str, Any]:
        """The policy's reply (call it on the training thread: it reads the weights)."""
        with self.lock:
            game = self._running("policy")
            planes, legal = game.board.observe()  # [1, rows, cols, 2], [1, A]
            number, ply = game.number, len(game.moves)
        rng = np.random.default_rng([self.seed, REPLY_STREAM, number, ply])
        if self.simulations > 0:
            action = int(self._search().act(planes, legal, rng)[0])
        else:
            action = int(self.policy.act(planes, legal, greedy=True)[0])
        with self.lock:
            if self.game is not game or len(game.moves) != ply:
                raise PlayError("reply: the game changed while the policy was thinking")
            self._play(game, action)
            return self._state()

    def state(self) -> dict[str, Any]:
        """The current game as the page draws it (``game`` null before the first one)."""
        with self.lock:
            return self._state()

    # ------------------------------------------------------------------ internals
    def _search(self) -> SearchPlayer:
        if self._searcher is None:  # uncached: in a live run the policy trains between replies
            self._searcher = SearchPlayer(
                self.policy, self.rules, self.simulations, self.c_puct, cache=False
            )
        return self._searcher

    def _running(self, who: str) -> HumanGame:
        game = self.game
        if game is None:
            raise PlayError("no game yet: start one (POST /api/arena/play/new)")
        turn = game.to_move()
        if turn is None:
            raise PlayError(f"game {game.number} is over ({game.result}): start a new one")
        if turn != who:
            raise PlayError(f"it is the {turn}'s turn in game {game.number}, not the {who}'s")
        return game

    def _play(self, game: HumanGame, action: int) -> None:
        stone = self.rules.new_stone(game.board.mask[:1], np.array([action]))[0]
        game.board.step(np.array([action]))
        game.moves.append(action)
        game.last = stone_cell(self.rules, int(stone))
        if game.result is not None:
            self._record(game)

    def _record(self, game: HumanGame) -> None:
        row = {
            "game": game.number,
            "human_first": game.human_first,
            "moves": game.moves,
            "result": game.result,
            "game_name": self.rules.name,
            "simulations": self.simulations,
            "step": int(self.step()),
            "seconds": round(time.time() - game.started, 3),
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _state(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "game_name": self.rules.name,
            "rows": self.rules.rows,
            "cols": self.rules.cols,
            "click": "column" if self.rules.name == "connect_four" else "cell",
            "simulations": self.simulations,
            "score": human_score(self.path.parent),
            "game": None,
        }
        game = self.game
        if game is not None:
            out["game"] = {
                "number": game.number,
                "human_first": game.human_first,
                "moves": list(game.moves),
                "cells": first_player_cells(game.board).tolist(),
                "last": None if game.last is None else list(game.last),
                "to_move": game.to_move(),
                "legal": np.flatnonzero(game.board.legal_mask()[0]).tolist(),
                "result": game.result,
            }
        return out


def play_routes(play: HumanPlay, live: Any) -> list[Any]:
    """Starlette routes under ``/api/arena``: ``GET play``, ``POST play/new`` (``{"human_first":
    true}``), ``POST play/move`` (``{"action": 3}``), ``POST play/reply``. A refused move is
    HTTP 400, a reply asked after the run ended 409, each with ``{"error": "..."}``."""

    async def body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            raise PlayError("the request body is not JSON") from None
        if not isinstance(data, dict):
            raise PlayError("the request body must be a JSON object")
        return data

    def answer(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def handler(request: Request) -> JSONResponse:
            try:
                return JSONResponse(await fn(request))
            except PlayError as e:
                return JSONResponse({"error": str(e)}, status_code=400)
            except RunEnded as e:
                return JSONResponse({"error": f"{e}: the policy no longer plays"}, status_code=409)

        return handler

    async def get_state(request: Request) -> dict[str, Any]:
        return play.state()

    async def new(request: Request) -> dict[str, Any]:
        return play.new(bool((await body(request)).get("human_first", True)))

    async def move(request: Request) -> dict[str, Any]:
        return play.human_move((await body(request)).get("action"))

    async def reply(request: Request) -> dict[str, Any]:
        return await asyncio.wrap_future(live.call_soon(play.policy_move))

    return [
        Route("/play", answer(get_state), methods=["GET"]),
        Route("/play/new", answer(new), methods=["POST"]),
        Route("/play/move", answer(move), methods=["POST"]),
        Route("/play/reply", answer(reply), methods=["POST"]),
    ]
