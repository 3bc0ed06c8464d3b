"""Connect Four judged by a perfect solver: a solver player and the perfect-move rate.

Connect Four is solved; the optional extra ``solver`` (``pip install paddlecraft[solver]``,
the `bitbully <https://pypi.org/project/bitbully/>`_ solver with its bundled opening book,
no download at run time) gives every move's exact value. Here it only *judges*: it is an
anchor in tournaments and evaluations and scores the moves of a trained agent; it never
appears in training targets, in the search or as a training opponent.

- `SolverPlayer` (baseline names ``solver`` and ``solver<d>``, the latter searching
  ``d`` plies and then rolling out non-losing moves: a weakened solver);
- `solver_positions`: a fixed, seeded set of positions from realistic play (plies
  0-30, only positions where the moves' values differ), each move's exact value attached;
- `pons_positions`: the positions of a test file of Pascal Pons' benchmark (the set
  AlphaZero.jl's mistake rates are measured on), each move's exact value attached;
- `perfect_move_rate`: the share of a player's moves with the best value and the
  share that keep the position's theoretical result ("good moves").

Values are the solver's scores from the mover's side: > 0 a win (larger: sooner), 0 a
draw, < 0 a loss; illegal moves are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents.settings import ConfigError

from .baselines import Player, TacticalPlayer
from .connect_four import ConnectFour
from .core import U64

_INSTALL = "pip install paddlecraft[solver]"
#: random-stream ids: the games that yield the judged positions ``[seed, id]``, and the
#: solver's tie-breaks when it plays a player ``[seed, id]``
POSITIONS_STREAM = 2025
SOLVER_GAMES_STREAM = 42


def _core() -> Any:
    """The ``bitbully`` modules, or a one-line `ConfigError` naming the extra."""
    try:
        import bitbully_databases
        from bitbully import bitbully_core
    except ImportError as e:
        raise ConfigError(
            f"the Connect Four solver needs the optional extra 'solver': {_INSTALL} ({e})"
        ) from None
    return bitbully_core, bitbully_databases


@lru_cache(maxsize=1)
def _engine() -> Any:
    """One solver engine per process (loading the opening book is slow)."""
    core, databases = _core()
    return core.BitBullyCore(Path(databases.BitBullyDatabases.get_database_path("default")))


def _spread(bits: np.ndarray) -> np.ndarray:
    """Our 7-bit column stride (6 cells + sentinel) -> bitbully's 9-bit stride."""
    out = np.zeros(bits.shape, U64)
    for c in range(ConnectFour.cols):
        out |= ((bits >> U64(7 * c)) & U64(0x3F)) << U64(9 * c)
    return out


def solve(cur: Any, mask: Any, max_depth: int = -1) -> np.ndarray:
    """Exact values ``float [n, 7]`` of every move of the positions ``(cur, mask)``.

    ``cur`` holds the mover's stones and ``mask`` all stones (the bitboards of
    `ConnectFour`). ``max_depth`` >= 0 limits the search
    (then values are estimates). Illegal moves (full columns) are NaN.
    """
    core, _ = _core()
    engine = _engine()
    cur, mask = np.atleast_1d(np.asarray(cur, U64)), np.atleast_1d(np.asarray(mask, U64))
    stones = ConnectFour.popcount(mask)
    all_, active = _spread(mask), _spread(cur)
    out = np.full((len(cur), ConnectFour.cols), np.nan)
    if max_depth >= 0:  # depth-limited values depend on the transposition table: start
        engine.resetTranspositionTable()  # each call from an empty one (reproducible)
    board = core.BoardCore()
    for i in range(len(cur)):
        board.setRawState(int(all_[i]), int(active[i]), int(42 - stones[i]))
        scores = np.asarray(engine.scoreMoves(board, max_depth=int(max_depth)), float)
        out[i] = np.where(scores > -100, scores, np.nan)  # bitbully: < -100 is illegal
    return out


def solve_planes(observations: Any) -> np.ndarray:
    """`solve` on observation planes ``[n, 6, 7, 2]`` (mover, opponent)."""
    cur, mask = ConnectFour.from_planes(np.asarray(observations))
    return solve(cur, mask)


class SolverPlayer(Player):
    """The perfect player (``max_depth=-1``) or a weakened one that searches ``max_depth``
    plies, then rolls out non-losing moves. Ties between equally valued moves are broken
    at random (``rng``), so games against it vary.

    ``result_only=True`` (baseline ``solver_result``) plays a random move among those
    that keep the position's theoretical result, blind to how soon it wins or how long it
    holds out: a player that never gives a result away, and the share of the perfect-move
    rate that is about distance alone (perfect - its rate)."""

    def __init__(self, max_depth: int = -1, result_only: bool = False) -> None:
        _core()  # fail now, with the one-line message, if the extra is missing
        self.max_depth, self.result_only = int(max_depth), bool(result_only)
        if result_only and max_depth >= 0:
            raise ValueError("SolverPlayer: result_only judges by exact values (max_depth=-1)")
        self.name = (
            "solver_result" if result_only else "solver" if max_depth < 0 else f"solver{max_depth}"
        )

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        rng = rng if rng is not None else np.random
        legal = self._masks(action_masks)
        cur, mask = ConnectFour.from_planes(np.asarray(observations))
        values = solve(cur, mask, self.max_depth)  # [n, 7]
        values = np.where(legal, np.nan_to_num(values, nan=-1e9), -np.inf)
        if self.result_only:  # every move with the best move's sign (win / draw / loss)
            values = np.where(legal, np.sign(values), -np.inf)
        best = values == values.max(axis=1, keepdims=True)
        noise = rng.random(best.shape)
        return np.argmax(np.where(best, noise + 1.0, 0.0), axis=1).astype(np.int64)


@dataclass
class SolvedPositions:
    """Positions with every move's exact value: ``planes int8 [n, 6, 7, 2]`` (mover's
    side), ``masks bool [n, 7]``, ``values float [n, 7]`` (NaN: illegal), ``plies [n]``."""

    planes: np.ndarray
    masks: np.ndarray
    values: np.ndarray
    plies: np.ndarray

    def __len__(self) -> int:
        return len(self.plies)


@lru_cache(maxsize=4)
def solver_positions(
    n: int = 400, seed: int = 0, max_ply: int = 30, strong_share: float = 0.5
) -> SolvedPositions:
    """``n`` positions from realistic play, fixed by ``seed``, with exact move values.

    Games mix strong and human-like moves: each move is, with probability
    ``strong_share``, a best move of a 6-ply solver search (ties at random) and otherwise
    the one-move-lookahead `TacticalPlayer`
    (centre-weighted, so its openings look like people's). From each game one position is
    kept, at a ply drawn uniformly from ``0..max_ply``, if the game is not over there and
    its legal moves do not all have the same exact value. Cached per process.
    """
    rng = np.random.default_rng([seed, POSITIONS_STREAM])
    tactical, strong = TacticalPlayer(ConnectFour), SolverPlayer(max_depth=6)
    planes, masks, values, plies = [], [], [], []
    kept = 0
    while kept < n:
        batch = max(16, (n - kept) * 3 // 2)
        game = ConnectFour(batch)
        stop = rng.integers(0, max_ply + 1, batch)
        for ply in range(max_ply + 1):
            here = np.flatnonzero((stop == ply) & ~game.done)
            if len(here):
                p, m = game.observe(here)
                v = solve_planes(p)  # exact
                keep = (np.nanmax(v, axis=1) - np.nanmin(v, axis=1)) > 0
                planes.append(p[keep])
                masks.append(m[keep].astype(bool))
                values.append(v[keep])
                plies.append(np.full(int(keep.sum()), ply))
                kept += int(keep.sum())
            live = np.flatnonzero((stop > ply) & ~game.done)
            if not len(live):
                break
            p, m = game.observe(live)
            actions = np.where(
                rng.random(len(live)) < strong_share,
                strong.act(p, m, rng=rng),
                tactical.act(p, m, rng=rng),
            )
            game.step(actions, live)
    cat = [np.concatenate(x) for x in (planes, masks, values, plies)]
    pick = np.sort(rng.choice(kept, n, replace=False))  # an unbiased n of them
    order = pick[np.argsort(cat[3][pick], kind="stable")]  # by ply
    return SolvedPositions(*(x[order] for x in cat))


def pons_positions(path: str | Path, limit: int | None = None) -> SolvedPositions:
    """Positions from a test file in Pascal Pons' format, with exact move values.

    Pons' Connect Four benchmark (``Test_L<stage>_R<difficulty>``, 1,000 positions each;
    AlphaZero.jl's mistake-rate benchmark judges on it) has one position per line: the
    columns played from the empty board, **1-based** (``4453``), a space, and the
    position's score for the mover (bitbully's scale: > 0 a win, larger sooner). Each
    line is replayed through `ConnectFour` and solved; the file's score must be the best
    move's value, so a file with 0-based columns or another score scale fails here, naming
    the line, instead of being judged wrong. ``limit``: the first ``limit`` lines only.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Pons test file {str(path)!r} not found: expected a file of "
                          "'<columns 1-7> <score>' lines, e.g. Test_L1_R2")  # fmt: skip
    rows = [ln.split() for ln in path.read_text().splitlines() if ln.strip()][:limit]
    planes, masks, plies = [], [], []
    for k, row in enumerate(rows, 1):
        why = "not '<columns 1-7> <score>'"
        ok = len(row) == 2 and set(row[0]) <= set("1234567") and row[1].lstrip("-").isdigit()
        try:  # Pons' columns are 1-based, a line of moves here 0-based
            g = ConnectFour.after("".join(str(int(c) - 1) for c in row[0])) if ok else None
        except ValueError as e:
            g, why = None, f"0-based columns here: {e}"
        if g is None:
            raise ConfigError(
                f"{path.name} line {k}: {' '.join(row)!r} is not a position of Pons' format "
                f"({why}): expected '<columns 1-7> <score>' (e.g. '4453 -2'), the columns "
                "replaying to an unfinished game"
            )
        p, m = g.observe()
        planes.append(p[0])
        masks.append(m[0].astype(bool))
        plies.append(len(row[0]))
    if not rows:
        raise ConfigError(f"{path.name}: no positions ('<columns 1-7> <score>' lines)")
    planes_, masks_ = np.stack(planes), np.stack(masks)
    values = solve_planes(planes_)
    scores = np.array([int(r[1]) for r in rows])
    wrong = np.flatnonzero(np.nanmax(values, axis=1) != scores)
    if len(wrong):
        k = int(wrong[0])
        raise ConfigError(
            f"{path.name} line {k + 1}: the file gives score {scores[k]}, the solver "
            f"{int(np.nanmax(values[k]))} ({len(wrong)} of {len(rows)} lines disagree): "
            "expected Pons' scores with 1-based columns"
        )
    return SolvedPositions(planes_, masks_, values, np.asarray(plies))


def perfect_move_rate(
    player: Player, positions: SolvedPositions, rng: Any = None, batch: int = 256
) -> dict[str, float]:
    """How close to perfect ``player`` plays on ``positions``.

    Returns ``perfect_move_rate`` (share of moves with the best value) and
    ``good_move_rate`` (share of moves that keep the theoretical result: a winning move
    where the position is won, a drawing or winning one where it is drawn; every legal
    move keeps a lost position's result, so those count as good).
    """
    return move_rates(positions.values, judged_moves(player, positions, rng, batch))


def judged_moves(
    player: Player, positions: SolvedPositions, rng: Any = None, batch: int = 256
) -> np.ndarray:
    """``player``'s moves ``int64 [n]`` on ``positions``, in batches of ``batch`` (ties
    from ``rng``, default ``default_rng(0)``): what `perfect_move_rate` scores."""
    rng = rng if rng is not None else np.random.default_rng(0)
    return np.concatenate(
        [
            player.act(positions.planes[i : i + batch], positions.masks[i : i + batch], rng=rng)
            for i in range(0, len(positions), batch)
        ]
    )


def move_rates(values: np.ndarray, actions: np.ndarray) -> dict[str, float]:
    """``perfect_move_rate`` and ``good_move_rate`` of ``actions [n]`` given the exact
    ``values [n, 7]`` (NaN: illegal; an illegal action counts as neither)."""
    values = np.asarray(values, float)
    chosen = values[np.arange(len(values)), np.asarray(actions, np.int64)]
    best = np.nanmax(values, axis=1)
    perfect = chosen == best
    good = ~np.isnan(chosen) & (np.sign(chosen) == np.sign(best))
    return {"perfect_move_rate": float(perfect.mean()), "good_move_rate": float(good.mean())}


#: bands of `result_plies` that `move_rates_by_class` splits decided positions by
RESULT_BANDS = ((1, 5), (6, 11), (12, 19), (20, 42))


def result_plies(values: np.ndarray, plies: np.ndarray) -> np.ndarray:
    """How far each position's result is under perfect play: the plies until the deciding
    move, that move counted (1: the mover wins at once; 2: the opponent wins after the
    mover's move), from the exact ``values [n, 7]`` (bitbully's scores: a win with ``t``
    stones on the board before the winning move scores ``(43 - t) // 2``) and the stones
    on the board ``plies [n]``; NaN where the position is drawn."""
    best = np.nanmax(np.asarray(values, float), axis=1)
    s = np.asarray(plies, np.int64)
    t = 43 - 2 * np.abs(best)  # the stones before the deciding move, or one more
    parity = np.where(best > 0, s % 2, (s + 1) % 2)  # the winner's moves' parity
    t = np.where(t % 2 == parity, t, t - 1)
    return np.where(best == 0, np.nan, t - s + 1)


def move_rates_by_class(
    values: np.ndarray, actions: np.ndarray, plies: np.ndarray | None = None
) -> dict[str, dict[str, float]]:
    """`move_rates` split by where the moves fall short: per theoretical result of
    the position (``won``, ``drawn``, ``lost`` for the mover) and, with ``plies`` (the
    stones on the board), per band of 8 plies (``plies 0-7``...) and per band of how far a
    won or lost position's result is (`result_plies`: ``result in 1-5 plies``...). Each entry also counts its positions (``n``) and, for
    ``won`` and ``lost``, the share of positions where a result-keeping move was not the
    best one (``slow`` on a win, ``early`` on a loss: the exact score told them apart).
    A perfect-move rate short of the good-move rate is all such distance."""
    values = np.asarray(values, float)
    actions = np.asarray(actions, np.int64)
    best = np.nanmax(values, axis=1)
    chosen = values[np.arange(len(values)), actions]
    good = ~np.isnan(chosen) & (np.sign(chosen) == np.sign(best))
    groups = {"won": best > 0, "drawn": best == 0, "lost": best < 0}
    if plies is not None:
        p = np.asarray(plies)
        for lo in range(0, int(p.max()) + 1, 8):
            groups[f"plies {lo}-{lo + 7}"] = (p >= lo) & (p < lo + 8)
        far = result_plies(values, p)
        for lo, hi in RESULT_BANDS:
            groups[f"result in {lo}-{hi} plies"] = (far >= lo) & (far <= hi)
    out: dict[str, dict[str, float]] = {}
    for name, sel in groups.items():
        if not sel.any():
            continue
        row = {"n": float(sel.sum()), **move_rates(values[sel], actions[sel])}
        if name in ("won", "lost"):
            row["slow" if name == "won" else "early"] = float((good & (chosen != best))[sel].mean())
        out[name] = row
    return out


def versus_solver(player: Player, games: int = 1, seed: int = 0) -> dict[str, Any]:
    """``player`` moves first against the perfect solver (ties at random, seeded).

    The first player wins Connect Four with perfect play, so a perfect ``player`` wins
    every game. Returns ``win_rate``, ``plies`` (mean game length: how long the player
    survives when it loses) and where the games not won were decided: ``win_given_away_at``,
    the median ply (stones on the board) of the player's first move that turned a won
    position into a drawn or lost one (NaN if every game was won), and
    ``given_away_by_ply_10``, the share of all games given away that early, in the opening;
    and ``win_given_away_lines``, which positions: ``{"<columns played>:<move>": games}``,
    the columns (0-6) of the moves before, the player's first, and the move that gave the
    win away (``"333333:4"``: the centre column filled, then column 4).
    """
    rng = np.random.default_rng([seed, SOLVER_GAMES_STREAM])
    solver = SolverPlayer()
    g = ConnectFour(games)
    given_away = np.full(games, -1)  # [games] the ply of the move that gave the win away
    played = np.zeros((games, 42), np.int64)  # [games, plies] each game's columns so far
    lines: dict[str, int] = {}
    while not g.done.all():
        idx = np.flatnonzero(~g.done)
        p, m = g.observe(idx)
        first = g.to_move[idx] == 0
        a = np.zeros(len(idx), np.int64)
        if first.any():
            mine = idx[first]
            a[first] = player.act(p[first], m[first], rng=rng)
            open_ = given_away[mine] < 0  # still won before this move (as at the start)
            if open_.any():
                values = solve_planes(p[first][open_])  # [k, 7]
                kept = values[np.arange(len(values)), a[first][open_]] > 0
                lost_now = mine[open_][~kept]
                given_away[lost_now] = g.moves[lost_now]
                for b, move in zip(lost_now, a[first][open_][~kept], strict=True):
                    line = "".join(map(str, played[b, : g.moves[b]])) + f":{move}"
                    lines[line] = lines.get(line, 0) + 1
        if (~first).any():
            a[~first] = solver.act(p[~first], m[~first], rng=rng)
        played[idx, g.moves[idx]] = a
        g.step(a, idx)
    thrown = given_away[given_away >= 0]
    return {
        "win_rate": float((g.winner == 0).mean()),
        "plies": float(g.moves.mean()),
        "win_given_away_at": float(np.median(thrown)) if len(thrown) else float("nan"),
        "given_away_by_ply_10": float((thrown <= 10).sum() / games),
        "win_given_away_lines": dict(sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
