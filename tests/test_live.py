"""Live runs (trainer.live=true): token, endpoints, commands at step boundaries, exactness,
mid-step interruption. In process against the real server, except the signal tests."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from live_kit import AtSteps, Client, SlowArena, make_arena, same, weights
from starlette.responses import JSONResponse
from starlette.routing import Route

from paddlecraft.arenas.engine import run_arena, standard_callbacks
from paddlecraft.arenas.engine.checkpoint import list_checkpoints, verify_checkpoint
from paddlecraft.arenas.engine.live.config import expand_shorthand
from paddlecraft.arenas.engine.live.control import CONTROL_FILE
from paddlecraft.arenas.engine.resume import CHANGES_FILE

ROOT = Path(__file__).resolve().parents[1]
QUIET = {"progress": False}


def live_run(arena, run_dir, *extra, resume=False, **trainer):
    """run_arena with the standard callbacks, live on, plus ``extra`` callbacks."""
    cbs = [*standard_callbacks(live=True, **QUIET, **trainer), *extra]
    return run_arena(arena, run_dir, cbs, resume=resume)


def control_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / CONTROL_FILE).read_text().splitlines()]


def wait_for(predicate, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def status_of(run_dir: Path) -> dict | None:
    """The live status, or None while the server is not up."""
    try:
        return Client(run_dir).get("/api/status").json()
    except (OSError, ValueError, httpx.HTTPError):
        return None


# ----------------------------------------------------------------------------- the server
class ViewArena(SlowArena):
    """A toy arena with a view and a route of its own, both answered on the training thread."""

    def live_view(self):
        return {"panels": [{"kind": "text", "label": "steps", "text": str(self.steps_done)}],
                "thread": threading.get_ident()}  # fmt: skip

    def live_routes(self, live):
        async def steps(request):
            import asyncio

            value = await asyncio.wrap_future(live.call_soon(lambda: self.steps_done))
            return JSONResponse({"steps_done": value, "step": live.loop.step})

        return [Route("/steps", steps)]


def test_token_gate_status_view_routes_and_live_json(tmp_path, caplog):
    seen: dict = {}

    def probe(loop, c):  # on its own thread, while the run trains
        info = c.info
        seen["token"] = info["token"]
        seen["mode"] = stat.S_IMODE(os.stat(loop.run_dir / "live.json").st_mode)
        seen["host"] = info["host"]
        bare = httpx.Client(base_url=c.url, timeout=10)
        for method, path in [("GET", "/api/status"), ("GET", "/api/events"), ("GET", "/api/view"),
                             ("POST", "/api/pause"), ("POST", "/api/stop"),
                             ("POST", "/api/set"), ("GET", "/api/arena/steps")]:  # fmt: skip
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": info["token"]},
            ):
                r = bare.request(method, path, headers=headers)
                assert r.status_code == 401, (method, path, headers)
                assert "token" in r.json()["error"]
        page = bare.get("/")  # the page itself loads without the token
        seen["page"] = (page.status_code, "<html" in page.text.lower())
        # paused at step 3 (AtSteps): the view and the arena's route are answered there
        seen["status"] = c.get("/api/status").json()
        seen["view"] = c.get("/api/view").json()
        seen["route"] = c.get("/api/arena/steps").json()

    arena = make_arena(ViewArena, epochs=1)
    probing = AtSteps([3], probe, paused=True)
    with caplog.at_level("DEBUG"):
        out = live_run(arena, tmp_path, probing)
    probing.threads[0].join(10)
    assert out["status"] == "finished" and out["step"] == 8
    assert seen["mode"] == 0o600 and seen["host"] == "127.0.0.1" and seen["page"] == (200, True)
    status = seen["status"]
    assert status["state"] == "paused" and status["arena"] == "ViewArena"
    assert status["total_steps"] == 8 and status["step"] == 3
    assert set(status) >= {"epoch", "eta_s", "last_metrics", "last_eval", "steps_per_s"}
    assert seen["view"]["panels"][0]["kind"] == "text"
    assert seen["view"]["thread"] == threading.get_ident()  # drawn on the training thread
    assert seen["route"]["steps_done"] == seen["route"]["step"] == status["step"]
    # only the authorised pause and resume were applied; live.json goes with the run
    assert [r["command"] for r in control_log(tmp_path)] == ["pause", "resume"]
    assert not (tmp_path / "live.json").exists()
    assert seen["token"] not in caplog.text  # the token never lands in a log line


def test_status_answers_while_training_and_the_page_gets_its_files(tmp_path):
    got: dict = {}

    def probe(loop, c):
        t0 = time.perf_counter()
        got["status"] = c.get("/api/status").json()
        got["ms"] = 1000 * (time.perf_counter() - t0)
        got["state"] = c.post("/api/pause?wait=0").status_code  # queued: applied at step 4

    arena = make_arena(epochs=1)
    resumer = threading.Thread(
        target=lambda: (
            wait_for(
                lambda: (status_of(tmp_path) or {}).get("state") == "paused", what="pause"
            ),  # fmt: skip
            got.setdefault("paused", status_of(tmp_path)),
            Client(tmp_path).post("/api/resume"),
        ),
        daemon=True,
    )
    resumer.start()
    live_run(arena, tmp_path, AtSteps([4], probe))
    assert got["state"] == 202 and got["status"]["step"] == 3
    assert got["paused"]["state"] == "paused" and got["paused"]["step"] == 4
    records = control_log(tmp_path)
    assert [(r["command"], r["step"]) for r in records] == [("pause", 4), ("resume", 4)]


# ----------------------------------------------------------------------------- exactness
def test_paused_and_resumed_k_times_ends_bit_identical_to_never_paused(tmp_path):
    reference = make_arena(epochs=3)
    run_arena(reference, tmp_path / "plain", standard_callbacks(**QUIET))
    arena = make_arena(epochs=3)
    events: list = []

    def pause(loop, c):
        assert c.post("/api/pause?wait=0").status_code == 202

    def resume_each_pause():
        resumed = 0
        while resumed < 3:
            s = status_of(tmp_path / "live")
            if s and s["state"] == "paused":
                # while paused: status, view and a checkpoint are served, the step stays put
                assert Client(tmp_path / "live").get("/api/view").status_code == 200
                assert status_of(tmp_path / "live")["step"] == s["step"]
                events.append(s["step"])
                assert Client(tmp_path / "live").post("/api/resume").json()["state"] == "running"
                resumed += 1
            time.sleep(0.02)

    t = threading.Thread(target=resume_each_pause, daemon=True)
    t.start()
    out = live_run(arena, tmp_path / "live", AtSteps([3, 9, 17], pause))
    t.join(10)
    assert out["status"] == "finished" and events == [3, 9, 17]
    assert same(weights(arena), weights(reference))
    log = [(r["command"], r["step"]) for r in control_log(tmp_path / "live")]
    assert log == [("pause", 3), ("resume", 3), ("pause", 9), ("resume", 9), ("pause", 17),
                   ("resume", 17)]  # fmt: skip


def test_checkpoint_and_evaluate_now_change_nothing(tmp_path):
    reference = make_arena(epochs=2)
    run_arena(reference, tmp_path / "plain", standard_callbacks(**QUIET))
    answers: dict = {}

    def commands(loop, c):
        answers["checkpoint"] = c.post("/api/checkpoint?wait=0").status_code
        answers["evaluate"] = c.post("/api/evaluate?wait=0").status_code

    arena = make_arena(epochs=2)
    live_run(arena, tmp_path / "live", AtSteps([5], commands))
    assert answers == {"checkpoint": 202, "evaluate": 202}
    assert same(weights(arena), weights(reference))
    records = control_log(tmp_path / "live")
    assert [(r["command"], r["step"]) for r in records] == [("checkpoint", 5), ("evaluate", 5)]
    assert records[0]["path"] == "checkpoints/step_00000005"
    assert verify_checkpoint(tmp_path / "live" / records[0]["path"])["position"]["step"] == 5
    assert records[1]["metrics"]["neg_mse"] < 0


def test_set_lr_at_step_k_equals_stop_at_k_and_resume_with_that_lr(tmp_path):
    k, lr = 6, 0.01

    def set_lr(loop, c):
        assert c.post("/api/set?wait=0", json={"agents.reg.lr": lr}).status_code == 202

    changed = make_arena(epochs=2)
    live_run(changed, tmp_path / "set", AtSteps([k], set_lr))
    assert changed.agents["reg"].cfg.lr == lr

    def stop(loop, c):
        assert c.post("/api/stop?wait=0").status_code == 202

    first = make_arena(epochs=2)
    out = live_run(first, tmp_path / "stop", AtSteps([k], stop))
    assert out["status"] == "stopped" and out["step"] == k
    assert list_checkpoints(tmp_path / "stop")[0].name == f"step_{k:08d}"  # resumable
    resumed = make_arena(epochs=2, lr=lr)
    out = run_arena(resumed, tmp_path / "stop", standard_callbacks(**QUIET), resume=True)
    assert out["status"] == "finished" and out["step"] == 16
    assert same(weights(changed), weights(resumed))
    record = json.loads((tmp_path / "set" / CHANGES_FILE).read_text())
    assert record["step"] == k and record["changes"] == {"agents.reg.lr": {"from": 0.05, "to": lr}}
    assert [r["command"] for r in control_log(tmp_path / "set")] == ["set"]


def test_set_refuses_what_resume_refuses_and_changes_nothing(tmp_path):
    answers: dict = {}

    def try_sets(loop, c):
        # paused at step 2 (AtSteps): refusals needing the run's values are answered there
        for name, body in {
            "arch": {"agents.reg.dim": 3},
            "seed": {"seed": 1},
            "logger": {"trainer.visualdl": True},
            "agent": {"agents.nobody.lr": 0.1},
            "type": {"agents.reg.lr": "fast"},
            "empty": {},
        }.items():
            r = c.post("/api/set", json=body)
            answers[name] = (r.status_code, r.json()["error"])
        r = c.post("/api/set", content=b"not json")
        answers["json"] = (r.status_code, r.json()["error"])

    reference = make_arena(epochs=1)
    run_arena(reference, tmp_path / "plain", standard_callbacks(**QUIET))
    arena = make_arena(epochs=1)
    live_run(arena, tmp_path / "live", AtSteps([2], try_sets, paused=True))
    assert all(code == 400 for code, _ in answers.values()), answers
    assert answers["arch"][1].startswith("set: agents.reg.dim cannot change (4 -> 3)")
    assert "A resume may change learning rates" in answers["arch"][1]
    assert "seed cannot change" in answers["seed"][1]
    assert "takes effect only when a run starts" in answers["logger"][1]
    assert "no agent 'nobody'" in answers["agent"][1]
    assert "agents.reg.lr" in answers["type"][1]
    assert "JSON" in answers["json"][1] and "JSON object" in answers["empty"][1]
    assert [r["command"] for r in control_log(tmp_path / "live")] == ["pause", "resume"]
    assert not (tmp_path / "live" / CHANGES_FILE).exists()
    assert same(weights(arena), weights(reference))


def test_events_stream_steps_and_evaluations(tmp_path):
    got: list = []

    def listen():
        c = wait_for(lambda: (tmp_path / "live.json").exists() and Client(tmp_path), what="live")
        with httpx.stream("GET", c.url + "/api/events", headers=c.headers, timeout=30) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    live_run(make_arena(SlowArena, epochs=2, slow_steps=[1], step_seconds=0.5), tmp_path)
    t.join(10)
    assert not t.is_alive()  # the stream ends with the run
    train = [e["step"] for e in got if e["kind"] == "train"]
    assert train == list(range(1, 17))
    assert [e["step"] for e in got if e["kind"] == "eval"] == [8, 16]
    assert got[-1] == {"kind": "state", "state": "finished", "step": 16}


# ----------------------------------------------------------------------------- mid-step
def test_stop_mid_step_ends_within_seconds_and_resume_re_runs_the_step(tmp_path):
    reference = make_arena(SlowArena, epochs=2)
    run_arena(reference, tmp_path / "plain", standard_callbacks(**QUIET))
    arena = make_arena(SlowArena, epochs=2, slow_steps=[4], step_seconds=60)
    took: dict = {}

    def stop_mid_step():
        wait_for(lambda: (status_of(tmp_path / "live") or {}).get("step") == 3, what="step 3")
        time.sleep(0.3)  # inside step 4, which would take a minute
        took["t0"] = time.monotonic()
        Client(tmp_path / "live").post("/api/stop?wait=0")
        log = tmp_path / "live" / CONTROL_FILE
        wait_for(lambda: log.exists() and "stop" in log.read_text(), what="stop applied")
        took["applied_s"] = time.monotonic() - took["t0"]

    threading.Thread(target=stop_mid_step, daemon=True).start()
    out = live_run(arena, tmp_path / "live")
    took["ended_s"] = time.monotonic() - took["t0"]
    # applied (the step abandoned) within seconds; the run then ends as any run does
    # (evaluation, checkpoint, charts), long before the minute-long step would have
    assert out["status"] == "stopped" and out["step"] == 3, out
    assert took["applied_s"] < 3 and took["ended_s"] < 30, took
    assert [(r["command"], r["step"]) for r in control_log(tmp_path / "live")] == [("stop", 3)]
    resumed = make_arena(SlowArena, epochs=2)
    out = run_arena(resumed, tmp_path / "live", standard_callbacks(**QUIET), resume=True)
    assert out["status"] == "finished"
    assert same(weights(resumed), weights(reference))


def test_pause_mid_step_waits_then_re_runs_the_step_exactly(tmp_path):
    reference = make_arena(SlowArena, epochs=2)
    run_arena(reference, tmp_path / "plain", standard_callbacks(**QUIET))
    arena = make_arena(SlowArena, epochs=2, slow_steps=[5], step_seconds=60)
    seen: dict = {}

    def pause_mid_step():
        wait_for(lambda: (status_of(tmp_path / "live") or {}).get("step") == 4, what="step 4")
        time.sleep(0.3)
        t0 = time.monotonic()
        answer = Client(tmp_path / "live").post("/api/pause").json()  # waits until applied
        seen["pause_s"] = time.monotonic() - t0
        seen["answer"] = answer
        time.sleep(0.3)
        seen["while_paused"] = status_of(tmp_path / "live")
        Client(tmp_path / "live").post("/api/resume")

    threading.Thread(target=pause_mid_step, daemon=True).start()
    out = live_run(arena, tmp_path / "live")
    assert out["status"] == "finished" and seen["pause_s"] < 3, seen
    assert seen["answer"]["state"] == "paused" and seen["answer"]["step"] == 4
    assert seen["while_paused"]["state"] == "paused" and seen["while_paused"]["step"] == 4
    assert arena.attempts == 17  # 16 steps, one of them taken twice
    assert same(weights(arena), weights(reference))


_SIGNALLED = """
import sys
sys.path.insert(0, {tests!r})
from live_kit import SlowArena, make_arena
from paddlecraft.arenas.engine import run_arena, standard_callbacks
arena = make_arena(SlowArena, epochs=2, slow_steps=[3], step_seconds=120)
out = run_arena(arena, sys.argv[1], standard_callbacks(progress=False, log_every=1))
print(out["status"], out["step"])
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_step_exits_within_seconds_and_resume_is_exact(tmp_path, sig):
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    script = _SIGNALLED.format(tests=str(ROOT / "tests"))
    proc = subprocess.Popen([sys.executable, "-c", script, str(run_dir)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    metrics = run_dir / "metrics.jsonl"
    wait_for(lambda: metrics.exists() and '"step": 2' in metrics.read_text(), 120, "step 2")
    time.sleep(0.5)  # inside step 3, which would take two minutes
    t0 = time.monotonic()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    took = time.monotonic() - t0
    assert proc.returncode == 0, stderr[-2000:]
    # the run ends (evaluation, checkpoint, curves, interpreter exit) long before the
    # two-minute step would have
    assert stdout.split() == ["interrupted", "2"] and took < 15, (stdout, took)
    assert "abandoned mid-way" in stderr
    reference = make_arena(SlowArena, epochs=2)
    run_arena(reference, tmp_path / "plain", standard_callbacks(**QUIET))
    resumed = make_arena(SlowArena, epochs=2)
    out = run_arena(resumed, run_dir, standard_callbacks(**QUIET), resume=True)
    assert out["status"] == "finished" and out["step"] == 16
    assert same(weights(resumed), weights(reference))


# ----------------------------------------------------------------------------- settings
def test_trainer_live_true_is_shorthand_and_composes(compose_config):
    assert expand_shorthand(["trainer.live=true", "trainer.live.host=0.0.0.0", "x=1"]) == [
        "trainer.live.enabled=true", "trainer.live.host=0.0.0.0", "x=1"]  # fmt: skip
    assert expand_shorthand(["trainer.live=false"]) == ["trainer.live.enabled=false"]
    cfg = compose_config(*expand_shorthand(["trainer.live=true", "trainer.live.port=0"]))
    assert cfg.trainer.live.enabled is True and cfg.trainer.live.host == "127.0.0.1"
    assert compose_config().trainer.live.enabled is False


def test_selfplay_collection_is_abandoned_mid_step_and_resume_is_exact(tmp_path):
    """A stop during a self-play collection (between moves) discards the step; a resume
    from the boundary checkpoint ends where an uninterrupted run ends."""
    from test_selfplay import TTT_MLP, _arena

    from paddlecraft.agents import Policy
    from paddlecraft.arenas.engine.rng import seed_everything

    def build():
        seed_everything(0)
        policy = Policy("policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)
        return _arena(policy, algo="a2c"), policy

    def cbs():
        return standard_callbacks(progress=False, eval_every=0)

    full, p_full = build()
    run_arena(full, tmp_path / "full", cbs())

    part, _ = build()
    moves = {"n": 0}
    real = part.check_interrupt

    def stop_on_the_fifth_move_of_step_3():
        if part.updates == 2:
            moves["n"] += 1
            if moves["n"] == 5:  # what SIGTERM's handler does, mid-collection
                loop.request_stop("test", "interrupted")
                loop.gate.request()
        real()

    part.check_interrupt = stop_on_the_fifth_move_of_step_3
    from paddlecraft.arenas.engine import Loop

    loop = Loop(part, cbs(), tmp_path / "part")
    out = loop.run()
    assert out["status"] == "interrupted" and out["step"] == 2 and moves["n"] == 5
    resumed, p_resumed = build()
    out = run_arena(resumed, tmp_path / "part", cbs(), resume=True)
    assert out["status"] == "finished" and out["step"] == 4
    a, b = p_full.state_dict(), p_resumed.state_dict()
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    assert out["metrics"] == json.loads((tmp_path / "full" / "results.json").read_text())["metrics"]


def test_a_signal_ends_a_paused_run(tmp_path):
    took: dict = {}

    def signal_while_paused(loop, c):
        wait_for(lambda: (status_of(tmp_path) or {}).get("state") == "paused", what="pause")
        took["t0"] = time.monotonic()
        loop._on_signal(signal.SIGTERM, None)  # what the handler does on the main thread

    probing = AtSteps([3], signal_while_paused, paused=True)
    out = live_run(make_arena(epochs=2), tmp_path, probing)
    assert out["status"] == "interrupted" and out["step"] == 3
    assert time.monotonic() - took["t0"] < 3
    assert list_checkpoints(tmp_path)[0].name == "step_00000003"
