"""Golden record of the two searches' outputs, kept so that reworking the tree cannot move
the anchors: ``tests/data/search_golden.npz`` (checked by ``tests/test_search_golden.py``).

Every recorded Connect Four and tic-tac-toe figure ("score 0.925 vs MCTS-100") is measured
against the rollout-MCTS anchors, and the trained search figures against the PUCT search.
The fixture holds, for both games:

- ``<game>/positions``: ``uint64 [P, 2]`` bitboards ``(cur, mask)`` of positions reached
  by seeded random play (none finished);
- ``<game>/mcts<k>/<case>``: the moves ``MCTSPlayer(game, k).act`` chose, for
  ``MCTS_CASES`` (the whole batch under one seeded generator, and smaller batches), and
  ``.../<case>/rng_after``: one ``rng.random()`` drawn after each call, which pins how
  many numbers the player drew (expansion, rollouts, the final tie-break);
- ``<game>/puct/<field>``: every array of ``PUCTSearch(game, linear_evaluator(game))``'s
  :class:`SearchResult` on a few positions, without and with seeded root noise.

It was produced at commit 6416be1 (the code before the one-tree rework, with
``MCTSPlayer`` and ``PUCTSearch`` as separate searches) by::

    OMP_NUM_THREADS=1 PYTHONPATH=. python tests/search_golden.py

On 2026-12-02 the PUCT arrays were recorded again, with the same code at 6416be1 and the
``--puct`` flag (the rest of the fixture kept): the first evaluator's softmax (``exp`` of
a BLAS product) matched here but not on CI's CPU, in the priors' last digits, so
`linear_evaluator` is now exact on any CPU and the test can stay bit for bit.

"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).resolve().parent / "data" / "search_golden.npz"
GAMES = ("tictactoe", "connect_four")
POSITIONS = 300  #: random-play positions per game
#: (case name, rollout simulations, positions used, batch size, seed of each batch)
MCTS_CASES = (
    ("all", 10, POSITIONS, POSITIONS, 0),
    ("all", 100, POSITIONS, POSITIONS, 1),
    ("batch7", 100, 70, 7, 2),
    ("single", 10, 20, 1, 3),
    ("all", 1000, 8, 8, 4),
)
PUCT_POSITIONS = 6
PUCT_SIMULATIONS = 50
SEARCH_FIELDS = ("visits", "value", "priors", "q", "net_priors", "net_value", "legal")


def _rules(name: str):
    from paddlecraft.arenas.games import GAMES as RULES

    return RULES[name]


def random_positions(name: str, n: int = POSITIONS, seed: int = 0) -> np.ndarray:
    """``uint64 [n, 2]`` ``(cur, mask)`` of unfinished positions after 0 to max_moves - 1
    seeded random moves."""
    from paddlecraft.arenas.games import random_legal

    game = _rules(name)
    rng = np.random.default_rng(seed)
    out = np.zeros((n, 2), np.uint64)
    for i in range(n):
        while True:
            g = game(1)
            plies = int(rng.integers(0, game.max_moves - 1))
            for _ in range(plies):
                g.step(random_legal(g.legal_mask(), rng))
                if g.done[0]:
                    break
            if not g.done[0]:
                break
        out[i] = g.cur[0], g.mask[0]
    return out


def linear_evaluator(game, seed: int = 0):
    """A fixed float64 'network' whose every output is exact on any CPU: integer logits (a
    0/1 board times small integer weights, clipped to [-20, 20]), priors ``2**logit`` over
    the legal moves normalised (powers of two within 2**40 of each other sum exactly), and
    the value ``s / (|s| + 8)`` of an integer score ``s``. A softmax through ``exp`` and a
    BLAS product would differ in its last bits from one CPU's kernels to another's."""
    rng = np.random.default_rng(seed)
    d = int(np.prod(game.obs_shape()))
    w = rng.integers(-2, 3, size=(d, game.num_actions)).astype(np.float64)
    u = rng.integers(-2, 3, size=d).astype(np.float64)

    def evaluate(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = planes.reshape(len(planes), -1).astype(np.float64)  # [B, d], 0/1
        logits = np.clip(x @ w, -20.0, 20.0)  # [B, A], integers: exact in any order
        p = np.where(masks, np.ldexp(1.0, logits.astype(np.int64)), 0.0)
        score = x @ u  # [B], an integer
        return p / p.sum(1, keepdims=True), score / (np.abs(score) + 8.0)

    return evaluate


def mcts_moves(name: str, positions: np.ndarray, sims: int, count: int, batch: int, seed: int):
    """Moves ``int64 [count]`` of ``MCTSPlayer(sims)`` on the first ``count`` positions in
    batches of ``batch`` (one generator seeded ``seed`` for all), and ``rng.random()`` after
    each batch ``[count // batch]``."""
    from paddlecraft.arenas.games import MCTSPlayer

    game = _rules(name)
    player = MCTSPlayer(game, sims)
    rng = np.random.default_rng(seed)
    moves, after = [], []
    for s in range(0, count, batch):
        cur, mask = positions[s : s + batch, 0], positions[s : s + batch, 1]
        moves.append(player.act(game.planes(cur, mask), game.legal(mask), rng=rng))
        after.append(rng.random())
    return np.concatenate(moves), np.array(after)


def puct_results(name: str, positions: np.ndarray) -> dict[str, np.ndarray]:
    """Every :class:`SearchResult` array of the PUCT search, plain and with root noise."""
    from paddlecraft.arenas.games.search import PUCTSearch

    game = _rules(name)
    search = PUCTSearch(game, linear_evaluator(game), simulations=PUCT_SIMULATIONS)
    cur, mask = positions[:PUCT_POSITIONS, 0], positions[:PUCT_POSITIONS, 1]
    out = {}
    for tag, res in (
        ("plain", search.search(cur, mask)),
        ("noise", search.search(cur, mask, np.random.default_rng(5), noise=True)),
    ):
        for f in SEARCH_FIELDS:
            out[f"{tag}/{f}"] = getattr(res, f)
    return out


def record() -> dict[str, np.ndarray]:
    """Everything the fixture holds, computed by the code in place."""
    data: dict[str, np.ndarray] = {}
    for name in GAMES:
        pos = random_positions(name)
        data[f"{name}/positions"] = pos
        for case, sims, count, batch, seed in MCTS_CASES:
            moves, after = mcts_moves(name, pos, sims, count, batch, seed)
            data[f"{name}/mcts{sims}/{case}"] = moves.astype(np.int8)
            data[f"{name}/mcts{sims}/{case}/rng_after"] = after
        for k, v in puct_results(name, pos).items():
            data[f"{name}/puct/{k}"] = v
    return data


def record_puct() -> dict[str, np.ndarray]:
    """The fixture with its PUCT arrays computed anew by the code in place (the rest kept)."""
    with np.load(FIXTURE) as old:
        data = {k: old[k] for k in old.files}
    for name in GAMES:
        for k, v in puct_results(name, data[f"{name}/positions"]).items():
            data[f"{name}/puct/{k}"] = v
    return data


if __name__ == "__main__":
    import sys

    np.savez_compressed(FIXTURE, **(record_puct() if "--puct" in sys.argv else record()))
