"""arena=marl: the env wrapper (PettingZoo's own checks), GAE and PPO against NumPy,
parameter sharing, image observations, continuous actions, resume, mistakes, deploy API."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import paddle
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test
from safetensors.numpy import load_file

from paddlecraft.arenas import check_arena, run_arena, standard_callbacks
from paddlecraft.arenas.marl import GroupPolicy, MarlArena, gae, load_policy, make_env
from paddlecraft.arenas.marl.envs import default_groups
from paddlecraft.arenas.marl.losses import ppo_terms
from paddlecraft.arenas.marl.vector import BatchedEnv

ROOT = Path(__file__).resolve().parents[1]
MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 16, "hidden_layers": 1}
CNN = {"_target_": "paddlecraft.encoders.ImageCNNEncoder", "channels": [4], "embedding_dim": 8}
IMAGE_ENV = "tests.marl_image_env:ColourEnv"
SPREAD = {"name": "simple_spread_v3", "kwargs": {"N": 3, "max_cycles": 5}}
TINY = {"num_envs": 2, "rollout_steps": 5, "ppo_epochs": 2, "minibatches": 2, "eval_episodes": 2,
        "steps_per_epoch": 2, "animation": False}  # fmt: skip


def policy(name: str, encoder=MLP, **kw) -> GroupPolicy:
    return GroupPolicy(name, encoder=encoder, lr=1e-3, **kw)


def arena(env=SPREAD, groups=("agent",), encoder=MLP, **settings) -> MarlArena:
    agents = {g: policy(g, encoder) for g in groups}
    return MarlArena(agents, seed=3, env=env, **{**TINY, **settings})


# ----------------------------------------------------------------------------- env wrapper
@pytest.mark.parametrize(
    "name,cls",
    [("simple_spread_v3", None), ("simple_speaker_listener_v4", None), (None, IMAGE_ENV),
     (None, "mpe2.simple_tag.simple_tag:raw_env")],  # an AEC class: through aec_to_parallel
)  # fmt: skip
def test_the_wrapped_envs_pass_pettingzoos_parallel_checks(name, cls):
    kwargs = {"max_cycles": 5}
    parallel_api_test(make_env(name, kwargs, cls), num_cycles=10)
    parallel_seed_test(lambda: make_env(name, kwargs, cls))


def test_batched_copies_are_seeded_and_stack_by_group():
    env = make_env("simple_tag_v3", {"max_cycles": 5})
    groups = default_groups(env.possible_agents)
    assert groups == {"adversary": ["adversary_0", "adversary_1", "adversary_2"],
                      "agent": ["agent_0"]}  # fmt: skip
    venv = BatchedEnv(lambda: make_env("simple_tag_v3", {"max_cycles": 5}), 3, groups)
    a = venv.reset([1, 2, 1])
    assert a["adversary"].shape == (3, 3, 16) and a["agent"].shape == (3, 1, 14)
    assert np.array_equal(a["adversary"][0], a["adversary"][2])  # same seed, same start
    assert not np.array_equal(a["adversary"][0], a["adversary"][1])
    single, _ = env.reset(seed=2)
    assert np.array_equal(a["agent"][1, 0], single["agent_0"])
    for _ in range(5):
        out = venv.step({"adversary": np.zeros((3, 3), int), "agent": np.ones((3, 1), int)})
    assert out["ended"].all() and out["rewards"]["adversary"].shape == (3, 3)


# ----------------------------------------------------------------------------- GAE, losses
def test_gae_matches_the_sum_of_discounted_td_errors():
    rng = np.random.default_rng(0)
    T, B, g, lam = 6, 3, 0.9, 0.8
    r, v, nv = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(3))
    ended = np.zeros((T, B), np.float32)
    ended[2, 1] = ended[T - 1] = 1  # copy 1's episode ends after step 2
    adv, ret = gae(r, v, nv, ended, g, lam)
    delta = r + g * nv - v
    for b in range(B):
        for t in range(T):
            want, k = 0.0, 0
            while True:  # A_t = sum_k (g lam)^k delta_{t+k}, within the episode
                want += (g * lam) ** k * delta[t + k, b]
                if ended[t + k, b] or t + k == T - 1:
                    break
                k += 1
            assert adv[t, b] == pytest.approx(want, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(ret, adv + v, rtol=1e-6)


def test_ppo_terms_match_a_numpy_computation():
    rng = np.random.default_rng(1)
    n = 8
    logp, old, adv, v, v0, ret, ent = (
        rng.normal(size=n).astype(np.float32) * 0.5 for _ in range(7)
    )
    t = paddle.to_tensor
    terms = ppo_terms(t(logp), t(old), t(adv), t(v), t(v0), t(ret), t(ent), 0.2, 0.1, 0.5, 0.01)
    ratio = np.exp(logp - old)
    policy_loss = -np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv).mean()
    clipped = v0 + np.clip(v - v0, -0.1, 0.1)
    value = 0.5 * np.maximum((v - ret) ** 2, (clipped - ret) ** 2).mean()
    assert float(terms.policy) == pytest.approx(policy_loss, rel=1e-5)
    assert float(terms.value) == pytest.approx(value, rel=1e-5)
    assert float(terms.total) == pytest.approx(
        policy_loss + 0.5 * value - 0.01 * ent.mean(), rel=1e-5
    )
    assert float(terms.clip_fraction) == pytest.approx(float((np.abs(ratio - 1) > 0.2).mean()))


def test_the_log_probabilities_match_numpy_for_both_heads():
    pol = policy("lp")
    pol.bind(
        make_env(**SPREAD).observation_space("agent_0"),
        __import__("gymnasium").spaces.Discrete(5),
        4,
    )
    obs = np.random.default_rng(0).normal(size=(4, 18)).astype(np.float32)
    logits = pol.actor(obs).numpy()
    act = np.array([0, 1, 4, 2])
    logp, ent = pol.log_prob_entropy(pol.actor(obs), paddle.to_tensor(act))
    ref = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(logp.numpy(), ref[np.arange(4), act], rtol=1e-5)
    np.testing.assert_allclose(ent.numpy(), -(np.exp(ref) * ref).sum(-1), rtol=1e-5)
    from gymnasium import spaces

    gauss = policy("lg")
    gauss.bind(spaces.Box(-1, 1, (18,)), spaces.Box(0.0, 1.0, (3,), np.float32), 4)
    mean = gauss.actor(obs).numpy()
    a = mean + 0.3
    logp, _ = gauss.log_prob_entropy(gauss.actor(obs), paddle.to_tensor(a))
    std = np.exp(-0.5)
    want = 3 * (-0.5 * (0.3 / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)) * np.ones(4)
    np.testing.assert_allclose(logp.numpy(), want, rtol=1e-5)


# ----------------------------------------------------------------------------- sharing
def test_a_group_shares_one_set_of_weights_across_its_agents():
    a = arena()
    pol = a.policies["agent"]
    assert a.groups == {"agent": ["agent_0", "agent_1", "agent_2"]}
    names = [p.name for p in pol.parameters()]
    assert len(names) == len(set(names)) and all(n.startswith("agent.") for n in names)
    before = {p.name: p.numpy().copy() for p in pol.parameters()}
    obs = a.venv.reset([5, 6])["agent"]  # [2 copies, 3 agents, 18]
    logits = pol.actor(obs.reshape(6, 18)).numpy()
    for j in range(3):  # each agent's row is what the one network gives its observation alone
        np.testing.assert_allclose(
            logits.reshape(2, 3, -1)[:, j], pol.actor(obs[:, j]).numpy(), rtol=1e-5
        )
    a.train_step(0)
    changed = [n for n, w in before.items() if not np.array_equal(w, dict(
        (p.name, p.numpy()) for p in pol.parameters())[n])]  # fmt: skip
    assert changed and pol.step_count == TINY["ppo_epochs"] * TINY["minibatches"]


def test_mappo_critic_reads_every_observation_and_ippo_its_own():
    m, i = arena(algo="mappo"), arena(algo="ippo")
    assert m.policies["agent"].cfg.critic_input == 3 * 18 + 3
    assert i.policies["agent"].cfg.critic_input == 18


def test_two_teams_get_two_policies_and_check_arena_passes(tmp_path):
    a = arena({"name": "simple_tag_v3", "kwargs": {"max_cycles": 5}}, groups=("adversary", "agent"))
    assert check_arena(a, steps=2, run_dir=str(tmp_path))
    m = a.evaluate()
    assert {"episode_return", "return_adversary", "return_agent"} <= m.keys()
    assert m["episode_return"] == pytest.approx(m["return_adversary"] + m["return_agent"])


def test_image_observations_take_an_image_encoder():
    a = arena({"cls": IMAGE_ENV, "kwargs": {"max_cycles": 5}}, groups=("painter",), encoder=CNN)
    pol = a.policies["painter"]
    assert pol._channels_first and pol.cfg.obs_scale == pytest.approx(1 / 255)
    m = a.train_step(0)
    assert np.isfinite(m["painter_policy_loss"])


def test_continuous_actions_take_a_gaussian_head_within_the_bounds():
    env = {**SPREAD, "kwargs": {**SPREAD["kwargs"], "continuous_actions": True}}
    a = arena(env)
    pol = a.policies["agent"]
    assert pol.continuous and pol.cfg.action_low == [0.0] * 5
    a.train_step(0)
    obs = a.venv.reset([1, 2])["agent"].reshape(6, 18)
    act = pol.act(obs)
    assert act.shape == (6, 5) and (act >= 0).all() and (act <= 1).all()


# ----------------------------------------------------------------------------- deploy
def test_load_policy_acts_on_raw_pettingzoo_observations(tmp_path):
    a = arena()
    run_arena(a, tmp_path, standard_callbacks(checkpoint_every=2, progress=False))
    deployed = load_policy(tmp_path, "agent")
    env = make_env(**SPREAD)
    obs, _ = env.reset(seed=11)
    acts = deployed.act(obs)
    assert sorted(acts) == env.agents and all(isinstance(v, int) for v in acts.values())
    stacked = np.stack([obs[k] for k in env.agents])
    assert [acts[k] for k in env.agents] == list(a.policies["agent"].act(stacked))
    while env.agents:
        obs, *_ = env.step(deployed.act(obs))


# ----------------------------------------------------------------------------- command line
def _cli(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    from tests.mistake_driver import run_case

    r = run_case([*args, f"hydra.run.dir={run_dir}"], str(ROOT))
    return subprocess.CompletedProcess(
        args, r["rc"], r["stdout"], r["stderr"] + r.get("traceback", "")
    )


def test_debug_smoke_writes_the_headline_curves_and_the_animation(tmp_path):
    r = _cli(tmp_path / "run", "arena=marl", "debug=smoke", "env=simple_speaker_listener")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["headline"] == "episode_return" and np.isfinite(res["headline_value"])
    assert {"return_speaker", "return_listener"} <= res["metrics"].keys()
    for f in ("returns.png", "episode.gif"):
        assert (tmp_path / "run" / f).stat().st_size > 0


@pytest.mark.parametrize(
    "args,words",
    [
        (["arena.env.name=simple_sprad_v3"], ["arena.env.name", "simple_spread_v3"]),
        # one case per kind of mistake in the fast tier; its variants in the slow one
        pytest.param(["env=simple_sprad"], ["simple_spread"], marks=pytest.mark.slow),
        (["+arena.groups.agent=[agent_0,agent_1,agent_9]"], ["arena.groups.agent", "agent_9"]),
        pytest.param(["+arena.groups.agent=[]"], ["names no agent"], marks=pytest.mark.slow),
        (["encoder@agents.agent.encoder=cnn_small"], ["agents.agent.encoder", "mlp"]),
        (["arena.env.kwargs.continuous_actions=true", "agents.agent.head=categorical"],
         ["head=categorical", "continuous"]),
        pytest.param(["arena.algo=maddpg"], ["arena.algo", "mappo"], marks=pytest.mark.slow),
    ],
)  # fmt: skip
def test_mistakes_are_one_line(tmp_path, args, words):
    r = _cli(tmp_path / "run", "arena=marl", "debug=smoke", *args)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr[-2000:]
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpe2", None)  # import mpe2 raises ImportError
    monkeypatch.delitem(sys.modules, "mpe2.simple_spread_v3", raising=False)
    with pytest.raises(Exception, match=r"paddlecraft\[mpe\]"):
        make_env(**SPREAD)


KILL_RUN = ["arena=marl", "arena.num_envs=2", "arena.rollout_steps=25", "arena.ppo_epochs=2",
            "arena.eval_episodes=2", "arena.steps_per_epoch=6", "arena.epochs=1",
            "arena.animation=false", "trainer.checkpoint_every=1", "trainer.keep_checkpoints=10",
            "trainer.progress=false"]  # fmt: skip


def _weights(run: Path) -> dict:
    newest = sorted((run / "checkpoints").glob("step_*"))[-1]
    return {
        k: v
        for f in (newest / "agents").glob("*/weights.safetensors")
        for k, v in load_file(f).items()
    }


@pytest.mark.slow
def test_sigkill_then_resume_matches_the_uninterrupted_run(tmp_path):
    full = tmp_path / "full"
    r = _cli(full, *KILL_RUN)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "killed"
    cmd = [sys.executable, str(ROOT / "run.py"), *KILL_RUN, f"hydra.run.dir={run}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not list((run / "checkpoints").glob("step_00000002")) and time.time() < deadline:
        assert proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL and not (run / "results.json").exists()
    r = _cli(tmp_path / "log", f"resume={run}")
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = _weights(full), _weights(run)
    assert a.keys() == b.keys() and a and all(np.array_equal(a[k], b[k]) for k in a)
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (full, run))
    assert ra["metrics"] == rb["metrics"]
    shutil.rmtree(tmp_path / "log", ignore_errors=True)


def test_the_live_view_shows_the_last_evaluation_and_an_episode():
    a = arena(animation=True)
    a.evaluate()
    panels = a.live_view()["panels"]
    table, gif = panels
    assert table["kind"] == "table" and table["rows"][-1][0] == "all agents"
    assert table["rows"][-1][1] == pytest.approx(a.history[-1]["episode_return"], abs=0.01)
    assert gif["kind"] == "image" and gif["src"].startswith("data:image/gif;base64,")
    assert a.live_view()["panels"][1]["src"] is gif["src"]  # rendered once per evaluation
