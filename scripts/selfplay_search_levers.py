"""Is the search the lever? A trained Connect Four policy judged by the perfect solver under
other search settings, without retraining.

    python scripts/selfplay_search_levers.py runs/selfplay_targets/seed0
    python scripts/selfplay_search_levers.py RUN --c-puct 0.5 1.5 3 --simulations 200 3200
    python scripts/selfplay_search_levers.py RUN --rollout-mix 0.25 0.5 0.75
    python scripts/selfplay_search_levers.py RUN --moves-left-weight 0 0.05 0.1 0.2
    python scripts/selfplay_search_levers.py RUN --c-puct 1.5 --simulations 200 --rollout-mix --exact
    python scripts/selfplay_search_levers.py RUN RUN2 .. --c-puct --rollout-mix --choice --mirror

For each setting: the perfect-move and good-move rates (extra ``solver``) on the same
seeded positions as ``scripts/selfplay_targets.py`` (400, seed 0). ``--rollout-mix L``
also searches with leaf values mixed from the value head and one random playout,
``(1 - L) * v + L * rollout`` (AlphaGo's mixing; the anchors' rollouts, never the solver).
A policy with the moves-left head searches with its own ``moves_left_weight``;
``--moves-left-weight W..`` judges it at each W (200 simulations, c_puct 1.5) instead.
``--exact`` judges it with 200 simulations as plain PUCT, with ``tactics`` (leaves the
rules decide within two plies scored exactly) and with ``tactics`` and ``proofs``
(MCTS-Solver backups; the move a proof finds best), whatever the policy was trained with.
``--choice`` judges the policy's own search (its settings, 200 simulations) with other rules
for the move it finally plays: the most visited (as `SearchPlayer` plays), the best mean
value among the moves with at least 10% or 25% of the top move's visits, and the best lower
bound ``Q - 1 / sqrt(N)`` (Leela Chess Zero's and KataGo's LCB move choice, simplified); a
proven move's Q is its exact value. ``--mirror`` judges that search with the network's
priors and value averaged over the position and its mirror image (test-time
augmentation). Several runs may be given; each is judged in turn.
Evaluation only: nothing here trains.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="finished run folders (their policy/ is judged)")
    ap.add_argument("--c-puct", type=float, nargs="*", default=[0.5, 1.5, 3.0])
    ap.add_argument("--simulations", type=int, nargs="*", default=[200, 800, 3200])
    ap.add_argument("--rollout-mix", type=float, nargs="*", default=[0.25, 0.5, 0.75])
    ap.add_argument("--positions", type=int, default=400)
    ap.add_argument("--moves-left-weight", type=float, nargs="*", default=[],
                    help="a moves-left policy's utility weights to judge (200 simulations)")  # fmt: skip
    ap.add_argument("--exact", action="store_true",
                    help="judge plain, tactics and tactics + proofs searches (200 simulations)")  # fmt: skip
    ap.add_argument("--choice", action="store_true",
                    help="judge the final move by visits, by value and by a lower bound")  # fmt: skip
    ap.add_argument("--mirror", action="store_true",
                    help="judge the search with mirror-averaged network outputs")  # fmt: skip
    args = ap.parse_args()
    apply_cpu_tuning()

    from paddlecraft.arenas.games import ConnectFour
    from paddlecraft.arenas.games.baselines import Player
    from paddlecraft.arenas.games.evaluators import (
        Evaluator,
        NetworkEvaluator,
        RandomRolloutEvaluator,
        mirror_averaged,
    )
    from paddlecraft.arenas.games.search import MCTS, decided_visits, played_moves
    from paddlecraft.arenas.games.solver import solver_positions
    from paddlecraft.arenas.selfplay import load_policy

    class MixedEvaluator(Evaluator):
        """The network's priors; leaf value ``(1 - mix) * v + mix * one random playout``."""

        def __init__(self, network: Any, mix: float) -> None:
            self.net, self.mix = NetworkEvaluator(network), mix

        def evaluate(self, game, cur, mask, legal, rng):  # noqa: ANN001, ANN201
            p, v = self.net.evaluate(game, cur, mask, legal, rng)
            r = RandomRolloutEvaluator.rollout(game, cur, mask, rng)
            return p, (1 - self.mix) * v + self.mix * r

        def root(self, game, cur, mask, legal, rng):  # noqa: ANN001, ANN201
            return self.net.evaluate(game, cur, mask, legal, rng)

    class TreePlayer(Player):
        """One search per position; plays by ``choice``: ``("visits", 0)`` the most visited
        move (ties from a seeded rng), ``("lcb", 0)`` the best ``Q - 1 / sqrt(N)``
        (`played_moves`), ``("value", share)`` the best mean value among the moves with at
        least ``share`` of the top visits (a proven move's: its exact value)."""

        def __init__(self, tree: MCTS, choice: tuple[str, float] = ("visits", 0.0)) -> None:
            self.tree, self.choice = tree, choice

        def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
            legal = self._masks(action_masks)
            obs = np.asarray(observations).reshape(-1, *ConnectFour.obs_shape())
            cur, mask = ConnectFour.from_planes(obs)
            rng = np.random.default_rng(0)
            res = self.tree.search(cur, mask, rng)
            rule, share = self.choice
            if rule != "value":  # the library's rules, as `SearchPlayer` plays them
                return played_moves(res, rule, legal, rng)
            visits = decided_visits(res)
            score = np.where(visits >= share * visits.max(axis=1, keepdims=True), res.q, -np.inf)
            return np.where(legal & (visits > 0), score, -np.inf).argmax(axis=1)

    pos = solver_positions(args.positions, seed=0)
    for run in args.runs:
        print(f"== {run}", flush=True)
        policy = load_policy(Path(run) / "policy", name="judged")
        _judge(policy, pos, args, TreePlayer, MixedEvaluator, mirror_averaged)


def _judge(policy: Any, pos: Any, args: Any, tree_player: Any, mixed: Any, mirrored: Any) -> None:
    """Print one line per search setting of ``args`` for ``policy`` on the positions."""
    from paddlecraft.arenas.games import ConnectFour
    from paddlecraft.arenas.games.search import MCTS
    from paddlecraft.arenas.games.solver import perfect_move_rate
    from paddlecraft.arenas.selfplay import PolicyPlayer

    net = policy.priors_and_values
    settings = policy.search_settings()  # its evaluator, discount and moves-left utility

    def report(label: str, player: Any) -> None:
        t = time.time()
        r = perfect_move_rate(player, pos)
        print(
            f"{label:<36} perfect {r['perfect_move_rate']:.4f}  good {r['good_move_rate']:.4f}"
            f"  ({time.time() - t:.1f} s)",
            flush=True,
        )

    def own(evaluate: Any) -> MCTS:  # the policy's own search, 200 simulations
        return MCTS(ConnectFour, evaluate, 200, "puct", 1.5, discount=settings["discount"],
                    draw_score=settings["draw_score"],
                    moves_left_weight=settings["moves_left_weight"],
                    tactics=settings["tactics"], proofs=settings["proofs"])  # fmt: skip

    report("raw policy", PolicyPlayer(policy))
    for c in args.c_puct:
        for sims in args.simulations:
            tree = MCTS(ConnectFour, settings["evaluate"], sims, "puct", c,
                        discount=policy.value_discount, draw_score=policy.draw_score,
                        moves_left_weight=settings["moves_left_weight"])  # fmt: skip
            report(f"c_puct={c} sims={sims}", tree_player(tree))
    for w in args.moves_left_weight:
        tree = MCTS(ConnectFour, settings["evaluate"], 200, "puct", 1.5,
                    discount=policy.value_discount, draw_score=policy.draw_score,
                    moves_left_weight=w)  # fmt: skip
        report(f"moves_left_weight={w} sims=200", tree_player(tree))
    for tactics, proofs in ((False, False), (True, False), (True, True)) if args.exact else ():
        tree = MCTS(ConnectFour, settings["evaluate"], 200, "puct", 1.5,
                    discount=policy.value_discount, draw_score=policy.draw_score,
                    tactics=tactics, proofs=proofs,
                    moves_left_weight=settings["moves_left_weight"])  # fmt: skip
        report(f"tactics={tactics} proofs={proofs} sims=200", tree_player(tree))
    for mix in args.rollout_mix:
        tree = MCTS(
            ConnectFour, mixed(net, mix), 200, "puct", 1.5,
            discount=policy.value_discount, draw_score=policy.draw_score,
        )  # fmt: skip
        report(f"rollout_mix={mix} sims=200", tree_player(tree))
    choices = (("visits", 0.0), ("value", 0.1), ("value", 0.25), ("lcb", 0.0))
    for rule, share in choices if args.choice else ():
        label = f"own search, move by {rule}" + (f" >= {share:g} top" if rule == "value" else "")
        report(label, tree_player(own(settings["evaluate"]), (rule, share)))
    if args.mirror:
        report("own search, mirror-averaged", tree_player(own(mirrored(settings["evaluate"]))))


if __name__ == "__main__":
    main()
