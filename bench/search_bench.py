"""PUCT search throughput: the batched search vs a one-game-at-a-time loop, same network.

    python bench/search_bench.py            # ~2 minutes; prints two lines, writes JSON
    python bench/search_bench.py --quick

Both search Connect Four positions (6 random opening moves) with the default Connect
Four policy network (untrained MLP 84-256-256, the arena's size) and the same PUCT
rules: :class:`paddlecraft.arenas.games.search.PUCTSearch` over ``games`` positions at once (one
network call per simulation for all of them) and :func:`paddlecraft.arenas.games.search.search_one`
on one position after another (a dict-of-nodes tree, one network call per leaf). The
figure is simulations per second (summed over games) and their ratio, measured in the
same process one after the other. The same batched search with the Connect Four default's
exact values (``tactics`` and ``proofs``) is timed on the same positions too: its cost
against the plain batched search (``exact_cost``: plain rate / exact rate); and that
search again with the board-line encoder's network (``encoder=lines_256x3``): its cost
against the MLP's (``lines_cost``: exact rate / line-feature rate).

Then whole training games of the Connect Four recipe with fresh searches (line-feature
network, 50 simulations with tactics, proofs and the 0.95 discount, root noise, 8 sampled
plies; the default before tree reuse, which adds 30 to the previous move's subtree),
move by move, with the network's results kept by position (`CachedEvaluator`, what
every collection searches with) and without: moves per second each, their ratio (``cache_speedup``)
and the share of leaf evaluations the cache answered (``cache_hits``). Both start from
the same seed; as a network's output for a row can differ in its last bits with the rows
beside it, the games may part late, so both move counts are given. And the cached games
again with the network's NumPy copy (`Policy.frozen_evaluator`, what a collection and an
evaluation search with): moves per second and the ratio to the cached Paddle network
(``frozen_speedup``). Last, the cached games with the convolutional trunk (two 3x3 conv
blocks of 32 channels at 6x7, 256 features) over its NumPy copy and over Paddle's
forward (``cnn_frozen_speedup``), and its copy's cost against the line-feature network's
copy (``cnn_cost``: lines rate / trunk rate); and the line-feature network's copy with its
zugzwang features (``gravity=true``) against without (``gravity_cost``: plain rate /
gravity rate).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# the guide's convolutional trunk: two 3x3 conv blocks of 32 channels at the board's full
# 6x7 resolution, 256 features (encoder@agents.policy.encoder=cnn with these settings)
CONV_TRUNK = {"_target_": "paddlecraft.encoders.ImageCNNEncoder", "channels": [32, 32],
              "embedding_dim": 256, "min_spatial": 7, "norm": "none"}  # fmt: skip


def _network(lines: bool = False, conv: bool = False, gravity: bool = False):
    """The Connect Four default's network; ``lines``: the same MLP over `BoardLineEncoder`'s
    line features (``encoder=lines_256x3``), with ``gravity`` its zugzwang features too;
    ``conv``: the convolutional trunk instead."""
    from paddlecraft.agents import Policy

    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 256,
           "hidden_layers": 3}  # fmt: skip
    if lines:
        enc = {**enc, "_target_": "paddlecraft.encoders.BoardLineEncoder", "line_length": 4,
               "gravity": gravity}  # fmt: skip
    if conv:
        enc = CONV_TRUNK
    name = "search_bench_conv" if conv else "search_bench_lines" if lines else "search_bench_policy"
    name += "_gravity" if gravity else ""
    return Policy(name, encoder=enc, obs_shape=[6, 7, 2], num_actions=7, seed=0)


def _training_games(evaluate, games: int) -> tuple[int, float]:
    """Training games of the Connect Four recipe with fresh searches (50 simulations,
    tactics, proofs, the 0.95 discount, root noise, 8 sampled plies), all ``games`` at
    once: (moves played, seconds)."""
    from paddlecraft.arenas.games import ConnectFour
    from paddlecraft.arenas.games.search import PUCTSearch, choose_moves, decided_visits

    rng = np.random.default_rng(0)
    search = PUCTSearch(ConnectFour, evaluate, simulations=50, discount=0.95, tactics=True,
                        proofs=True)  # fmt: skip
    g = ConnectFour(games)
    moves, t = 0, time.perf_counter()
    while not g.done.all():
        live = np.flatnonzero(~g.done)
        res = search.search(g.cur[live], g.mask[live], rng, noise=True)
        temperature = np.where(g.moves[live] < 8, 1.0, 0.0)
        g.step(choose_moves(decided_visits(res), temperature, rng), live)
        moves += len(live)
    return moves, time.perf_counter() - t


def bench_search(size: str = "full") -> dict:
    """Simulations/s of the batched search and of the plain loop, and the ratio."""
    from paddlecraft.arenas.games import ConnectFour, random_legal
    from paddlecraft.arenas.games.search import PUCTSearch, search_one

    games, sims, plain_positions = {
        "full": (256, 100, 6),
        "quick": (128, 50, 3),
        "tiny": (8, 4, 1),
    }[size]
    policy = _network()
    rng = np.random.default_rng(0)
    g = ConnectFour(games)
    for _ in range(6):
        g.step(random_legal(g.legal_mask(), rng))
    search = PUCTSearch(ConnectFour, policy.priors_and_values, simulations=sims)
    search.search(g.cur[:8], g.mask[:8])  # warm-up
    t = time.perf_counter()
    batched = search.search(g.cur, g.mask)
    t_batched = time.perf_counter() - t
    t = time.perf_counter()
    same = 0
    for i in range(plain_positions):
        v = search_one(ConnectFour, policy.priors_and_values, int(g.cur[i]), int(g.mask[i]),
                       sims)  # fmt: skip
        same += int(v.argmax() == batched.visits[i].argmax())
    t_plain = time.perf_counter() - t
    exact = PUCTSearch(ConnectFour, policy.priors_and_values, simulations=sims, tactics=True,
                       proofs=True)  # fmt: skip
    t = time.perf_counter()
    exact.search(g.cur, g.mask)
    t_exact = time.perf_counter() - t
    exact_rate = games * sims / t_exact
    with_lines = PUCTSearch(ConnectFour, _network(lines=True).priors_and_values,
                            simulations=sims, tactics=True, proofs=True)  # fmt: skip
    with_lines.search(g.cur[:8], g.mask[:8])  # warm-up
    t = time.perf_counter()
    with_lines.search(g.cur, g.mask)
    lines_rate = games * sims / (time.perf_counter() - t)
    batched_rate = games * sims / t_batched
    plain_rate = plain_positions * sims / t_plain
    return {
        "games": games,
        "simulations": sims,
        "batched_simulations_per_s": round(batched_rate, 1),
        "plain_simulations_per_s": round(plain_rate, 1),
        "speedup": round(batched_rate / plain_rate, 1),
        "exact_simulations_per_s": round(exact_rate, 1),
        "exact_cost": round(batched_rate / exact_rate, 2),
        "lines_simulations_per_s": round(lines_rate, 1),
        "lines_cost": round(exact_rate / lines_rate, 2),
        "plain_positions": plain_positions,
        "same_best_move": f"{same}/{plain_positions}",
        "summary": f"PUCT search ({sims} simulations, MLP 84-256-256): batched over {games} "
        f"Connect Four games {batched_rate:,.0f} simulations/s vs one game at a time "
        f"{plain_rate:,.0f} = {batched_rate / plain_rate:.0f}x (same best move "
        f"{same}/{plain_positions}); with tactics and proofs {exact_rate:,.0f} simulations/s "
        f"(cost {batched_rate / exact_rate:.2f}x the plain batched search); and with the "
        f"board-line encoder {lines_rate:,.0f} simulations/s (cost {exact_rate / lines_rate:.2f}x "
        "the MLP's)",
    }


def bench_cache(size: str = "full") -> dict:
    """Training games of the Connect Four recipe (fresh 50-simulation searches) with and
    without the evaluation cache."""
    from paddlecraft.arenas.games.search import CachedEvaluator, NetworkEvaluator

    games = {"full": 256, "quick": 64, "tiny": 4}[size]
    policy = _network(lines=True)
    net = policy.priors_and_values

    def play(evaluate) -> tuple[int, float]:
        return _training_games(evaluate, games)

    play(net)  # warm-up
    moves, t_plain = play(net)
    cache = CachedEvaluator(NetworkEvaluator(net))
    cached_moves, t_cached = play(cache)
    frozen = CachedEvaluator(NetworkEvaluator(policy.frozen_evaluator()))
    frozen_moves, t_frozen = play(frozen)
    plain_rate, cached_rate = moves / t_plain, cached_moves / t_cached
    frozen_rate = frozen_moves / t_frozen
    hits = cache.hits / max(cache.lookups, 1)
    return {
        "cache_games": games,
        "uncached_moves": moves,
        "cached_moves": cached_moves,
        "uncached_moves_per_s": round(plain_rate, 1),
        "cached_moves_per_s": round(cached_rate, 1),
        "cache_speedup": round(cached_rate / plain_rate, 2),
        "cache_hits": round(hits, 3),
        "frozen_moves": frozen_moves,
        "frozen_moves_per_s": round(frozen_rate, 1),
        "frozen_speedup": round(frozen_rate / cached_rate, 2),
        "cache_summary": f"{games} Connect Four training games (line features, 50 "
        f"simulations, tactics and proofs): {cached_rate:,.0f} moves/s with the evaluation "
        f"cache vs {plain_rate:,.0f} without = {cached_rate / plain_rate:.2f}x; the cache "
        f"answered {hits:.0%} of the leaf evaluations; cached over the NumPy copy of the "
        f"network (Policy.frozen_evaluator, as training searches run) {frozen_rate:,.0f} "
        f"moves/s = {frozen_rate / cached_rate:.2f}x the cached Paddle network",
    }


def bench_conv(size: str = "full") -> dict:
    """The same cached training games with the convolutional trunk: over its NumPy copy
    (`ImageCNNEncoder.numpy_forward`) against over Paddle's forward, and against the
    line-feature network's copy (the default's, what the trunk would replace)."""
    from paddlecraft.arenas.games.search import CachedEvaluator, NetworkEvaluator

    games = {"full": 256, "quick": 64, "tiny": 4}[size]
    conv, lines = _network(conv=True), _network(lines=True)

    def play(evaluate) -> tuple[int, float]:
        return _training_games(CachedEvaluator(NetworkEvaluator(evaluate)), games)

    play(conv.frozen_evaluator())  # warm-up
    paddle_moves, t_paddle = play(conv.priors_and_values)
    copy_moves, t_copy = play(conv.frozen_evaluator())
    lines_moves, t_lines = play(lines.frozen_evaluator())
    paddle_rate, copy_rate = paddle_moves / t_paddle, copy_moves / t_copy
    lines_rate = lines_moves / t_lines
    return {
        "conv_games": games,
        "conv_paddle_moves": paddle_moves,
        "conv_paddle_moves_per_s": round(paddle_rate, 1),
        "conv_frozen_moves": copy_moves,
        "conv_frozen_moves_per_s": round(copy_rate, 1),
        "cnn_frozen_speedup": round(copy_rate / paddle_rate, 2),
        "conv_lines_moves": lines_moves,
        "conv_lines_moves_per_s": round(lines_rate, 1),
        "cnn_cost": round(lines_rate / copy_rate, 2),
        "conv_summary": f"{games} Connect Four training games with the convolutional trunk "
        f"(2x conv3x3 32 at 6x7, 256 features; cached): {copy_rate:,.0f} moves/s over its "
        f"NumPy copy vs {paddle_rate:,.0f} over Paddle's forward = "
        f"{copy_rate / paddle_rate:.2f}x; the line-feature network's copy {lines_rate:,.0f} "
        f"moves/s (the trunk costs {lines_rate / copy_rate:.2f}x)",
    }


def bench_gravity(size: str = "full") -> dict:
    """The same cached training games over the line-feature network's NumPy copy with and
    without its zugzwang features (``agents.policy.encoder.gravity=true``: 127 inputs
    more), played twice each, alternating, so a change in the machine's pace hits both."""
    from paddlecraft.arenas.games.search import CachedEvaluator, NetworkEvaluator

    games = {"full": 256, "quick": 64, "tiny": 4}[size]
    plain, gravity = _network(lines=True), _network(lines=True, gravity=True)

    def play(policy) -> tuple[int, float]:
        evaluate = CachedEvaluator(NetworkEvaluator(policy.frozen_evaluator()))
        return _training_games(evaluate, games)

    play(gravity)  # warm-up
    totals = {key: [0, 0.0] for key in ("plain", "gravity")}
    players = (("plain", plain), ("gravity", gravity))
    for _ in range(2):
        for key, policy in players:
            moves, seconds = play(policy)
            totals[key][0] += moves
            totals[key][1] += seconds
    plain_rate = totals["plain"][0] / totals["plain"][1]
    gravity_rate = totals["gravity"][0] / totals["gravity"][1]
    return {
        "gravity_games": games,
        "gravity_moves_per_s": round(gravity_rate, 1),
        "gravity_plain_moves_per_s": round(plain_rate, 1),
        "gravity_cost": round(plain_rate / gravity_rate, 2),
        "gravity_summary": f"{games} Connect Four training games (cached, NumPy copy) with "
        f"the line features and the zugzwang features: {gravity_rate:,.0f} moves/s against "
        f"{plain_rate:,.0f} with the line features alone (cost {plain_rate / gravity_rate:.2f}x)",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import paddlecraft.encoders  # noqa: F401  (CPU tuning before paddle, as run.py does)

    size = "quick" if args.quick else "full"
    r = {**bench_search(size), **bench_cache(size), **bench_conv(size), **bench_gravity(size)}
    print(r["summary"])
    print(r["cache_summary"])
    print(r["conv_summary"])
    print(r["gravity_summary"])
    (ROOT / "bench" / "results_search.json").write_text(json.dumps(r, indent=2) + "\n")


if __name__ == "__main__":
    main()
