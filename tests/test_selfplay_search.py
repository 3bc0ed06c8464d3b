"""Self-play with search: AlphaZero-style training (targets, resume), the search player in
PettingZoo's own environments, and the tournament's rating fit."""

from __future__ import annotations

import numpy as np
import pytest
from charts import assert_chart
from selfplay_kit import merged, ttt_policy

from paddlecraft.agents import Policy
from paddlecraft.agents.settings import ConfigError
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


def test_explored_moves_are_the_sampled_ones_below_the_most_visited(make_scope):
    """The collection records ``explored``: a move sampled (the first
    ``temperature_moves`` plies) that its search visited less than its most visited
    move; greedy plies are never explored."""
    seed_everything(0)
    policy = Policy(make_scope("ex"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    # 32 simulations: with 8 the visits on a flat prior are mostly ties at one visit, a
    # sampled move rarely falls below the most visited and whole collections held none
    arena = _az_arena(policy, search={"temperature_moves": 2, "simulations": 32}, games_per_step=24)
    arena._take_snapshot()
    recs = arena._collect()["records"]
    explored = np.concatenate([r["explored"] for r in recs])
    ply = np.concatenate([r["ply"] for r in recs])
    pi = np.concatenate([r["pi"] for r in recs])
    chosen = pi[np.arange(len(pi)), np.concatenate([r["action"] for r in recs])]
    below = chosen < pi.max(axis=1) - 1e-6  # pi: the visits the move was chosen from
    assert np.array_equal(explored, below & (ply < 2))
    assert explored.any() and not explored[ply >= 2].any()


def test_late_moves_sample_cooler_after_the_first_plies(make_scope):
    """``late_moves`` plies after ``temperature_moves`` are sampled at ``late_temperature``
    (the collection's moves below the most visited fall in those plies too), then the
    most visited move is played."""
    from paddlecraft.arenas.selfplay.alphazero import sampling_temperature
    from paddlecraft.arenas.selfplay.config import SearchConfig

    cfg = SearchConfig(temperature_moves=2, late_moves=3, late_temperature=0.25)
    np.testing.assert_array_equal(
        sampling_temperature(np.arange(8), cfg), [1, 1, 0.25, 0.25, 0.25, 0, 0, 0]
    )
    assert not sampling_temperature(np.arange(9), SearchConfig(temperature_moves=2))[2:].any()
    defender = SearchConfig(temperature_moves=2, late_moves=5, late_temperature=1, late_player=1)
    np.testing.assert_array_equal(
        sampling_temperature(np.arange(9), defender), [1, 1, 0, 1, 0, 1, 0, 0, 0]
    )
    first = SearchConfig(temperature_moves=2, late_moves=5, late_temperature=1, late_player=0)
    np.testing.assert_array_equal(
        sampling_temperature(np.arange(9), first), [1, 1, 1, 0, 1, 0, 1, 0, 0]
    )
    seed_everything(0)
    policy = Policy(make_scope("late"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    search = {"temperature_moves": 1, "late_moves": 2, "late_temperature": 0.5}
    arena = _az_arena(policy, search=search, games_per_step=48)
    arena._take_snapshot()
    recs = arena._collect()["records"]
    explored = np.concatenate([r["explored"] for r in recs])
    ply = np.concatenate([r["ply"] for r in recs])
    assert explored[(ply >= 1) & (ply < 3)].any() and not explored[ply >= 3].any()


def test_second_player_simulations_search_the_odd_plies_deeper(make_scope):
    """``second_player_simulations``: the second player's training moves (odd plies) are
    searched with that many simulations, the first player's with ``simulations``: with 2
    a root visits at most 2 moves, with 16 more."""
    seed_everything(0)
    policy = Policy(make_scope("deep"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)

    def moves_visited(second):  # the most root moves visited: first player, second player
        search = {"simulations": 2, "second_player_simulations": second, "temperature_moves": 0}
        arena = _az_arena(policy, search=search, games_per_step=24)
        arena._take_snapshot()
        recs = arena._collect()["records"]
        tried = np.concatenate([(r["pi"] > 0).sum(axis=1) for r in recs])
        odd = np.concatenate([r["ply"] for r in recs]) % 2 == 1
        return tried[~odd].max(), tried[odd].max()

    assert max(moves_visited(None)) <= 2
    first, second = moves_visited(16)
    assert first <= 2 < second


def test_ply_simulations_size_the_training_searches_by_ply(make_scope):
    """``ply_simulations``: from each listed ply on, the training searches add that many
    simulations: with 2 a root visits at most 2 moves, with 16 more; a call whose games
    stand at plies of two sizes is refused (games are played in lockstep)."""
    from paddlecraft.arenas.selfplay.alphazero import simulations_at

    seed_everything(0)
    policy = Policy(make_scope("plysims"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    search = {"simulations": 2, "ply_simulations": [[2, 16], [5, 2]], "temperature_moves": 0}
    arena = _az_arena(policy, search=search, games_per_step=24)
    arena._take_snapshot()
    recs = arena._collect()["records"]
    tried = np.concatenate([(r["pi"] > 0).sum(axis=1) for r in recs])  # root moves visited
    ply = np.concatenate([r["ply"] for r in recs])
    middle = (ply >= 2) & (ply < 5)
    assert tried[~middle].max() <= 2 < np.median(tried[middle])  # (a forced move: fewer)
    schedule = [(2, 16), (5, 2)]
    sizes = [simulations_at(np.array([p, p]), schedule, 7) for p in range(7)]
    assert sizes == [7, 7, 16, 16, 16, 2, 2]
    with pytest.raises(
        ValueError, match="simulations_at: one call mixes plies of two search sizes"
    ):
        simulations_at(np.array([4, 5]), schedule, 7)
    # with tree reuse (the Connect Four default's) the sized searches keep one another's trees
    search = {"simulations": 2, "ply_simulations": [[2, 12], [5, 3]], "reuse": True}
    passed = check_arena(_az_arena(ttt_policy("policy"), search=search), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed


def test_explored_values_search_trains_the_positions_before_the_last_explored_move():
    """``explored_values="search"``: the positions of a game up to (and at) its last
    explored move train toward the search's value, the later ones toward the discounted
    result (or a proof's value); a game without an explored move keeps its results."""
    from paddlecraft.arenas.selfplay.targets import outcome_samples

    gamma = 0.95
    plies = (0, 1, 2, 3, 0, 1)
    games = (0, 0, 0, 0, 1, 1)
    explored = (False, True, False, False, False, False)
    q = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    records = [
        {"ply": np.array([p]), "game": np.array([g]), "obs": np.zeros((1, 3, 3, 2), np.int8),
         "mask": np.ones((1, 9), bool), "pi": np.ones((1, 9)) / 9, "root_value": np.array([v]),
         "explored": np.array([e]), "root_proven": np.array([i == 2])}
        for i, (p, g, e, v) in enumerate(zip(plies, games, explored, q))
    ]  # fmt: skip
    winner = np.array([1, 0])  # game 0: the second player's move at ply 3; game 1: ply 2
    results = [-(gamma**3), gamma**2, -gamma, 1.0, gamma**2, -gamma]
    z = outcome_samples(records, winner, gamma)["z"]
    np.testing.assert_allclose(z, results, rtol=1e-6)
    z = outcome_samples(records, winner, gamma, explored_values="search")["z"]
    np.testing.assert_allclose(z, [0.1, 0.2, -gamma, 1.0, gamma**2, -gamma], rtol=1e-6)
    z = outcome_samples(records, winner, gamma, proven_values=True, explored_values="search")
    np.testing.assert_allclose(z["z"], [0.1, 0.2, 0.3, 1.0, gamma**2, -gamma], rtol=1e-6)
    with pytest.raises(ValueError, match="explored_values"):
        outcome_samples(records, winner, gamma, explored_values="searched")


def test_explored_values_setting_is_checked_naming_it(make_scope):
    policy = Policy(make_scope("exv"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    with pytest.raises(ConfigError, match=r"arena.update.explored_values='q'.*outcome, search"):
        _az_arena(policy, update={"explored_values": "q"})


def test_completed_q_targets_are_the_search_improved_policy(make_scope):
    """search.policy_target=completed_q: each recorded target is completed_q_policy of the search
    that chose the move (re-run here from the same generator state), not its visits."""
    from paddlecraft.arenas.games.search import PUCTSearch, completed_q_policy
    from paddlecraft.arenas.selfplay.alphazero import search_controller

    seed_everything(0)
    policy = Policy(make_scope("cq"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _az_arena(policy, search={"policy_target": "completed_q"})
    g = TicTacToe(6)
    g.step(random_legal(g.legal_mask(), np.random.default_rng(1)))
    planes, masks = g.observe()
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
    actions, info = act(planes, masks)
    search = PUCTSearch(TicTacToe, policy.priors_and_values, simulations=8)
    res = search.search(g.cur, g.mask, np.random.default_rng(5), noise=True)
    assert np.allclose(info["pi"], completed_q_policy(res), atol=1e-6)
    assert not np.allclose(info["pi"] * 8, np.round(info["pi"] * 8), atol=1e-3)  # not visits
    assert (info["pi"][~masks] == 0).all() and (res.visits[np.arange(6), actions] > 0).all()
    m = arena.train_step(0)
    assert np.isfinite(m["loss"]) and m["policy_loss"] > 0


def test_near_best_visits_keep_the_moves_within_the_cutoff_of_the_most_visited():
    """Leela's temperature value cutoff: a sampled move's Q within ``cutoff`` of the most
    visited move's or above it; the most visited always stays; None leaves the visits as they are."""
    from paddlecraft.arenas.games.search_results import near_best_visits

    visits = np.array([[10, 6, 3, 0], [2, 9, 4, 1]])
    q = np.array([[0.2, 0.15, -0.3, 0.0], [0.9, -0.1, -0.25, -0.05]])
    np.testing.assert_array_equal(near_best_visits(visits, q, 0.1), [[10, 6, 0, 0], [2, 9, 0, 1]])
    # a move rated above the most visited one stays too (row 2: moves 0 and 3)
    np.testing.assert_array_equal(near_best_visits(visits, q, 0.0), [[10, 0, 0, 0], [2, 9, 0, 1]])
    np.testing.assert_array_equal(near_best_visits(visits, q, 2.0), visits)
    assert near_best_visits(visits, q, None) is visits


def test_temperature_value_cutoff_samples_training_moves_near_the_best(make_scope):
    """search.temperature_value_cutoff: the sampled training moves are those whose Q is
    within the cutoff of the most visited move's (the search re-run from the same
    generator state gives their Q); without it the same searches sample worse moves too."""
    from paddlecraft.arenas.games.search import PUCTSearch
    from paddlecraft.arenas.selfplay.alphazero import search_controller

    seed_everything(0)
    policy = Policy(make_scope("cut"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    g = TicTacToe(64)
    g.step(random_legal(g.legal_mask(), np.random.default_rng(1)))
    planes, masks = g.observe()
    search = PUCTSearch(TicTacToe, policy.priors_and_values, simulations=8)
    res = search.search(g.cur, g.mask, np.random.default_rng(5), noise=True)
    rows = np.arange(64)
    best_q = res.q[rows, res.visits.argmax(axis=1)]
    gaps = {}
    for cutoff in (0.05, None):
        arena = _az_arena(policy, search={"temperature_value_cutoff": cutoff})
        act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
        actions, info = act(planes, masks)
        assert np.allclose(info["pi"], res.visits / 8, atol=1e-6)  # the same searches
        gaps[cutoff] = best_q - res.q[rows, actions]
    assert (gaps[0.05] <= 0.05 + 1e-6).all()
    assert (gaps[None] > 0.05 + 1e-6).sum() >= 5  # the moves the cutoff keeps out
    with pytest.raises(
        ConfigError, match=r"arena.search.temperature_value_cutoff=-0.1: must be in \[0, 2\]"
    ):
        _az_arena(policy, search={"temperature_value_cutoff": -0.1})


def test_playout_cap_randomisation_trains_on_the_full_searches_only(make_scope):
    """search.full_fraction < 1 (KataGo): a share of the moves gets the full search with
    noise and becomes a sample; the rest a fast search, played and not trained on."""
    from paddlecraft.arenas.selfplay.alphazero import search_controller
    from paddlecraft.arenas.selfplay.updates import apply_update

    seed_everything(0)
    policy = Policy(make_scope("pcr"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    cap = {"full_fraction": 0.5, "fast_simulations": 2}
    arena = _az_arena(policy, search=cap, update={"replay": 1000})
    g = TicTacToe(40)
    g.step(random_legal(g.legal_mask(), np.random.default_rng(1)))
    planes, masks = g.observe()
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
    _, info = act(planes, masks)
    full = info["full_search"]
    assert 10 < full.sum() < 30  # about half of 40
    visits = np.round(info["pi"] * np.where(full, 8, 2)[:, None])  # back to visit counts
    assert np.allclose(info["pi"] * np.where(full, 8, 2)[:, None], visits, atol=1e-4)
    assert (info["pi"][~masks] == 0).all()
    arena._take_snapshot()
    rollout = arena._collect()
    trained = sum(int(r["full_search"].sum()) for r in rollout["records"])
    assert 0 < trained < rollout["metrics"]["positions"]
    m = apply_update("alphazero", policy, rollout, arena.spec, arena.cfg, np.random.default_rng(0),
                     arena.replay)  # fmt: skip
    assert m["replay_size"] == 2 * trained  # the full searches' samples and their mirror images
    # an update whose moves were all fast searches has nothing to train on: no step at all
    fast = {**rollout, "records": [{**r, "full_search": r["full_search"] & False}
                                   for r in rollout["records"]]}  # fmt: skip
    before = {k: v.numpy().copy() for k, v in policy.state_dict().items()}
    for replay in (None, type(arena.replay)(1000)):
        assert apply_update("alphazero", policy, fast, arena.spec, arena.cfg,
                            np.random.default_rng(0), replay) == ({} if replay is None else
                                                                  {"replay_size": 0.0})  # fmt: skip
    assert all(np.array_equal(before[k], v.numpy()) for k, v in policy.state_dict().items())
    for bad, expect in (({"full_fraction": 0.0}, "arena.search.full_fraction"),
                        ({**cap, "fast_simulations": 9}, r"arena.search.fast_simulations=9: must be in \[1, ")):  # fmt: skip
        with pytest.raises(ConfigError, match=expect):
            _az_arena(policy, search=bad)


@pytest.mark.parametrize("cache", [True, False])
def test_a_collection_reuses_its_network_results_unless_told_not_to(make_scope, cache):
    """arena.search.cache: one `CachedEvaluator` per controller (a collection), shared by
    its full and fast searches; false: every leaf goes to the network."""
    from paddlecraft.arenas.games.search import CachedEvaluator, NetworkEvaluator
    from paddlecraft.arenas.selfplay.alphazero import search_controller

    seed_everything(0)
    policy = Policy(make_scope("cache"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    search = {"cache": cache, "full_fraction": 0.5, "fast_simulations": 2}
    arena = _az_arena(policy, search=search)
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
    evaluator = act.search.evaluator
    assert type(evaluator) is (CachedEvaluator if cache else NetworkEvaluator)
    assert (act.fast.evaluator is evaluator) == cache  # one store for both searches
    play_out(act, TicTacToe, 16)
    if cache:  # each move's search starts inside the last one's tree
        assert evaluator.lookups > 0 and evaluator.hits / evaluator.lookups > 0.3
        assert evaluator._size == evaluator.lookups - evaluator.hits


def test_alphazero_run_resumes_bit_identically():
    """With playout cap randomisation on: its draws come from the run's streams too."""
    seed_everything(0)
    policy = Policy("policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    arena = _az_arena(policy, search={"full_fraction": 0.5, "fast_simulations": 2})
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
    """4 updates: PPO for the first 3, then 1 with search (8 games at lr 0.02)."""
    search = {"updates": 1, "games_per_step": 8, "lr": 0.02, **kw.pop("search", {})}
    return _az_arena(policy, **{"algo": "ppo", **kw, "search": search})


POLY = {  # an epoch-stepped schedule the search updates override
    "_target_": "paddle.optimizer.lr.PolynomialDecay",
    "_partial_": True,
    "decay_steps": 2,
    "end_lr": 1e-4,
}


def test_ppo_then_search_switches_algorithm_games_and_lr(make_scope):
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
        # the schedule's 0.005, then its epoch-1 value, then search.lr in the search update
        assert policy.optimizer.get_lr() == pytest.approx([0.005, 0.005, 0.00255, 0.02][update])
        if update == 1:
            arena.on_epoch_end(0)
    # games against the latest self and the pool: 12 x (1 - 0.25 random) per PPO update,
    # 8 x 0.75 in the search update
    assert [s[:2] for s in seen] == [(0.0, True)] * 3 + [(1.0, False)]
    assert [s[2] for s in seen] == [9.0, 9.0, 9.0, 6.0]


def test_search_every_interleaves_ppo_and_search_updates(make_scope):
    """search.updates=4, search.every=2: PPO, search, PPO, search; the PPO updates between
    search updates train at the schedule's rate, the search updates at search.lr."""
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
        assert policy.optimizer.get_lr() == pytest.approx([0.005, 0.02][update % 2])
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


def test_policy_coef_zero_trains_the_value_only(make_scope):
    """update.policy_coef=0: the visit counts do not train the policy head; the value head learns."""
    seed_everything(0)
    policy = Policy(make_scope("vonly"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _az_arena(policy, update={"policy_coef": 0.0})
    before = {p.name: p.numpy().copy() for p in policy.parameters()}
    arena.train_step(0)
    moved = {p.name for p in policy.parameters() if not np.array_equal(before[p.name], p.numpy())}
    assert moved and not any(".policy_head." in n for n in moved)
    assert any(".value_head." in n for n in moved)


def test_openings_script_judges_each_sampled_ply_with_the_solver(make_scope, tmp_path, capsys):
    """``scripts/selfplay_openings.py``: every sampled ply of every game is judged, the
    per-game count of result-changing moves is the per-ply shares' sum, and a bad cutoff
    is refused naming the setting."""
    pytest.importorskip("bitbully")  # the solver extra (in the test extra)
    import yaml
    from selfplay_kit import script

    seed_everything(0)
    run = tmp_path / "run"
    policy = Policy(make_scope("open"), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7)
    policy.save(run / "policy")
    search = {"simulations": 6, "temperature_moves": 5}
    config = {"data": {"loader": {"name": "connect_four"}}, "arena": {"search": search}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    openings = script("selfplay_openings")
    out = openings.main([str(run), "--games", "12"])
    assert [r["ply"] for r in out["rows"]] == [0, 1, 2, 3, 4]
    assert all(r["moves"] == 12 for r in out["rows"])  # no game ends before ply 7
    per_game = sum(r["result_changing"] for r in out["rows"])
    assert out["result_changing_per_game"] == pytest.approx(per_game)
    assert per_game > 0 and out["cutoff"] is None  # an untrained network blunders
    assert all(r["result_changing_most_visited"] <= r["result_changing"] for r in out["rows"])
    assert "| 0 | 12 |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        openings.main([str(run), "--cutoff", "-1"])
    assert (
        "arena.search.temperature_value_cutoff=-1.0: must be in [0, 2]" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        openings.main([str(tmp_path / "nowhere")])
    assert "not a self-play run folder" in capsys.readouterr().err
