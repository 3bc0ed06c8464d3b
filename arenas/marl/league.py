"""Teams against teams: a league of frozen group snapshots and their openskill ratings.

For an environment whose groups compete (simple_tag: adversaries against the good agent),
``arena.league.snapshot_every=K`` freezes every group's policy every K updates, update 0
included. In training, each environment copy of a rollout is, with probability
``arena.league.past_fraction``, a *past* copy: one group, drawn uniformly, learns there
while every other group acts with one of its own snapshots (one drawn per group and
update from its pool); the other copies are every group's latest policy against the
others' (OpenAI Five's mix: most games against the latest selves, some against past
ones). Only learners are updated: a frozen player's samples are masked out of its
group's update (``alive`` 0), and its network is a twin that only ever gets weights.

Ratings: at every evaluation the league plays rated matches on the evaluation's seeds
(``eval_episodes`` episodes each): every group's latest policy against the others', and
each group's snapshots (its first one and the pool) against the other groups' latest.
One openskill rating per (group, snapshot) in the shared
`paddlecraft.arenas.engine.league.LeagueTable`: the learners are ``<group>``, snapshots
``<group>@<update>``; each group's first snapshot (``<group>@0``, the untrained policy)
is pinned at mu 25, the scale's zero point. How an episode is judged: `judge`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents.group_policy import GroupPolicy
from paddlecraft.agents.settings import ConfigError

from ..engine.league import (
    LeagueTable,
    OpponentPool,
    Snapshot,
    snapshot_from_state,
    snapshot_state,
)
from ..engine.plots import rating_history_chart, save, to_bgr

log = logging.getLogger("paddlecraft")

#: snapshots per group kept as training opponents and rated (older ones keep their last
#: rating in the table; the first snapshot is always rated)
POOL_SIZE = 8
#: each group's first snapshot: mu and sigma it is pinned at
ANCHOR = (25.0, 1.0)
#: how `judge` decides an episode (written to ratings.json)
JUDGE = (
    "per episode, each group's summed return is standardised over every episode of the "
    "rating round (mean 0, std 1); the higher standardised return wins, equal ones draw"
)

#: a rated match: its episodes' summed return per group, ``{group: [episodes]}``
Returns = Mapping[str, np.ndarray]


def player(group: str, snap: Snapshot | None = None) -> str:
    """The table's name of a group's learner (``snap`` None) or of one of its snapshots."""
    return group if snap is None else f"{group}@{snap.step}"


def check_league(snapshot_every: int, groups: Mapping[str, Sequence[str]]) -> None:
    """A league needs two or more groups: refuse one group in one line naming the setting."""
    if snapshot_every and len(groups) < 2:
        raise ConfigError(
            f"arena.league.snapshot_every={snapshot_every}: a league plays groups against "
            f"each other, but this environment has one group ({dict(groups)}); leave "
            "arena.league.snapshot_every=0 (no league), or split the agents with arena.groups"
        )


def judge(matches: Sequence[Returns]) -> list[dict[tuple[str, str], np.ndarray]]:
    """Outcomes of every pair of groups in every episode of a rating round: ``+1`` (the
    pair's first group won), ``0`` (draw), ``-1``, ``[episodes]`` per pair and match.

    A general-sum task has no sign that says who won (simple_tag: the adversaries' return
    is ``+10`` per touch for each of them, the agent's ``-10`` per touch minus a penalty
    for leaving the field, so the raw difference always favours the adversaries). So each
    group's return is standardised over the whole round, and the group that did better
    than its own round average by more (in its own standard deviations) wins. In a
    zero-sum task this is the sign of the return difference against the round's mean
    difference; a constant added to one group's rewards, or a positive scale, changes
    nothing. Groups with one shared reward (speaker and listener) always draw.
    """
    groups = list(matches[0])
    stats = {}
    for g in groups:
        r = np.concatenate([np.asarray(m[g], np.float64) for m in matches])
        stats[g] = (r.mean(), r.std() if r.std() > 0 else 1.0)
    out = []
    for m in matches:
        z = {g: (np.asarray(m[g], np.float64) - stats[g][0]) / stats[g][1] for g in groups}
        out.append({(a, b): np.sign(np.round(z[a] - z[b], 9)).astype(np.int64)
                    for a, b in combinations(groups, 2)})  # fmt: skip
    return out


class PastOrPresent:
    """A group's actor in a league rollout: its learner, but a frozen snapshot (``twin``)
    in the copies ``past`` marks; the critic is the learner's (`collect` asks both)."""

    def __init__(self, learner: GroupPolicy, twin: GroupPolicy, past: np.ndarray) -> None:
        self.learner, self.twin, self.past = learner, twin, past  # past: [N] bool

    def sample(
        self, obs: np.ndarray, rng: np.random.Generator, greedy: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """`GroupPolicy.sample` of ``obs [N * Ag, *obs]`` (copy-major, as `collect` flattens)."""
        act, logp = self.learner.sample(obs, rng, greedy)
        rows = np.repeat(self.past, len(obs) // len(self.past))  # [N * Ag]
        # the twin acts on every row and its past rows are kept: each copy then draws the
        # same amount from its own stream (`rollout.CopyStreams`) whichever copies are past
        past_act, past_logp = self.twin.sample(obs, rng, greedy)
        act[rows], logp[rows] = past_act[rows], past_logp[rows]
        return act, logp

    def value(self, critic_in: Any) -> Any:
        return self.learner.value(critic_in)


def twin_of(pol: GroupPolicy) -> GroupPolicy:
    """A network for ``pol``'s snapshots: same architecture, own scope, never trained;
    built seeded, so building it draws from no global stream."""
    twin = GroupPolicy(f"{pol.name}_past", **{**pol.config, "seed": 0})
    twin.eval()
    return twin


class TeamLeague:
    """Every group's snapshots, the training lineups and the ratings (arena state).

    Args:
        every: ``arena.league.snapshot_every`` (> 0).
        past_fraction: ``arena.league.past_fraction``.
        policies: each group's learner, bound to the environment.
    """

    def __init__(
        self, every: int, past_fraction: float, policies: Mapping[str, GroupPolicy]
    ) -> None:
        self.every, self.past_fraction = int(every), float(past_fraction)
        self.policies = dict(policies)
        self.groups = list(policies)
        self.twins = {g: twin_of(p) for g, p in self.policies.items()}
        self.pools = {g: OpponentPool(POOL_SIZE) for g in self.groups}
        self.first: dict[str, Snapshot] = {}
        self.table = LeagueTable(pinned={})
        for g in self.groups:
            self.table.add(g, "learner")
        self._panel: tuple[int, dict[str, Any] | None] = (-1, None)  # (evaluations, panel)

    def snapshot(self, updates: int) -> None:
        """Freeze every group's policy if ``updates`` is on the schedule."""
        if updates % self.every:
            return
        for g, pol in self.policies.items():
            snap = self.pools[g].add(pol, updates)
            if g not in self.first:  # the scale's zero point
                self.first[g] = snap
                self.table.pinned[player(g, snap)] = ANCHOR
                self.table.add(player(g, snap), "anchor", *ANCHOR)
            else:  # starts from its learner's rating, as self-play's snapshots do
                self.table.add(player(g, snap), "snapshot", *self.table.rating(g))

    def lineup(
        self, rng: np.random.Generator, n: int
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Who acts for each group in the ``n`` copies of one rollout: ``(actors, frozen)``;
        ``frozen[g]`` ``[N]`` marks the copies where ``g`` is a snapshot (`drop_frozen`)."""
        past = rng.random(n) < self.past_fraction  # [N] past copies
        learns = rng.integers(len(self.groups), size=n)  # [N] the group that learns there
        actors: dict[str, Any] = {}
        frozen: dict[str, np.ndarray] = {}
        for k, g in enumerate(self.groups):
            picked = self.pools[g].sample(1, rng)
            frozen[g] = past & (learns != k) & bool(picked)
            actors[g] = self.policies[g]
            if frozen[g].any():
                OpponentPool.load_into(self.twins[g], picked[0])
                actors[g] = PastOrPresent(self.policies[g], self.twins[g], frozen[g])
        return actors, frozen

    @staticmethod
    def drop_frozen(data: dict[str, Any], frozen: Mapping[str, np.ndarray]) -> None:
        """Mask the snapshots' samples out of their groups' updates (``alive [T, N, Ag]``)."""
        for g, mask in frozen.items():
            data[g]["alive"][:, mask] = 0.0

    def rated(self, group: str) -> list[Snapshot]:
        """The snapshots of ``group`` a rating round plays: its first one and its pool."""
        first = self.first.get(group)
        pool = [s for s in self.pools[group].snapshots if first is None or s.step != first.step]
        return ([first] if first is not None else []) + pool

    def rate(self, play: Callable[[Mapping[str, Any]], Returns], updates: int) -> dict[str, float]:
        """One rating round: ``play(actors)`` plays one match (the evaluation's episodes) and
        gives each group's summed return per episode; the outcomes (`judge`) update the
        table. Returns each learner's rating, ``rating_<group>`` (mu)."""
        matches: list[dict[str, Snapshot]] = [{}]  # the snapshots standing in for learners
        matches += [{g: s} for g in self.groups for s in self.rated(g)]
        played = []
        for m in matches:
            actors: dict[str, Any] = dict(self.policies)
            for g, snap in m.items():
                OpponentPool.load_into(self.twins[g], snap)
                actors[g] = self.twins[g]
            played.append(play(actors))
        judged = judge(played)
        if not any(o.any() for pairs in judged for o in pairs.values()):
            log.warning(
                "league: every rated episode was a draw; groups that share one reward "
                "do not compete (arena.league.snapshot_every=0 turns the league off)"
            )
        for m, pairs in zip(matches, judged):
            for (a, b), outcomes in pairs.items():
                if m and not m.keys() & {a, b}:
                    continue  # two learners: the round's first match rates them
                self.table.record(player(a, m.get(a)), player(b, m.get(b)), outcomes)
        self.table.log_history(updates)
        return {f"rating_{g}": self.table.rating(g)[0] for g in self.groups}

    # ------------------------------------------------------------------ outputs
    def chart(self) -> Any:
        """Each player's rating over training (snapshots grey)."""
        return rating_history_chart(self.table.history, snapshot=lambda name: "@" in name)

    def write(self, run_dir: str) -> dict[str, str]:
        """``ratings.json`` (the table, the head-to-head counts, the history, the judging
        rule) and ``ratings.png`` in the run folder."""
        d = Path(run_dir)
        report = {"table": self.table.rows(), "results": self.table.results,
                  "history": self.table.history, "judge": JUDGE}  # fmt: skip
        (d / "ratings.json").write_text(json.dumps(report, indent=2))
        return {"ratings_json": str(d / "ratings.json"),
                "ratings_png": str(save(self.chart(), d / "ratings.png"))}  # fmt: skip

    def panel(self) -> dict[str, Any] | None:
        """The live page's picture of the ratings (drawn once per rating round)."""
        from ..engine.live.panels import image_panel

        key = len(self.table.history)
        if key and self._panel[0] != key:
            rgb = to_bgr(self.chart())[..., ::-1]
            self._panel = (key, image_panel("league ratings (openskill mu)", rgb))
        return self._panel[1]

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        return {
            "pools": {g: p.state() for g, p in self.pools.items()},
            "first": {g: snapshot_state(s) for g, s in self.first.items()},
            "table": self.table.state(),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        for g, s in state["pools"].items():
            self.pools[g].load_state(s)
        self.first = {g: snapshot_from_state(s) for g, s in state["first"].items()}
        self.table.load_state(state["table"])
