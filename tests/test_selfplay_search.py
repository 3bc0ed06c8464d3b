"""Self-play with search: AlphaZero-style training (targets, resume), the search player in
PettingZoo's own environments, and the tournament's rating fit."""

from __future__ import annotations

import numpy as np
import pytest
from charts import assert_chart
from selfplay_kit import merged

from paddlecraft.agents import Policy
from paddlecraft.arenas import SelfPlayArena, check_arena, search_player
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour, TicTacToe, random_legal

TTT_MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": 18,
    "hidden_size": 32,
    "num_classes": 32,
}
C4_MLP = {**TTT_MLP, "input_size": 84}


def play_out(act, game: type, n: int) -> None:
    """Play ``n`` games of ``game`` to the end with the collection controller ``act``
    moving on both sides."""
    g = game(n)
    while not g.done.all():
        live = np.flatnonzero(~g.done)
        planes, masks = g.observe(live)
        actions, _ = act(planes, masks)
        g.step(actions, live)


def _az_arena(policy, **kw):
    base = {
        "data": "tictactoe",
        "algo": "alphazero",
        "epochs": 2,
        "steps_per_epoch": 2,
        "games_per_step": 12,
        "augment_mirror": True,
        "update": {"minibatch_size": 32, "epochs": 2},
        "search": {"simulations": 8},
        "league": {"snapshot_every": 1, "latest_ratio": 0.5, "train_anchors": {"random": 0.25}},
        "eval": {"games": {"random": 4, "minimax": 4}},
    }
    return SelfPlayArena({"policy": policy}, **merged(base, kw))


def test_alphazero_targets_are_visit_distributions_and_outcomes(make_scope):
    seed_everything(0)
    policy = Policy(make_scope("az"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _az_arena(policy)
    arena._take_snapshot()
    rollout = arena._collect()
    recs = rollout["records"]
    pi = np.concatenate([r["pi"] for r in recs])
    masks = np.concatenate([r["mask"] for r in recs])
    actions = np.concatenate([r["action"] for r in recs])
    assert np.allclose(pi.sum(1), 1) and (pi[~masks] == 0).all()
    assert (pi[np.arange(len(pi)), actions] > 0).all()  # moves come from the visits
    # 8 simulations: visit fractions are multiples of 1/8
    assert np.allclose(pi * 8, np.round(pi * 8), atol=1e-5)
    from paddlecraft.arenas.selfplay.targets import outcome_samples

    data = outcome_samples(recs, rollout["winner"])
    ply = np.concatenate([r["ply"] for r in recs])
    game = np.concatenate([r["game"] for r in recs])
    w = rollout["winner"][game]
    assert np.array_equal(data["z"] == 1, w == ply % 2)  # +1 exactly where the mover won
    assert np.array_equal(data["z"] == 0, w < 0)
    m = arena.train_step(0)
    assert np.isfinite(m["loss"]) and m["policy_loss"] > 0 and "clip_frac" not in m


def test_a_collection_reuses_its_network_results(make_scope):
    """One `CachedEvaluator` per controller (a collection): a position met again is looked
    up, not sent to the network."""
    from paddlecraft.arenas.games.search import CachedEvaluator
    from paddlecraft.arenas.selfplay.alphazero import search_controller

    seed_everything(0)
    policy = Policy(make_scope("cache"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _az_arena(policy)
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
    evaluator = act.search.evaluator
    assert type(evaluator) is CachedEvaluator
    play_out(act, TicTacToe, 16)
    # each move's search starts inside the last one's tree
    assert evaluator.lookups > 0 and evaluator.hits / evaluator.lookups > 0.3
    assert evaluator._size == evaluator.lookups - evaluator.hits


def test_alphazero_run_resumes_bit_identically():
    """Root noise and sampled moves: their draws come from the run's streams."""
    seed_everything(0)
    policy = Policy("policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    arena = _az_arena(policy)
    passed = check_arena(arena, steps=2)
    assert "resume from a checkpoint is bit-identical" in passed


# search collection in Ray workers: tests/ray_netns_cases.py (loopback-only namespace)


@pytest.mark.parametrize("game", ["connect_four", "tictactoe"])
def test_search_player_plays_legal_full_games_in_pettingzoo(game, make_scope, tmp_path):
    classic = pytest.importorskip("pettingzoo.classic")
    rules = {"connect_four": ConnectFour, "tictactoe": TicTacToe}[game]
    enc = C4_MLP if game == "connect_four" else TTT_MLP
    policy = Policy(
        make_scope("sp"),
        encoder=enc,
        obs_shape=list(rules.obs_shape()),
        num_actions=rules.num_actions,
        seed=0,
    )
    policy.save(tmp_path / "policy")  # a run folder holds policy/
    player = search_player(tmp_path, game=game, simulations=16, name=make_scope("loaded"))
    env = getattr(classic, f"{game}_v3").env()
    moves, ended = 0, 0
    for seed in range(3):
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        searcher = env.agents[seed % 2]  # both seats
        for agent in env.agent_iter():
            obs, reward, term, trunc, _ = env.last()
            if term or trunc:
                action = None
            elif agent == searcher:
                action = player(obs["observation"], obs["action_mask"])
                assert obs["action_mask"][action] == 1
                moves += 1
            else:
                action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
            env.step(action)
        # a game over: PettingZoo's rewards sum to 0 (a win and a loss, or a draw)
        ended += sum(env.rewards.values()) == 0 and not env.agents
    env.close()
    assert ended == 3 and moves >= 3 * (2 if game == "tictactoe" else 3)


def test_bradley_terry_fit_recovers_known_ratings():
    from paddlecraft.arenas.selfplay.tournament import fit_ratings

    true = np.array([0.0, 200.0, 400.0])  # Elo
    rng = np.random.default_rng(0)
    results = {}
    for i in range(3):
        for j in range(i + 1, 3):
            p = 1 / (1 + 10 ** ((true[j] - true[i]) / 400))
            results[(i, j)] = np.where(rng.random(4000) < p, 1, -1)
    r, se = fit_ratings(["random", "b", "c"], results)
    assert r[0] == 0 and se[0] == 0
    assert np.all(np.abs(r - true) < 2.5 * np.maximum(se, 1e-9) + 1e-9)
    assert 5 < se[1] < 30  # thousands of games: intervals of a few tens of points
    # a player that won every game still gets a finite rating, above the others
    results[(0, 1)] = -np.ones(10, np.int64)
    r2, se2 = fit_ratings(["random", "b", "c"], {(0, 1): results[(0, 1)]})
    assert np.isfinite(r2).all() and r2[1] > 300 and se2[1] > 100


def test_tournament_command_writes_table_and_plot(make_scope, tmp_path):
    from paddlecraft.arenas.selfplay.tournament import main, make_entrant

    policy = Policy(make_scope("tp"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    policy.save(tmp_path / "run" / "policy")
    report = main([
        "--game", "tictactoe", "--games", "4", "--out", str(tmp_path / "out"),
        "--players", "random", "minimax", f"net={tmp_path / 'run'}:search8",
        f"{tmp_path / 'run'}:search8reuse",
    ])  # fmt: skip
    names = [r["player"] for r in report["table"]]
    assert sorted(names) == ["minimax", "net", "random", "run:search8reuse"]
    assert len(report["pairs"]) == 6 and all(p["wins"] + p["draws"] + p["losses"] == 4
                                             for p in report["pairs"])  # fmt: skip
    mm = next(p for p in report["pairs"] if {p["a"], p["b"]} == {"random", "minimax"})
    assert (mm["wins"] if mm["a"] == "random" else mm["losses"]) == 0  # perfect play never loses
    rating = {r["player"]: r["rating"] for r in report["table"]}
    assert rating["random"] == 0 and rating["minimax"] > 0
    for f in ("tournament.json", "tournament.md"):
        assert (tmp_path / "out" / f).stat().st_size > 100
    assert_chart(tmp_path / "out" / "tournament.png", (900, 230))  # 4 rows: 110 + 30 each
    reusing = make_entrant(f"{tmp_path / 'run'}:search8reuse", "tictactoe").player
    assert reusing.reuse is not None and make_entrant(f"{tmp_path / 'run'}:search8",
                                                      "tictactoe").player.reuse is None  # fmt: skip
    with pytest.raises(ValueError, match="search<N>reuse"):
        make_entrant(f"{tmp_path / 'run'}:search8again", "tictactoe")


def test_init_policy_starts_from_saved_weights(make_scope, tmp_path):
    """Search training can start from another run's network (arena.init_policy)."""
    source = Policy(make_scope("src"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=1)
    source.save(tmp_path / "run" / "policy")
    policy = Policy(make_scope("dst"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=2)
    g = TicTacToe(16)
    rng = np.random.default_rng(0)
    for _ in range(3):
        g.step(random_legal(g.legal_mask(), rng))
    obs, masks = g.observe()

    def values(p):
        return p.priors_and_values(obs, masks)[1]

    before = values(policy)
    _az_arena(policy, init_policy=str(tmp_path / "run"))
    assert np.array_equal(values(policy), values(source))
    assert not np.array_equal(before, values(source))
    with pytest.raises(ValueError, match="init_policy"):
        _az_arena(policy, init_policy=str(tmp_path / "nothing"))


def _ppo_then_search(policy, **kw):
    """4 updates: PPO for the first 3, then 1 with search (8 games)."""
    search = {"updates": 1, "games_per_step": 8, **kw.pop("search", {})}
    return _az_arena(policy, **{"algo": "ppo", **kw, "search": search})


POLY = {  # an epoch-stepped schedule the search updates follow too
    "_target_": "paddle.optimizer.lr.PolynomialDecay",
    "_partial_": True,
    "decay_steps": 2,
    "end_lr": 1e-4,
}


def test_ppo_then_search_switches_algorithm_and_games(make_scope):
    seed_everything(0)
    policy = Policy(
        make_scope("phase"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0,
        lr=0.005, lr_scheduler=POLY,
    )  # fmt: skip
    arena = _ppo_then_search(policy)
    seen = []
    for update in range(4):
        m = arena.train_step(update)
        seen.append((m["search_update"], "clip_frac" in m, m["games_vs_self"] + m["games_vs_pool"]))
        # the schedule's 0.005, then its epoch-1 value, in the search update as well
        assert policy.optimizer.get_lr() == pytest.approx([0.005, 0.005, 0.00255, 0.00255][update])
        if update == 1:
            arena.on_epoch_end(0)
    # games against the latest self and the pool: 12 x (1 - 0.25 random) per PPO update,
    # 8 x 0.75 in the search update
    assert [s[:2] for s in seen] == [(0.0, True)] * 3 + [(1.0, False)]
    assert [s[2] for s in seen] == [9.0, 9.0, 9.0, 6.0]


def test_search_every_interleaves_ppo_and_search_updates(make_scope):
    """search.updates=4, search.every=2: PPO, search, PPO, search; the PPO updates between
    search updates and the search updates alike train at the schedule's rate."""
    seed_everything(0)
    policy = Policy(
        make_scope("mix"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0,
        lr=0.005, lr_scheduler=POLY,
    )  # fmt: skip
    arena = _ppo_then_search(policy, search={"updates": 4, "every": 2}, epochs=1, steps_per_epoch=4)
    seen = []
    for update in range(4):
        m = arena.train_step(update)
        seen.append((m["search_update"], "clip_frac" in m, m["games_vs_self"] + m["games_vs_pool"]))
        assert policy.optimizer.get_lr() == pytest.approx(0.005)
    assert seen == [(0.0, True, 9.0), (1.0, False, 6.0)] * 2


def test_interleaved_search_resumes_bit_identically():
    seed_everything(0)
    policy = Policy(
        "policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0, lr_scheduler=POLY
    )
    # the checkpoint falls between a search update and a PPO update
    arena = _ppo_then_search(policy, search={"updates": 4, "every": 2})
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)


def test_ppo_then_search_resumes_bit_identically_across_the_switch():
    seed_everything(0)
    policy = Policy(
        "policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0, lr_scheduler=POLY
    )
    # the checkpoint is taken after update 2: the resumed half does PPO, then search
    passed = check_arena(_ppo_then_search(policy), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed
