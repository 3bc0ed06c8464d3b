"""Board games: rules against a brute-force reference, masks, terminal handling, the vector
env, the baselines (minimax, MCTS) and the PettingZoo adapter."""

from __future__ import annotations

import numpy as np
import pytest

from paddlecraft.arenas.games import (
    BoardGameVectorEnv,
    ConnectFour,
    ConnectFourVectorEnv,
    GameSpec,
    IllegalMoveError,
    MCTSPlayer,
    MinimaxPlayer,
    RandomPlayer,
    TicTacToe,
    TicTacToeVectorEnv,
    random_legal,
)
from paddlecraft.arenas.games.baselines import tictactoe_table

# ---------------------------------------------------------------------- brute-force reference


class Reference:
    """A plain-Python board (PettingZoo's layout: row 0 on top) with exhaustive line checks."""

    def __init__(self, rows: int, cols: int, k: int, gravity: bool) -> None:
        self.rows, self.cols, self.k, self.gravity = rows, cols, k, gravity
        self.board = [[0] * cols for _ in range(rows)]  # 0 empty, 1 first player, 2 second
        self.moves = 0
        self.winner = -1
        self.done = False

    def legal(self) -> list[bool]:
        if self.gravity:
            return [self.board[0][c] == 0 for c in range(self.cols)]
        return [
            self.board[i // self.cols][i % self.cols] == 0 for i in range(self.rows * self.cols)
        ]

    def play(self, a: int) -> bool:
        piece = 1 + self.moves % 2
        if self.gravity:
            r = max(r for r in range(self.rows) if self.board[r][a] == 0)
            c = a
        else:
            r, c = divmod(a, self.cols)
        self.board[r][c] = piece
        self.moves += 1
        won = self._line(piece)
        if won:
            self.winner = piece - 1
        self.done = won or self.moves == self.rows * self.cols
        return won

    def _line(self, piece: int) -> bool:
        b, k = self.board, self.k
        for r in range(self.rows):
            for c in range(self.cols):
                for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                    cells = [(r + i * dr, c + i * dc) for i in range(k)]
                    if all(0 <= y < self.rows and 0 <= x < self.cols for y, x in cells) and all(
                        b[y][x] == piece for y, x in cells
                    ):
                        return True
        return False

    def planes(self) -> np.ndarray:
        me, other = 1 + self.moves % 2, 2 - self.moves % 2
        arr = np.array(self.board)
        return np.stack([arr == me, arr == other], axis=-1).astype(np.int8)


def _reference(game: type) -> Reference:
    if game is TicTacToe:
        return Reference(3, 3, 3, gravity=False)
    return Reference(6, 7, 4, gravity=True)


@pytest.mark.parametrize("game_cls", [TicTacToe, ConnectFour])
def test_random_games_match_brute_force_reference(game_cls):
    n = 200
    rng = np.random.default_rng(0)
    game = game_cls(n)
    refs = [_reference(game_cls) for _ in range(n)]
    saw_win = saw_draw = False
    while not game.done.all():
        idx = np.flatnonzero(~game.done)
        planes, masks = game.observe(idx)
        for j, i in enumerate(idx):
            assert np.array_equal(planes[j], refs[i].planes())
            assert masks[j].tolist() == refs[i].legal()
        actions = random_legal(masks, rng)
        won, done = game.step(actions, idx)
        for j, i in enumerate(idx):
            assert refs[i].play(int(actions[j])) == won[j]
            assert refs[i].done == done[j]
            assert refs[i].winner == game.winner[i]
            saw_win |= bool(won[j])
            saw_draw |= bool(done[j] and not won[j])
    assert saw_win
    if game_cls is TicTacToe:  # 200 random Connect Four games rarely include a draw
        assert saw_draw


def _play(game_cls, seq):
    g = game_cls(1)
    results = []
    for a in seq:
        results.append(tuple(bool(x[0]) for x in g.step([a])))
    return g, results


@pytest.mark.parametrize(
    "seq",
    [
        [0, 6, 1, 6, 2, 6, 3],  # horizontal, bottom row
        [5, 0, 5, 1, 5, 2, 5],  # vertical
        [0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3],  # diagonal up-right
        [6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3],  # diagonal up-left
        [6, 6, 1, 5, 2, 2, 5, 1, 1, 3, 0, 5, 5, 6, 6, 1, 3, 0, 4, 4, 5, 4, 0, 3],  # row 3 up
    ],
)
def test_connect_four_wins_in_every_direction(seq):
    g, results = _play(ConnectFour, seq)
    ref = _reference(ConnectFour)
    ref_results = [(ref.play(a), ref.done) for a in seq]
    assert results == ref_results
    assert results[-1] == (True, True) and not any(w for w, _ in results[:-1])
    assert g.winner[0] == (len(seq) - 1) % 2


@pytest.mark.parametrize(
    "seq",
    [
        [0, 3, 1, 4, 2],  # row
        [0, 1, 3, 2, 6],  # column
        [0, 1, 4, 2, 8],  # diagonal
        [2, 0, 4, 1, 6],  # anti-diagonal
        [0, 3, 1, 4, 6, 5],  # second player's row
    ],
)
def test_tictactoe_wins(seq):
    g, results = _play(TicTacToe, seq)
    assert results[-1] == (True, True) and not any(w for w, _ in results[:-1])
    assert g.winner[0] == (len(seq) - 1) % 2


C4_DRAW = [2, 3, 2, 1, 4, 2, 5, 4, 1, 5, 0, 3, 1, 0, 2, 2, 1, 1, 1, 3, 3, 3, 2, 6, 6, 6, 6, 5, 4, 4, 4, 6, 4, 3, 6, 5, 5, 5, 0, 0, 0, 0]  # fmt: skip


@pytest.mark.parametrize(
    "game_cls, seq", [(TicTacToe, [0, 4, 8, 1, 7, 6, 2, 5, 3]), (ConnectFour, C4_DRAW)]
)
def test_draws(game_cls, seq):
    g, results = _play(game_cls, seq)
    assert [r for r in results[:-1]] == [(False, False)] * (len(seq) - 1)
    assert results[-1] == (False, True) and g.winner[0] == -1
    ref = _reference(game_cls)
    for a in seq:
        assert not ref.play(a)
    assert ref.done


def test_full_column_is_masked_and_illegal_moves_are_refused_or_lose():
    g = ConnectFour(2)
    for _ in range(6):
        g.step([3, 0])
    assert not g.legal_mask()[0, 3] and g.legal_mask()[0].sum() == 6
    with pytest.raises(IllegalMoveError, match="illegal move"):
        g.step([3, 1])
    with pytest.raises(IllegalMoveError):
        g.step([7, 1])  # out of range
    lose = ConnectFour(2, illegal="lose")
    for _ in range(6):
        lose.step([3, 0])
    to_move = int(lose.to_move[0])
    won, done = lose.step([3, 1])
    assert done.tolist() == [True, False] and not won.any()
    assert lose.winner[0] == 1 - to_move
    t = TicTacToe(1)
    t.step([4])
    assert not t.legal_mask()[0, 4]
    with pytest.raises(IllegalMoveError):
        t.step([4])


def test_terminal_handling():
    g, _ = _play(TicTacToe, [0, 3, 1, 4, 2])
    planes, mask = g.observe()
    assert not mask.any()  # nobody moves in a finished game
    with pytest.raises(IllegalMoveError, match="finished"):
        g.step([8])
    g.reset()
    assert g.legal_mask().all() and not g.done[0] and g.winner[0] == -1
    assert not g.observe()[0].any()


def test_vector_env_autoresets_with_final_obs_and_rewards_the_mover():
    env = TicTacToeVectorEnv(2)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs["observation"].shape == (2, 3, 3, 2) and obs["action_mask"].dtype == np.int8
    for a in ([0, 0], [3, 1], [1, 3], [4, 8]):
        obs, r, term, trunc, info = env.step(np.array(a))
        assert not term.any()
    obs, r, term, trunc, info = env.step(np.array([2, 4]))  # game 0: first player's top row
    assert term.tolist() == [True, False] and r.tolist() == [1.0, 0.0] and not trunc.any()
    assert info["winner"].tolist() == [0, -1] and info["_final_obs"].tolist() == [True, False]
    assert info["final_obs"][0][..., 1].sum() == 3  # the winner's stones, now the opponent's view
    assert not obs["observation"][0].any() and info["to_move"][0] == 0  # reset in the same step
    # an illegal move: -1 for the mover, game over (PettingZoo's TerminateIllegalWrapper)
    obs, r, term, _, info = env.step(np.array([0, 0]))
    assert r[1] == -1.0 and term[1] and info["winner"][1] == 0
    c4 = ConnectFourVectorEnv(3)
    obs, _ = c4.reset(seed=1)
    obs, *_ = c4.step(c4.random_actions())
    assert c4.observation_space.contains(obs)


@pytest.mark.parametrize("game_cls", [TicTacToe, ConnectFour])
def test_planes_round_trip(game_cls):
    rng = np.random.default_rng(3)
    g = game_cls(64)
    for _ in range(5):
        g.step(random_legal(g.legal_mask(), rng))
        g.reset(g.done)
    planes, _ = g.observe()
    cur, mask = game_cls.from_planes(planes)
    assert np.array_equal(cur, g.cur) and np.array_equal(mask, g.mask)


# ---------------------------------------------------------------------- baselines


def _match(game_cls, p0, p1, n, rng):
    """Outcomes for p0 (+1/0/-1) over n games, p0 taking seat 0 in even games."""
    g = game_cls(n)
    seat0 = np.arange(n) % 2
    while not g.done.all():
        idx = np.flatnonzero(~g.done)
        obs, legal = g.observe(idx)
        mine = g.to_move[idx] == seat0[idx]
        a = np.zeros(len(idx), np.int64)
        if mine.any():
            a[mine] = p0.act(obs[mine], legal[mine], rng=rng)
        if (~mine).any():
            a[~mine] = p1.act(obs[~mine], legal[~mine], rng=rng)
        assert legal[np.arange(len(idx)), a].all()
        g.step(a, idx)
    return np.where(g.winner < 0, 0, np.where(g.winner == seat0, 1, -1))


def test_minimax_never_loses_and_draws_itself():
    rng = np.random.default_rng(0)
    q = tictactoe_table()
    assert q[0].max() == 0  # tic-tac-toe is a draw
    vs_random = _match(TicTacToe, MinimaxPlayer(), RandomPlayer(), 1000, rng)
    assert (vs_random >= 0).all() and (vs_random > 0).mean() > 0.8
    assert (_match(TicTacToe, MinimaxPlayer(), MinimaxPlayer(), 200, rng) == 0).all()


def test_minimax_values_match_brute_force_search():
    def solve(ref: Reference) -> int:  # plain negamax, no memo
        best = -2
        for a, ok in enumerate(ref.legal()):
            if not ok:
                continue
            child = Reference(3, 3, 3, False)
            child.board = [row[:] for row in ref.board]
            child.moves = ref.moves
            v = 1 if child.play(a) else 0 if child.done else -solve(child)
            best = max(best, v)
        return best

    rng = np.random.default_rng(1)
    player = MinimaxPlayer()
    for _ in range(20):  # random positions with 3-5 stones
        ref = Reference(3, 3, 3, False)
        for _ in range(rng.integers(3, 6)):
            legal = np.flatnonzero(ref.legal())
            ref.play(int(rng.choice(legal)))
            if ref.done:
                break
        if ref.done:
            continue
        q = player.values(ref.planes()[None])[0]
        assert q.max() == solve(ref)


def test_mcts_takes_a_win_blocks_and_beats_random():
    rng = np.random.default_rng(0)
    mcts = MCTSPlayer(ConnectFour, simulations=100)
    g, _ = _play(ConnectFour, [0, 6, 1, 6, 2])  # first player threatens 3; second to move
    obs, mask = g.observe()
    assert mcts.act(obs, mask, rng=rng)[0] == 3  # block
    g2, _ = _play(ConnectFour, [0, 6, 1, 6, 2, 6])  # first player to move, can win at 3
    obs, mask = g2.observe()
    assert mcts.act(obs, mask, rng=rng)[0] == 3  # win
    out = _match(ConnectFour, MCTSPlayer(ConnectFour, 30), RandomPlayer(), 20, rng)
    assert (out > 0).mean() >= 0.8


def test_game_spec_and_errors():
    spec = GameSpec("connect_four")
    assert spec.obs_shape == (6, 7, 2) and spec.num_actions == 7 and spec.rules is ConnectFour
    with pytest.raises(ValueError, match="unknown game"):
        GameSpec("chess")
    with pytest.raises(ValueError, match="minimax"):
        from paddlecraft.arenas.games import make_baseline

        make_baseline("minimax", ConnectFour)
    assert isinstance(BoardGameVectorEnv(TicTacToe, 2).game, TicTacToe)


# ---------------------------------------------------------------------- PettingZoo adapter


@pytest.mark.parametrize(
    "name, native", [("connect_four_v3", ConnectFour), ("tictactoe_v3", TicTacToe)]
)
def test_pettingzoo_adapter_plays_and_matches_native_rules(name, native):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    from paddlecraft.arenas.games.pettingzoo_adapter import PettingZooGame

    n = 6
    pz = PettingZooGame(name, n)
    assert pz.rules is native and pz.obs_shape() == native.obs_shape()
    nat = native(n)
    rng = np.random.default_rng(0)
    while not pz.done.all():
        idx = np.flatnonzero(~pz.done)
        obs, mask = pz.observe(idx)
        obs_n, mask_n = nat.observe(idx)
        assert np.array_equal(obs, obs_n) and np.array_equal(mask, mask_n)
        assert np.array_equal(pz.to_move[idx], nat.to_move[idx])
        a = random_legal(mask, rng)
        w1, d1 = pz.step(a, idx)
        w2, d2 = nat.step(a, idx)
        assert np.array_equal(w1, w2) and np.array_equal(d1, d2)
    assert np.array_equal(pz.winner, nat.winner)
    # baselines run on PettingZoo's observations too
    pz.reset()
    obs, mask = pz.observe()
    assert mask[np.arange(n), RandomPlayer().act(obs, mask, rng=rng)].all()
