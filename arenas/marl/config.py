"""MarlArena's settings: the environment, the groups, the rollout and the PPO update."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

from paddlecraft.agents.settings import ConfigError

from ..engine import ArenaConfig
from ..engine.ray_pool import WorkersConfig

ALGOS = ("mappo", "ippo")


@dataclass
class EnvConfig:
    """Which PettingZoo Parallel environment (`paddlecraft.arenas.marl.envs.make_env`)."""

    #: an mpe2 task (simple_spread_v3 ...; conf/env/* set it) or a module path with parallel_env()
    name: Optional[str] = None  # noqa: UP045
    #: a user's own environment class, ``pkg.module:Class`` (a ParallelEnv/AECEnv subclass)
    cls: Optional[str] = None  # noqa: UP045
    kwargs: dict[str, Any] = field(default_factory=dict)  #: keywords of the env constructor


@dataclass
class LeagueConfig:
    """``arena.league``: teams against teams (`paddlecraft.arenas.marl.league`), for
    environments whose groups compete (simple_tag); off by default."""

    #: freeze every group's policy as a snapshot every N updates, update 0 included, and
    #: rate the snapshots at each evaluation (0: no league)
    snapshot_every: int = 0
    #: share of environment copies, in [0, 1], where one group's learner plays the other
    #: groups' past snapshots (the rest: every group's latest policy)
    past_fraction: float = 0.2


@dataclass
class MarlConfig(ArenaConfig):
    """Settings of `MarlArena` (one step = one rollout of every copy, then PPO per group)."""

    env: EnvConfig = field(default_factory=EnvConfig)
    #: mappo: each group's critic reads every agent's observation (concatenated) and the
    #: agent's one-hot index; ippo: its own observation only
    algo: str = "mappo"
    #: ``{group: [agent names]}``; empty: BenchMARL's default (``<group>_<i>`` names). One
    #: policy per group, agents.<group> configured for each
    groups: dict[str, list[str]] = field(default_factory=dict)
    steps_per_epoch: int = 50  #: updates per epoch (the run has epochs x steps_per_epoch)
    num_envs: int = 32  #: environment copies stepped as one batch
    rollout_steps: int = 25  #: steps of each copy per update (MPE: one 25-step episode)
    ppo_epochs: int = 10  #: passes over each rollout
    minibatches: int = 1  #: minibatches per pass
    gamma: float = 0.99  #: discount per step, in (0, 1]
    gae_lambda: float = 0.95  #: GAE's lambda, in [0, 1]
    clip: float = 0.2  #: PPO's ratio clip epsilon
    value_clip: float = 0.2  #: the value's clip around the collecting critic's (0: off)
    value_coef: float = 1.0  #: weight of the value loss
    entropy_coef: float = 0.01  #: weight of the entropy bonus
    value_norm: bool = True  #: the critic predicts normalised returns (running mean/std)
    adv_norm: bool = True  #: advantages standardised per group and rollout
    eval_episodes: int = 32  #: episodes of each evaluation (the same seeds every time)
    eval_greedy: bool = True  #: evaluate with the most likely action (Gaussian: its mean)
    animation: bool = True  #: write episode.gif (the env's rgb_array render) at the end
    #: rollouts on Ray workers (count > 0: the copies split over them; extra ray), as
    #: arena=selfplay's; evaluation stays in this process
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    league: LeagueConfig = field(default_factory=LeagueConfig)  #: teams against teams


def check_settings(cfg: MarlConfig) -> None:
    """Ranges of the settings, one `ConfigError` naming the first bad one."""
    if cfg.algo not in ALGOS:
        raise ConfigError(f"arena.algo={cfg.algo!r}: choose one of {list(ALGOS)}")
    for key in ("steps_per_epoch", "num_envs", "rollout_steps", "ppo_epochs", "minibatches",
                "eval_episodes"):  # fmt: skip
        if int(getattr(cfg, key)) < 1:
            raise ConfigError(f"arena.{key} must be >= 1, got {getattr(cfg, key)}")
    if not 0 < cfg.gamma <= 1 or not 0 <= cfg.gae_lambda <= 1:
        raise ConfigError("arena.gamma must be in (0, 1] and arena.gae_lambda in [0, 1]")
    cfg.workers.check()
    if cfg.workers.count > cfg.num_envs:
        raise ConfigError(
            f"arena.workers.count={cfg.workers.count} is more than arena.num_envs="
            f"{cfg.num_envs}: each worker steps at least one copy; lower the count or raise "
            "num_envs"
        )
    if cfg.league.snapshot_every < 0 or not 0 <= cfg.league.past_fraction <= 1:
        raise ConfigError(
            f"arena.league: snapshot_every must be >= 0 (0: off) and past_fraction in [0, 1], "
            f"got {cfg.league.snapshot_every} and {cfg.league.past_fraction}"
        )
    if cfg.league.snapshot_every and cfg.workers.count:
        raise ConfigError(
            f"arena.league.snapshot_every={cfg.league.snapshot_every} with arena.workers.count="
            f"{cfg.workers.count}: the team league's past opponents act in this process only; "
            "set arena.workers.count=0 or arena.league.snapshot_every=0"
        )
    if not cfg.env.name and not cfg.env.cls:
        raise ConfigError("arena.env: no environment; choose one, e.g. env=simple_spread")
