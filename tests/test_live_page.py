"""The live page in a real headless Chromium, driven by Playwright, against a live self-play
Connect Four run: it loads with the token, the curves move as steps arrive, pause freezes
the step counter and resume restarts it, and a game against the policy is played to its
end by clicks and recorded in ``human_games.jsonl`` and ``results.json``.

Chromium: Debian's ``chromium`` package (``scripts/test.sh`` installs it as root on
Debian); elsewhere set ``PADDLECRAFT_CHROMIUM`` to a Chromium or Chrome binary
(docs/live.md). Playwright's own browser download is never used.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import urllib.request

import pytest

from paddlecraft.agents import Policy
from paddlecraft.arenas import SelfPlayArena, run_arena
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.engine.rng import seed_everything

#: Debian's Chromium runs headless as root with these (../shared notes): no sandbox for
#: root, and no background connections, which the closed network refuses
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
C4_MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": 84,
    "hidden_size": 32,
    "num_classes": 32,
}
WAIT_MS = 20_000
#: the play board's data-to-move between clicks: the person's turn, or "" when it is over
HUMAN_OR_OVER = re.compile(r"^(human)?$")


def chromium_path() -> str:
    """The Chromium to drive, or a failure saying how to get one."""
    given = os.environ.get("PADDLECRAFT_CHROMIUM")
    found = given or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found or not os.access(found, os.X_OK):
        pytest.fail(
            "the live page test needs a Chromium: on Debian or Ubuntu `apt-get install -y "
            "chromium` (scripts/test.sh does it when run as root), elsewhere install Chromium "
            "or Chrome and set PADDLECRAFT_CHROMIUM=/path/to/it"
            + (f" (PADDLECRAFT_CHROMIUM={given} is not an executable)" if given else ""),
            pytrace=False,
        )
    return found


def _api(info: dict, path: str, method: str = "GET") -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{info['port']}{path}",
        method=method,
        headers={"Authorization": f"Bearer {info['token']}"},
        data=b"{}" if method == "POST" else None,
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture
def live_run(tmp_path, make_scope):
    """A live Connect Four self-play run on a thread; yields ``(run_dir, live.json)``."""
    seed_everything(0)
    policy = Policy(make_scope("c4"), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7)
    arena = SelfPlayArena(
        {"policy": policy},
        data="connect_four",
        epochs=100,
        steps_per_epoch=20,
        games_per_step=8,
        eval={"games": {"random": 4}, "simulations": 16},
    )
    run_dir = tmp_path / "run"
    callbacks = standard_callbacks(live=True, progress=False, checkpoint_every=0)
    out: dict = {}
    thread = threading.Thread(
        target=lambda: out.update(run_arena(arena, run_dir, callbacks)), daemon=True
    )
    thread.start()
    live_file = run_dir / "live.json"
    deadline = time.monotonic() + 60
    while not live_file.is_file():
        assert thread.is_alive() and time.monotonic() < deadline, "the live run did not start"
        time.sleep(0.05)
    time.sleep(0.05)  # written atomically; read it once whole
    info = json.loads(live_file.read_text())
    try:
        yield run_dir, info, thread, out
    finally:
        if thread.is_alive():
            try:
                _api(info, "/api/stop", "POST")
            except OSError:
                pass
            thread.join(60)


def _wait_points(page, n: int) -> None:
    """Until the train/loss curve has at least ``n`` points."""
    page.wait_for_function(
        """n => Number(document.querySelector('figure.chart[data-metric="train/loss"]')
                       ?.dataset.points || 0) >= n""",
        arg=n,
        timeout=WAIT_MS,
    )


def _step(page) -> int:
    return int(page.locator("#step").inner_text())


def test_the_page_shows_and_steers_a_run_and_plays_connect_four(live_run, tmp_path):
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        pytest.fail("pip install playwright (the test extra) for the live page test")
    run_dir, info, thread, out = live_run
    exe = chromium_path()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            api_calls: list[str] = []
            page.on("request", lambda r: "/api/" in r.url and api_calls.append(r.url))

            # without the token the page says how to get one and asks the run for nothing
            page.goto(f"http://127.0.0.1:{info['port']}/")
            expect(page.locator("#message")).to_contain_text("paddlecraft live RUN_DIR open")
            page.wait_for_timeout(500)
            assert api_calls == [] and page.locator("#step").inner_text() == "-"

            page.goto(f"http://127.0.0.1:{info['port']}/#token={info['token']}")
            page.reload()  # a change of #hash alone does not load the page again
            expect(page.locator("#state")).to_have_text("running", timeout=WAIT_MS)

            # the curves move as steps arrive (the event stream, read with fetch)
            loss = page.locator('figure.chart[data-metric="train/loss"]')
            _wait_points(page, 3)
            first = int(loss.get_attribute("data-points"))
            _wait_points(page, first + 2)
            assert int(loss.get_attribute("data-last-step")) > first

            # pause freezes the step counter; resume restarts it
            page.click('button[data-command="pause"]')
            expect(page.locator("#state")).to_have_text("paused", timeout=WAIT_MS)
            expect(page.locator("#command-result")).to_contain_text("pause: applied at step")
            frozen = _api(info, "/api/status")["step"]
            expect(page.locator("#step")).to_have_text(str(frozen), timeout=WAIT_MS)
            page.wait_for_timeout(1500)
            assert _step(page) == frozen == _api(info, "/api/status")["step"]
            page.click('button[data-command="resume"]')
            expect(page.locator("#state")).to_have_text("running", timeout=WAIT_MS)
            expect(page.locator("#step")).not_to_have_text(str(frozen), timeout=WAIT_MS)
            assert _step(page) > frozen

            # a status reply that left the server before a step's event may arrive after it:
            # the counter never moves back (the replies here are made stale on purpose)
            def stale_status(route):
                reply = route.fetch()
                body = reply.json()
                body["step"] = frozen
                route.fulfill(response=reply, json=body)

            seen = _step(page)
            page.route("**/api/status", stale_status)
            with page.expect_response("**/api/status"):
                pass
            with page.expect_response("**/api/status"):
                pass
            assert _step(page) >= seen > frozen
            page.unroute("**/api/status")

            # the set form: a setting resume= may not change is refused with its reason
            page.fill("#set-key", "arena.games_per_step")
            page.fill("#set-value", "4")
            page.click('#set-form button[type="submit"]')
            expect(page.locator("#message")).to_contain_text("set: ", timeout=WAIT_MS)
            expect(page.locator("#message")).to_contain_text("arena.games_per_step")
            expect(page.locator("#message")).not_to_contain_text("set: set:")  # said once

            # the arena's view: the board of a training game
            expect(page.locator(".panel-board .grid .cell")).to_have_count(42, timeout=WAIT_MS)

            # a game against the policy (with its search), by clicks, while the run trains
            expect(page.locator("#play")).to_be_visible(timeout=WAIT_MS)
            page.click("#new-first")
            board = page.locator("#play-board")
            expect(board).to_have_attribute("data-to-move", "human", timeout=WAIT_MS)
            # the legend says which disc is whose: the person moves first, with the red X
            expect(page.locator("#play-legend .key.x")).to_have_text("you (red, X)")
            expect(page.locator("#play-legend .key.o")).to_have_text("the policy (yellow, O)")
            expect(page.locator("#play-status")).to_contain_text("you are X, red")
            expect(page.locator(".panel-board .legend .key.x")).to_contain_text("first player")
            clicks = 0
            while board.get_attribute("data-result") == "":
                moves = int(board.get_attribute("data-moves"))
                # the leftmost column with room: click its top cell (any cell of a column plays it)
                open_top = page.locator('#play-board .cell[data-row="0"]:not(.x):not(.o)').first
                open_top.click()
                clicks += 1
                expect(board).not_to_have_attribute("data-moves", str(moves), timeout=WAIT_MS)
                expect(board).to_have_attribute("data-to-move", HUMAN_OR_OVER, timeout=WAIT_MS)
                assert clicks <= 21
            result = board.get_attribute("data-result")
            assert result in ("human_win", "policy_win", "draw")
            expect(page.locator("#play-status")).to_contain_text("is over")
            expect(page.locator("#message")).to_be_hidden()  # a good request clears the error
            expect(page.locator("#play-score")).to_contain_text("(1 game;")
            page.screenshot(path=str(tmp_path / "live_page.png"), full_page=True)
            (row,) = [
                json.loads(x) for x in (run_dir / "human_games.jsonl").read_text().splitlines()
            ]
            assert row["result"] == result and row["human_first"] is True
            assert len(row["moves"]) == int(board.get_attribute("data-moves"))
            assert len(row["moves"][::2]) == clicks  # the person's moves are the clicks

            # stop from the page: the run ends "stopped" and scores the game in results.json
            page.click('button[data-command="stop"]')
            thread.join(60)
            assert not thread.is_alive()
            expect(page.locator("#state")).to_have_text("stopped", timeout=WAIT_MS)
            assert errors == []
            assert not any(info["token"] in url for url in api_calls)  # never in an address
        finally:
            browser.close()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "stopped"
    key = {"policy_win": "wins", "draw": "draws", "human_win": "losses"}[result]
    assert results["human_games"]["games"] == 1 and results["human_games"][key] == 1
