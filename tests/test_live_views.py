"""Live runs, the arena side: each arena's ``live_view`` panels and a person playing the
self-play policy through its routes (in-process, Starlette's TestClient)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import cv2
import numpy as np
import paddle
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from paddlecraft.agents import Policy
from paddlecraft.arenas import SelfPlayArena
from paddlecraft.arenas.engine.live.panels import board_panel, media_panels, png_data_url
from paddlecraft.arenas.engine.media import Image, Text
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour
from paddlecraft.arenas.selfplay.humanplay import HUMAN_GAMES, human_score

C4_MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": 84,
    "hidden_size": 32,
    "num_classes": 32,
}


class InlineLive:
    """A LiveContext stand-in: ``call_soon`` runs the function at once (as a paused run
    does) and counts the calls, so a test sees what went through the training thread."""

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.calls = 0

    def call_soon(self, fn):
        self.calls += 1
        fut: Future = Future()
        try:
            fut.set_result(fn())
        except Exception as e:  # the server's future carries the exception the same way
            fut.set_exception(e)
        return fut


def _c4_arena(scope, tmp_path, simulations=8):
    seed_everything(0)
    policy = Policy(scope, encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7)
    arena = SelfPlayArena(
        {"policy": policy},
        data="connect_four",
        epochs=1,
        steps_per_epoch=2,
        games_per_step=4,
        eval={"games": {"random": 2}, "simulations": simulations},
    )
    arena.setup(str(tmp_path))
    return arena


def _client(arena, live):
    app = Starlette(routes=[Mount("/api/arena", routes=arena.live_routes(live))])
    return TestClient(app)


def _fingerprint(policy):
    weights = {k: v.numpy().copy() for k, v in policy.state_dict().items()}
    return weights, policy.training, np.random.get_state()[1].copy(), paddle.get_rng_state()


# ---------------------------------------------------------------------- human play


def test_a_person_plays_connect_four_to_the_end_and_it_is_recorded(make_scope, tmp_path):
    arena = _c4_arena(make_scope("c4"), tmp_path)
    arena.policy.train()
    live = InlineLive(tmp_path)
    client = _client(arena, live)
    assert client.get("/api/arena/play").json()["game"] is None
    before = _fingerprint(arena.policy)

    state = client.post("/api/arena/play/new", json={"human_first": True}).json()
    g = state["game"]
    assert (g["number"], g["to_move"], g["moves"]) == (1, "human", [])
    assert (state["rows"], state["cols"], state["click"]) == (6, 7, "column")
    human_moves = []
    while g["result"] is None:
        col = g["legal"][0]  # the person fills the leftmost open column: the policy can win
        human_moves.append(col)
        g = client.post("/api/arena/play/move", json={"action": col}).json()["game"]
        assert g["moves"][-1] == col
        if g["result"] is None:
            assert g["to_move"] == "policy"
            g = client.post("/api/arena/play/reply").json()["game"]
    assert live.calls == len(g["moves"]) - len(human_moves)  # every reply ran via call_soon
    # the board the page draws is the moves replayed: X (1) moved first
    replay = ConnectFour(1)
    for a in g["moves"]:
        replay.step([a])
    cells = np.array(g["cells"])
    assert (cells == 1).sum() + (cells == 2).sum() == len(g["moves"])
    assert (cells == 1).sum() == (len(g["moves"]) + 1) // 2
    seat = int(replay.winner[0])
    expected = "draw" if seat < 0 else ("human_win" if seat == 0 else "policy_win")
    assert g["result"] == expected and g["to_move"] is None

    rows = [json.loads(x) for x in (tmp_path / HUMAN_GAMES).read_text().splitlines()]
    assert len(rows) == 1
    assert rows[0]["moves"] == g["moves"] and rows[0]["human_first"] is True
    assert rows[0]["result"] == expected and rows[0]["simulations"] == 8
    score = human_score(tmp_path)
    key = {"policy_win": "wins", "draw": "draws", "human_win": "losses"}[expected]
    assert score["games"] == 1 and score[key] == 1
    assert arena.extra_results() == {"human_games": score}

    # the replies changed nothing the run carries: weights, mode, global RNG streams
    after = _fingerprint(arena.policy)
    assert all(np.array_equal(before[0][k], after[0][k]) for k in before[0])
    assert after[1] is True
    assert np.array_equal(before[2], after[2])
    drawn = paddle.rand([4]).numpy()  # paddle's stream: the same draw as from the saved state
    paddle.set_rng_state(before[3])
    assert np.array_equal(drawn, paddle.rand([4]).numpy())

    # a finished game takes no more moves; a second game is numbered after it
    r = client.post("/api/arena/play/move", json={"action": 0})
    assert r.status_code == 400 and "is over" in r.json()["error"]
    assert client.post("/api/arena/play/new", json={}).json()["game"]["number"] == 2


def test_a_run_played_against_ends_bit_identical_to_one_not_played(make_scope, tmp_path):
    from paddlecraft.arenas import run_arena
    from paddlecraft.arenas.engine.callbacks import standard_callbacks
    from paddlecraft.arenas.engine.loop import Callback
    from paddlecraft.arenas.selfplay.humanplay import HumanPlay

    class PlaysAtStep2(Callback):
        """Plays whole games against the policy on the training thread after step 2."""

        def on_step_end(self, loop, metrics):
            if loop.step != 2:
                return
            arena = loop.arena
            play = HumanPlay(arena.policy, ConnectFour, loop.run_dir, 8, 1.5, 0, lambda: 2)
            for human_first in (True, False):
                st = play.new(human_first)
                while st["game"]["result"] is None:
                    g = st["game"]
                    st = (
                        play.human_move(g["legal"][-1])
                        if g["to_move"] == "human"
                        else play.policy_move()
                    )

    finals: list[dict] = []
    for played in (False, True):
        arena = _c4_arena(make_scope("c4"), tmp_path / str(played))
        if not finals:  # the scope's name seeds the weights: both runs start from these
            start = {k: v.numpy().copy() for k, v in arena.policy.state_dict().items()}
        arena.policy.set_state_dict({k: paddle.to_tensor(v) for k, v in start.items()})
        cbs = standard_callbacks(progress=False) + ([PlaysAtStep2()] if played else [])
        run_arena(arena, tmp_path / str(played), cbs)
        finals.append({k: v.numpy().copy() for k, v in arena.policy.state_dict().items()})
    assert human_score(tmp_path / "True")["games"] == 2
    from paddlecraft.arenas.games.search import NetworkEvaluator

    searcher = HumanPlay(arena.policy, ConnectFour, tmp_path, 8, 1.5, 0, lambda: 2)._search()
    assert type(searcher.search.evaluator) is NetworkEvaluator  # the policy trains meanwhile
    assert finals[0].keys() == finals[1].keys()
    assert all(np.array_equal(finals[0][k], finals[1][k]) for k in finals[0])
    lines = [(tmp_path / str(p) / "metrics.jsonl").read_text().splitlines() for p in (False, True)]
    strip = [
        [{k: v for k, v in json.loads(x).items() if "time" not in k} for x in ls] for ls in lines
    ]
    assert strip[0] == strip[1]


def test_the_policy_moves_first_when_the_person_plays_second(make_scope, tmp_path):
    arena = _c4_arena(make_scope("c4"), tmp_path)
    client = _client(arena, InlineLive(tmp_path))
    g = client.post("/api/arena/play/new", json={"human_first": False}).json()["game"]
    assert g["to_move"] == "policy"
    r = client.post("/api/arena/play/move", json={"action": 3})
    assert r.status_code == 400 and "policy's turn" in r.json()["error"]
    g = client.post("/api/arena/play/reply").json()["game"]
    assert len(g["moves"]) == 1 and g["to_move"] == "human"
    assert np.array(g["cells"]).sum() == 1  # one X: the policy's stone, first player
    # the same position gets the same reply (the game's own seeded generator)
    again = client.post("/api/arena/play/new", json={"human_first": False}).json()["game"]
    assert again["number"] == 1  # the unfinished game was not recorded
    assert client.post("/api/arena/play/reply").json()["game"]["moves"] == g["moves"]
    assert not (tmp_path / HUMAN_GAMES).exists()


def test_bad_moves_are_refused_with_one_clear_error(make_scope, tmp_path):
    arena = _c4_arena(make_scope("c4"), tmp_path)
    client = _client(arena, InlineLive(tmp_path))
    r = client.post("/api/arena/play/move", json={"action": 0})
    assert r.status_code == 400 and "no game yet" in r.json()["error"]
    client.post("/api/arena/play/new", json={"human_first": True})
    for body, words in (
        ({"action": 9}, "not legal here; legal actions are [0, 1, 2, 3, 4, 5, 6]"),
        ({"action": "left"}, "expected an integer action"),
        ({}, "expected an integer action, got None"),
    ):
        r = client.post("/api/arena/play/move", json=body)
        assert r.status_code == 400 and words in r.json()["error"]
    r = client.post("/api/arena/play/move", content=b"[1")
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    r = client.post("/api/arena/play/reply")
    assert r.status_code == 400 and "human's turn" in r.json()["error"]
    assert client.get("/api/arena/play").json()["game"]["moves"] == []


def test_a_reply_after_the_run_ended_is_refused(make_scope, tmp_path):
    from paddlecraft.arenas.engine.live.control import RunEnded

    class EndedLive(InlineLive):
        def call_soon(self, fn):
            fut: Future = Future()
            fut.set_exception(RunEnded("the run has ended"))
            return fut

    arena = _c4_arena(make_scope("c4"), tmp_path)
    client = _client(arena, EndedLive(tmp_path))
    client.post("/api/arena/play/new", json={"human_first": False})
    r = client.post("/api/arena/play/reply")
    assert r.status_code == 409 and r.json()["error"].startswith("the run has ended")


def test_tictactoe_is_played_by_cells(make_scope, tmp_path):
    seed_everything(0)
    mlp = {**C4_MLP, "input_size": 18}
    policy = Policy(make_scope("ttt"), encoder=mlp, obs_shape=[3, 3, 2], num_actions=9)
    arena = SelfPlayArena({"policy": policy}, data="tictactoe", eval={"simulations": 4})
    arena.setup(str(tmp_path))
    client = _client(arena, InlineLive(tmp_path))
    state = client.post("/api/arena/play/new", json={"human_first": True}).json()
    assert state["click"] == "cell" and (state["rows"], state["cols"]) == (3, 3)
    g = client.post("/api/arena/play/move", json={"action": 4}).json()["game"]
    assert g["cells"][1][1] == 1 and g["last"] == [1, 1]
    g = client.post("/api/arena/play/reply").json()["game"]
    cells = np.array(g["cells"])
    assert len(g["moves"]) == 2 and (cells == 1).sum() == 1 and (cells == 2).sum() == 1
    assert cells.reshape(-1)[g["moves"][1]] == 2  # the policy's O sits on its action's cell


# ---------------------------------------------------------------------- views


def test_selfplay_view_shows_the_last_training_game(make_scope, tmp_path):
    arena = _c4_arena(make_scope("c4"), tmp_path)
    assert arena.live_view() == {"panels": []}
    arena.train_step(0)
    (board,) = arena.live_view()["panels"]
    assert board["kind"] == "board" and (board["rows"], board["cols"]) == (6, 7)
    # the panel is game 0 of the update replayed from its records: the learner played
    # both seats (pure self-play), so its stones are all the game's moves
    recs = arena._last_rollout["records"]
    moves = [int(r["action"][list(r["game"]).index(0)]) for r in recs if 0 in r["game"]]
    replay = ConnectFour(1)
    for a in moves:
        replay.step([a])
    cells = np.array(board["cells"])
    assert (cells > 0).sum() == len(moves)
    assert np.array_equal(cells > 0, replay.planes(replay.cur, replay.mask)[0].sum(-1) > 0)
    assert "update 1: training game 1 of 4" in board["caption"]
    r, c = board["last"]
    assert cells[r, c] > 0 and c == moves[-1]


def test_panels_encode_images_text_and_boards():
    img = np.zeros((4, 6, 3), np.uint8)
    img[0, 0] = (255, 0, 0)  # red, top left
    url = png_data_url(img)
    assert url.startswith("data:image/png;base64,")
    back = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), 1)
    assert back.shape == (4, 6, 3) and back[0, 0].tolist() == [0, 0, 255]  # BGR
    panels = media_panels({"grid": img, "note": Text("a b"), "grey": Image(np.ones((2, 2)))})
    assert [p["kind"] for p in panels] == ["image", "text", "image"]
    assert panels[1]["text"] == "a b"
    with pytest.raises(TypeError, match="media tag 'x'"):
        media_panels({"x": 3})
    b = board_panel("b", np.eye(2, dtype=int) * 2, "c", (1, 1))
    assert b["cells"] == [[2, 0], [0, 2]] and b["last"] == [1, 1]


def _png_shape(panel):
    raw = base64.b64decode(panel["src"].split(",", 1)[1])
    return cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_UNCHANGED).shape


def test_classify_view_is_the_last_evaluations_confusion_matrix(make_scope):
    from paddlecraft.agents import Classifier
    from paddlecraft.arenas import ClassifyArena

    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 64, "hidden_size": 16}
    agent = Classifier(make_scope("clf"), encoder=enc, seed=0)
    arena = ClassifyArena(
        {"classifier": agent}, data={"_target_": "paddlecraft.craftdata.load_digits"}
    )
    try:
        assert arena.live_view() == {"panels": []}  # nothing before the first evaluation
        metrics = arena.evaluate()
        matrix, first = arena.live_view()["panels"]
        cm = np.array([row[1:] for row in matrix["rows"]])  # [true, predicted]
        assert cm.shape == (10, 10) and matrix["columns"][1:] == [str(k) for k in range(10)]
        assert np.trace(cm) / cm.sum() == pytest.approx(metrics["test_accuracy"])
        pred, y = arena._last_predictions
        assert (
            cm.sum() == len(y) and cm.sum(axis=1).tolist() == np.bincount(y, minlength=10).tolist()
        )
        assert [r[1:3] for r in first["rows"]] == [[int(y[i]), int(pred[i])] for i in range(12)]
    finally:
        arena.close()


def test_referential_view_lists_the_last_evaluations_messages():
    from test_referential import make_arena

    arena = make_arena()
    assert arena.live_view() == {"panels": []}
    arena.evaluate()
    train, test = arena.live_view()["panels"]
    assert train["columns"] == ["meaning", "message"] and "test objects" in test["label"]
    msgs = arena.last["messages"][arena.speakers[0].name]["test"]
    idx = arena.last["batches"]["test"]["target"]
    for row, k, msg in zip(test["rows"], idx, msgs):
        assert row == [
            " ".join(map(str, arena.world.test.meanings[k].tolist())),
            " ".join(map(str, msg.tolist())),
        ]


def test_gan_view_is_the_sample_grid(make_scope):
    from test_gan import _tiny

    arena = _tiny()
    try:
        (grid,) = arena.live_view()["panels"]
        assert grid["kind"] == "image" and grid["label"] == "samples"
        assert _png_shape(grid) == (*arena.grid().shape[:2], 3)
    finally:
        arena.close()


#: the caption arena's live view, evaluated in a fresh interpreter (see the test below)
CAPTION_VIEW = """
import json
from test_caption import TINY_DATA, _captioner, _listener
from paddlecraft.arenas import CaptionArena

cap, lis = _captioner("cap_view"), _listener("lis_view")
hops = {h.name: {"steps": 1, "batch_size": 4} for h in (cap, lis)}
arena = CaptionArena({cap.name: cap, lis.name: lis}, chain=[cap.name, lis.name],
                     data=TINY_DATA, hops=hops)
before = arena.live_view()
arena.evaluate()
print(json.dumps({"before": before, "after": arena.live_view()}))
"""


def test_caption_view_is_the_telephone_sheet_and_texts(tmp_path):
    """The caption arena's view after an evaluation: the telephone sheet and the texts.
    It runs in its own interpreter: after many other test files in one xdist worker, this
    evaluation has twice died in Paddle's native code, a segfault that ends the session
    (docs/testing.md); alone it never has."""
    script = tmp_path / "caption_view.py"
    script.write_text(CAPTION_VIEW)
    tests = Path(__file__).resolve().parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tests), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    views = json.loads(done.stdout.strip().splitlines()[-1])
    assert views["before"] == {"panels": []}
    sheet, texts = views["after"]["panels"]
    assert sheet["kind"] == "image" and _png_shape(sheet)[2] == 3
    assert texts["kind"] == "text" and texts["text"].splitlines()[0].startswith("| truth | ")
