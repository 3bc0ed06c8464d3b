"""MarlArena: agents acting at once in a PettingZoo Parallel environment, IPPO or MAPPO.

``python run.py arena=marl env=simple_spread``. Each group of agents (BenchMARL's: agents
named ``<group>_<i>``, or ``arena.groups``) acts with one `GroupPolicy`,
``agents.<group>``. A step resets every copy of the environment (seeds from the run's
seed and the update), rolls ``rollout_steps`` steps (in this process, or split over Ray
workers: ``arena.workers.count``, `.workers`), then runs PPO on each group's samples: GAE,
value and advantage normalisation, ratio and value clipping, an entropy bonus. Groups that
compete (simple_tag) can train in a league (``arena.league``, `.league`): some copies
against the other groups' past snapshots, rated matches at each evaluation. Every draw
comes from a stream of ``(seed, purpose, update)`` (a rollout's: one per copy too), so a
resumed run repeats the uninterrupted one bit for bit, with or without workers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import numpy as np

from paddlecraft.agents import Agent
from paddlecraft.agents.group_policy import GroupPolicy
from paddlecraft.agents.settings import ConfigError

from ..engine import Arena
from ..engine.ray_pool import require_ray
from .config import MarlConfig, check_settings
from .envs import check_groups, default_groups, make_env
from .gae import ValueNorm
from .league import TeamLeague, check_league
from .rollout import collect, copy_streams, critic_size
from .update import update_group
from .vector import BatchedEnv
from .workers import RolloutPool, rollout_task

log = logging.getLogger("paddlecraft")

#: random-stream ids (``[seed, id, update]``)
ENV_STREAM, ACT_STREAM, MINIBATCH_STREAM, EVAL_STREAM, EVAL_ACT_STREAM = 31, 32, 33, 34, 35
LEAGUE_STREAM = 36


class MarlArena(Arena):
    """IPPO / MAPPO on a PettingZoo Parallel environment, one shared policy per group.

    Args:
        agents: one `GroupPolicy` per group, named as the group.
        seed: run seed.
        **settings: `MarlConfig` fields.
    """

    Config = MarlConfig
    headline = "episode_return"
    interruptible = True

    def __init__(
        self, agents: Mapping[str, Agent], data: Any = None, seed: int = 0, **settings: Any
    ) -> None:
        super().__init__(agents, seed=seed, **settings)  # data: none (the env makes it)
        cfg: MarlConfig = self.cfg
        check_settings(cfg)
        if cfg.workers.count:  # the extra is missing: one error line now, not at step 1
            require_ray()
        self.make = partial(make_env, cfg.env.name, dict(cfg.env.kwargs or {}), cfg.env.cls)
        probe = self.make()
        probe.reset(seed=int(seed))
        groups = cfg.groups if cfg.groups else default_groups(probe.possible_agents)
        self.groups = check_groups(groups, probe)
        probe.close()
        check_league(cfg.league.snapshot_every, self.groups)
        missing = [g for g in self.groups if g not in self.agents]
        extra = [a for a in self.agents if a not in self.groups]
        if missing or extra:
            have = {g: m for g, m in self.groups.items()}
            raise ConfigError(
                f"arena=marl: the groups are {have}, but agents.* are {sorted(self.agents)}; "
                f"configure one policy per group (missing {missing}, unused {extra}), e.g. "
                f"+agent@agents.{(missing or ['<group>'])[0]}=group_policy"
            )
        self.policies: dict[str, GroupPolicy] = {}
        for g in self.groups:
            pol = self.agents[g]
            if not isinstance(pol, GroupPolicy):
                raise ConfigError(
                    f"agents.{g} must be a GroupPolicy (agent=group_policy), got "
                    f"{type(pol).__name__}"
                )
            self.policies[g] = pol
        self.central = cfg.algo == "mappo"
        self.venv = BatchedEnv(self.make, cfg.num_envs, self.groups)
        for g, pol in self.policies.items():
            size = critic_size(self.venv, g, self.central)
            pol.bind(self.venv.obs_space[g], self.venv.act_space[g], size, self.groups[g])
        self.eval_env: BatchedEnv | None = None
        # the Ray workers (arena.workers.count > 0), started by the first rollout
        self.rollout_workers: RolloutPool | None = None
        self.league = (
            TeamLeague(cfg.league.snapshot_every, cfg.league.past_fraction, self.policies)
            if cfg.league.snapshot_every
            else None
        )
        self.live_gif: tuple[int | None, str | None] = (None, None)  # (evaluations, GIF URL)
        # state that checkpoints carry
        self.norms = {g: ValueNorm() for g in self.groups}
        self.updates = 0
        self.env_steps = 0
        self.history: list[dict[str, float]] = []  # one entry per evaluation

    # ------------------------------------------------------------------ engine API
    def steps_per_epoch(self) -> int:
        return self.cfg.steps_per_epoch

    def batches(self, epoch: int) -> Iterator[int]:
        n = self.cfg.steps_per_epoch
        return iter(range(epoch * n, (epoch + 1) * n))

    def stream(self, purpose: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, purpose, self.updates])

    def rollout(self, actors: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """This update's rollout of every copy by ``actors`` (default: the learners; a
        league's lineup rolls in this process only), in this process or on the Ray workers;
        copy ``i`` draws from ``[seed, purpose, update, i]`` either way."""
        cfg: MarlConfig = self.cfg
        actors = self.policies if actors is None else actors
        act_key = [self.seed, ACT_STREAM, self.updates]
        env_key = [self.seed, ENV_STREAM, self.updates]
        if not cfg.workers.count:
            copies = range(cfg.num_envs)
            return collect(
                self.venv, actors, self.norms, cfg.rollout_steps,
                copy_streams(act_key, copies), copy_streams(env_key, copies), self.central,
                check=self.check_interrupt,
            )  # fmt: skip
        if self.rollout_workers is None:
            w = cfg.workers
            self.rollout_workers = RolloutPool(
                w.count, cfg.num_envs, (cfg.env.name, dict(cfg.env.kwargs or {}), cfg.env.cls),
                self.groups, self.policies, self.central, threads_per_worker=w.threads,
                address=w.ray_address, check=self.check_interrupt,
            )  # fmt: skip
        task = rollout_task(self.policies, self.norms, cfg.rollout_steps, act_key, env_key)
        return self.rollout_workers.collect(task, check=self.check_interrupt)

    def train_step(self, batch: int) -> dict[str, float]:
        cfg: MarlConfig = self.cfg
        actors, frozen = self.policies, {}
        if self.league is not None:  # teams against teams: some copies play past snapshots
            self.league.snapshot(self.updates)
            actors, frozen = self.league.lineup(self.stream(LEAGUE_STREAM), cfg.num_envs)
        data = self.rollout(actors)
        TeamLeague.drop_frozen(data, frozen)
        metrics: dict[str, float] = {}
        rng = self.stream(MINIBATCH_STREAM)
        for g, pol in self.policies.items():
            if not data[g]["alive"].any():  # the group only acted as a snapshot
                continue
            for k, v in update_group(pol, self.norms[g], data[g], data["ended"], cfg, rng).items():
                metrics[f"{g}_{k}"] = v
        returns = np.sum([data["episode_returns"][g] for g in self.groups], axis=0)
        if len(returns):
            metrics["train_episode_return"] = float(np.mean(returns))
        self.updates += 1
        self.env_steps += cfg.rollout_steps * cfg.num_envs
        metrics["env_steps"] = float(self.env_steps)
        return metrics

    def evaluate(self) -> dict[str, float]:
        cfg: MarlConfig = self.cfg
        data = self._eval_rollout(self.policies)
        per = {g: np.asarray(data["episode_returns"][g][: cfg.eval_episodes]) for g in self.groups}
        out = {"episode_return": float(np.sum(list(per.values()), axis=0).mean())}
        for g, r in per.items():
            out[f"return_{g}"] = float(r.mean())
        out.update(success_measures(data, cfg.env.name))
        if self.league is not None:
            out.update(self.league.rate(self._match, self.updates))
        self.history.append({"update": float(self.updates), **out})
        return out

    def _eval_rollout(self, actors: Mapping[str, Any]) -> dict[str, Any]:
        """`collect` of the evaluation's episodes (the same seeds and draws every time)."""
        cfg: MarlConfig = self.cfg
        if self.eval_env is None:
            self.eval_env = BatchedEnv(self.make, cfg.eval_episodes, self.groups)
        copies = range(cfg.eval_episodes)
        return collect(
            self.eval_env, actors, self.norms, self._episode_steps(),
            copy_streams([self.seed, EVAL_ACT_STREAM], copies),
            copy_streams([self.seed, EVAL_STREAM], copies), self.central, greedy=cfg.eval_greedy,
        )  # fmt: skip

    def _match(self, actors: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """A rated league match: each group's summed return per evaluation episode."""
        data = self._eval_rollout(actors)
        n = self.cfg.eval_episodes
        return {g: np.asarray(data["episode_returns"][g][:n]) for g in self.groups}

    def _episode_steps(self) -> int:
        """Steps an evaluation rolls: the env's ``max_cycles`` when it has one (MPE), else
        ``rollout_steps``."""
        return int((self.cfg.env.kwargs or {}).get("max_cycles", self.cfg.rollout_steps))

    def chance_level(self) -> float | None:
        return None

    def arena_state(self) -> dict:
        return {
            "updates": self.updates,
            "env_steps": self.env_steps,
            "norms": {g: n.state() for g, n in self.norms.items()},
            "history": self.history,
            **({"league": self.league.state()} if self.league is not None else {}),
        }

    def load_arena_state(self, state: dict) -> None:
        self.updates = int(state["updates"])
        self.env_steps = int(state["env_steps"])
        for g, s in state["norms"].items():
            self.norms[g].load(s)
        self.history = [dict(h) for h in state.get("history", [])]
        if self.league is not None:
            self.league.load_state(state["league"])

    def artifacts(self, run_dir: str) -> dict[str, str]:
        from .media import return_curves, write_animation

        out = {"returns_png": return_curves(self.history, list(self.groups), run_dir)}
        if self.cfg.animation:
            gif = write_animation(self, run_dir)
            if gif:
                out["episode_gif"] = gif
        if self.league is not None:
            out.update(self.league.write(run_dir))
        return out

    def live_view(self) -> dict[str, Any]:
        from .media import live_panels

        panels = live_panels(self)
        if self.league is not None and self.league.panel():
            panels.append(self.league.panel())
        return {"panels": panels}

    def extra_results(self) -> dict[str, Any]:
        out = {"groups": self.groups, "env_steps": self.env_steps, "algo": self.cfg.algo}
        if self.league is not None:
            out["ratings"] = self.league.table.rows()
        return out

    def close(self) -> None:
        if self.rollout_workers is not None:  # the Ray workers (and a Ray they started)
            self.rollout_workers.close()
            self.rollout_workers = None
        for env in (self.venv, self.eval_env):
            if env is not None:
                env.close()
        self.eval_env = None


def success_measures(data: Mapping[str, Any], name: str | None) -> dict[str, float]:
    """Task measures beside the return, where the task has one: simple_speaker_listener's
    and simple_spread's last-step reward (the listener's negative squared distance to its
    goal; the negative sum of each landmark's nearest-agent distance, collisions aside)."""
    if name not in ("simple_speaker_listener_v4", "simple_spread_v3"):
        return {}
    g = next(iter(k for k in data if isinstance(data[k], dict) and "rewards" in data[k]))
    last = data[g]["rewards"][-1]  # [N, Ag]
    return {"final_step_reward": float(last.mean())}
