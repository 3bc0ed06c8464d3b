"""Tree reuse (`TreeReuse`, ``arena.search.reuse``): a search starts from the subtree the
last one left below the move played, its statistics copied exactly, every tree still a
tree of the game; the training controller keeps its trees across moves and a run with it
resumes bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from test_selfplay_search import TTT_MLP, _az_arena, play_out

from paddlecraft.agents import Policy
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour, TicTacToe, random_legal
from paddlecraft.arenas.games.search import PUCTSearch, TreeReuse, choose_moves
from paddlecraft.arenas.games.search_tree import Tree


def _net(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed, position-dependent evaluator: priors and values from the stones."""
    flat = planes.reshape(len(planes), -1)
    w = np.random.default_rng(7).standard_normal((flat.shape[1], masks.shape[1] + 1))
    out = flat @ w
    p = np.exp(out[:, :-1]) * masks
    return p / p.sum(axis=1, keepdims=True), np.tanh(out[:, -1] / 4)


def _check_tree(game: type, tree: Tree, games: int) -> None:
    """Every expanded edge leads to the position its move makes; an edge into an evaluated
    node was visited once more than the node's own edges (the visit that made it), one
    into a node of known value at least that often (visits stop there)."""
    rows = np.concatenate([np.arange(b * tree.nodes, tree.count[b]) for b in range(games)])
    r, a = np.nonzero(tree.child[rows] >= 0)
    r = rows[r]
    c = tree.child[r, a]
    assert (c // tree.nodes == r // tree.nodes).all()  # a game's child stays in its tree
    c2, m2, _, _ = game.play(tree.ncur[r], tree.nmask[r], a)
    assert np.array_equal(c2, tree.ncur[c]) and np.array_equal(m2, tree.nmask[c])
    below = tree.visits[c].sum(axis=1)
    known = ~np.isnan(tree.exact[c])
    assert np.array_equal(tree.visits[r, a][~known], 1 + below[~known])
    assert (tree.visits[r, a][known] >= 1 + below[known] - 1e-9).all()


@pytest.mark.parametrize(
    "game,tactics", [(ConnectFour, True), (ConnectFour, False), (TicTacToe, True)]
)
def test_reused_trees_stay_trees_of_the_game_whole_games_long(game, tactics):
    """Whole batches of games searched with reuse (tactics and proofs on and off): after every search each tree is still a tree of the
    game, and most searches after a game's first start from what the last one kept."""
    rng = np.random.default_rng(0)
    search = PUCTSearch(game, _net, simulations=24, discount=0.95, tactics=tactics, proofs=tactics)  # fmt: skip
    g, reuse = game(12), TreeReuse()
    plies = more = later = 0
    while not g.done.all():
        live = np.flatnonzero(~g.done)
        planes, masks = g.observe(live)
        cur, mask = game.from_planes(planes)
        res = search.search(cur, mask, rng, noise=True, reuse=reuse)
        tree = reuse.last
        _check_tree(game, tree, len(live))
        assert (res.visits.sum(axis=1) >= 24).all()
        if tactics:  # a root with a winning move searched those alone, kept subtree or not
            wins = game.winning_moves(cur, mask) & res.legal
            some = wins.any(axis=1)
            assert (res.visits[some] * ~wins[some] == 0).all()
        if plies:  # from the second move on, a game's search adds 24 visits to what it kept
            more += int((res.visits.sum(axis=1) > 24).sum())
            later += len(live)
        actions = choose_moves(res.visits, np.ones(len(live)), rng)
        reuse.played(actions)
        g.step(actions, live)
        plies += 1
    assert reuse.reused > 0.6 * reuse.searched and more > 0.6 * later


def test_a_kept_subtree_starts_the_next_search_with_its_statistics():
    """The child of the move played (self-play) and a grandchild (an opponent moved
    between) start from exact copies of their nodes' statistics; other positions from
    nothing; one more simulation adds one visit to the copy."""
    rng = np.random.default_rng(3)
    search = PUCTSearch(ConnectFour, _net, simulations=60, discount=0.95)
    g = ConnectFour(4)
    g.step(random_legal(g.legal_mask(), np.random.default_rng(1)))
    planes, masks = g.observe()
    cur, mask = ConnectFour.from_planes(planes)
    reuse = TreeReuse()
    res = search.search(cur, mask, rng, reuse=reuse)
    old = reuse.last
    played = res.visits.argmax(axis=1)
    reuse.played(played)
    kid = old.child[old.roots, played]  # [4] rows of the children
    assert (kid >= 0).all()
    grand_a = old.visits[kid].argmax(axis=1)
    grand = old.child[kid, grand_a]  # the opponent's most visited reply
    positions = [(old.ncur[kid], old.nmask[kid]), (old.ncur[grand], old.nmask[grand])]
    for (c, m), rows in zip(positions, (kid, grand), strict=True):
        t = reuse.start(c, m, 5, ConnectFour.num_actions)
        assert t.nodes == int((t.count - t.roots).max()) + 5
        assert np.array_equal(t.visits[t.roots], old.visits[rows])
        assert np.array_equal(t.total[t.roots], old.total[rows])
        assert np.array_equal(t.prior[t.roots], old.prior[rows])
        sizes = t.count - t.roots
        assert (sizes == [len(old.subtree_rows(np.array([r]))[1]) for r in rows]).all()
        _check_tree(ConnectFour, t, 4)
    # one simulation on top of the kept child: its visits plus one
    one = PUCTSearch(ConnectFour, _net, simulations=1, discount=0.95)
    again = one.search(old.ncur[kid], old.nmask[kid], rng, reuse=reuse)
    assert np.array_equal(again.visits.sum(axis=1), old.visits[kid].sum(axis=1) + 1)
    fresh = reuse.start(cur, mask, 5, ConnectFour.num_actions)  # the old roots: gone
    assert (fresh.visits == 0).all() and (fresh.count == fresh.roots + 1).all()


def test_the_training_controller_reuses_its_trees_and_resumes_bit_identically(make_scope):
    from paddlecraft.arenas.selfplay.alphazero import search_controller

    seed_everything(0)
    policy = Policy(make_scope("reuse"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _az_arena(policy, search={"reuse": True})
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
    play_out(act, TicTacToe, 16)
    assert act.reuse.reused > 0.5 * act.reuse.searched  # every move after a game's first
    arena._take_snapshot()
    metrics = arena._collect()["metrics"]
    assert 0.4 < metrics["search_reused"] < 1.0  # the games against anchors too
    seed_everything(0)
    policy = Policy("policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    passed = check_arena(_az_arena(policy, search={"reuse": True}), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed


def test_a_search_player_with_reuse_adds_its_simulations_to_the_kept_visits():
    """`SearchPlayer(reuse=True)` moving first against a searching opponent, 6 games in
    one batch as `versus_solver` plays them: the first move's search has its 40
    simulations at the root, later ones start from the grandchild the opponent's reply
    left, with the visits spent there before (replies the search expected carry many);
    a player without reuse searches every move afresh, 40 visits each."""
    from paddlecraft.arenas.selfplay import SearchPlayer

    mlp = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 16,
           "hidden_layers": 2}  # fmt: skip
    # a fixed name: the initial weights follow seed and name, whatever ran before
    policy = Policy("reuse_player", encoder=mlp, obs_shape=[6, 7, 2], num_actions=7, seed=0)
    opponent = SearchPlayer(policy, "connect_four", 40)
    for reuse in (True, False):
        player = SearchPlayer(policy, "connect_four", 40, reuse=reuse)
        roots: list[np.ndarray] = []  # the root visits of each of the player's searches
        search = player.search.search

        def spy(*args, search=search, roots=roots, **kwargs):
            res = search(*args, **kwargs)
            roots.append(res.visits.sum(axis=1))
            return res

        player.search.search = spy
        rng = np.random.default_rng(4)
        g = ConnectFour(6)
        while not g.done.all():
            idx = np.flatnonzero(~g.done)
            planes, masks = g.observe(idx)
            first = g.to_move[idx] == 0
            a = random_legal(masks, rng)
            if (~first).any():
                a[~first] = opponent.act(planes[~first], masks[~first], rng=rng)
            if first.any():
                a[first] = player.act(planes[first], masks[first], rng=rng)
                assert masks[first][np.arange(first.sum()), a[first]].all()  # legal
            g.step(a, idx)
        assert player.name == ("search40reuse" if reuse else "search40")
        assert (roots[0] == 40).all() and len(roots) >= 8
        later = np.concatenate(roots[1:])
        if reuse:
            # a kept subtree's visits plus this search's 40 (an untrained network spreads
            # its visits, so the reply played often carries none or a few); only a
            # position found among the kept subtrees starts with visits
            assert (later >= 40).all() and (later > 40).sum() >= 5
            assert (later > 40).sum() <= player.reuse.reused < player.reuse.searched
        else:
            assert player.reuse is None and (later == 40).all()
