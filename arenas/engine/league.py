"""A league's bookkeeping: a pool of frozen policy snapshots and a rated league table.

Shared by the arenas that train against past selves (self-play's ``arena.league``, marl's
team league). Both serialise for checkpoints (`OpponentPool.state`, `LeagueTable.state`),
so a resumed run continues with the same opponents and ratings.
"""

from __future__ import annotations

import base64
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from safetensors.numpy import load as st_load

from paddlecraft.encoders.tensorio import CheckpointError

from .ray_pool import weights_of  # noqa: F401 (re-exported: what a snapshot copies)

# ---------------------------------------------------------------------- opponent pool


@dataclass
class Snapshot:
    """A frozen copy of a policy's weights (numpy arrays owned by the snapshot)."""

    name: str  #: league name, e.g. ``snap_0003``
    step: int  #: training update at which it was taken
    weights: dict[str, np.ndarray] = field(repr=False)  #: structured state_dict keys


class OpponentPool:
    """Past selves of the learner, frozen: real copies, never live ``state_dict`` views.

    ``add`` copies every tensor of ``policy.state_dict()`` to numpy (a state dict is
    live: it would follow the optimizer). The pool keeps the newest ``max_size``
    snapshots; older ones leave the pool (their league ratings stay in the table).

    Checkpoints store each snapshot's arrays in the arena state, which the engine writes to
    the checkpoint's ``arena.safetensors`` (checksummed with the rest): resume works from any
    checkpoint, and the checkpoint's atomic write covers the pool.
    """

    def __init__(self, max_size: int = 16) -> None:
        if max_size < 1:
            raise ValueError(f"pool size must be >= 1, got {max_size}")
        self.max_size = int(max_size)
        self.snapshots: list[Snapshot] = []
        self.created = 0  # snapshots ever taken (names stay unique after eviction)

    def __len__(self) -> int:
        return len(self.snapshots)

    def add(self, policy: Any, step: int) -> Snapshot:
        """Freeze a copy of ``policy`` (any ``paddle.nn.Layer``); evict the oldest if full."""
        snap = Snapshot(f"snap_{self.created:04d}", int(step), weights_of(policy))
        self.created += 1
        self.snapshots.append(snap)
        if len(self.snapshots) > self.max_size:
            self.snapshots.pop(0)
        return snap

    def sample(self, k: int, rng: Any, weights: np.ndarray | None = None) -> list[Snapshot]:
        """``k`` snapshots drawn with replacement (uniformly, or by ``weights``)."""
        if not self.snapshots:
            return []
        p = None
        if weights is not None:
            w = np.asarray(weights, np.float64)
            p = w / w.sum() if w.sum() > 0 else None
        idx = rng.choice(len(self.snapshots), size=k, replace=True, p=p)
        return [self.snapshots[int(i)] for i in idx]

    @staticmethod
    def load_into(layer: Any, snap: Snapshot) -> None:
        """Copy a snapshot's weights into ``layer`` (same architecture), checking every key."""
        import paddle

        own = layer.state_dict()
        missing = sorted(own.keys() - snap.weights.keys())
        extra = sorted(snap.weights.keys() - own.keys())
        if missing or extra:
            raise CheckpointError(
                f"snapshot {snap.name} does not fit the opponent network: missing {missing[:3]}, "
                f"unexpected {extra[:3]}"
            )
        with paddle.no_grad():
            for k, t in own.items():
                t.set_value(snap.weights[k])

    # ------------------------------------------------------------------ state
    def state(self) -> dict:
        """Arena state: the snapshots (their arrays, see `snapshot_state`) and counters."""
        out = [snapshot_state(s) for s in self.snapshots]
        return {"max_size": self.max_size, "created": self.created, "snapshots": out}

    def load_state(self, state: dict) -> None:
        """Restore `state` (or an older checkpoint's base64 snapshots)."""
        self.snapshots = [snapshot_from_state(item) for item in state.get("snapshots", [])]
        self.max_size = int(state.get("max_size", self.max_size))
        self.created = int(state.get("created", len(self.snapshots)))


def snapshot_state(s: Snapshot) -> dict:
    """A snapshot as arena state: name, step and its arrays (the checkpoint stores those in
    ``arena.safetensors``)."""
    return {"name": s.name, "step": s.step, "weights": dict(s.weights)}


def snapshot_from_state(item: dict) -> Snapshot:
    """Inverse of `snapshot_state`. Older checkpoints held each snapshot
    as base64 safetensors bytes with their SHA-256 in ``state.json``: those still load, and
    raise `CheckpointError` if the bytes changed."""
    if "weights" in item:
        weights = {k: np.asarray(v) for k, v in item["weights"].items()}
        return Snapshot(item["name"], int(item["step"]), weights)
    data = base64.b64decode(item["safetensors_b64"])
    if hashlib.sha256(data).hexdigest() != item["sha256"]:
        raise CheckpointError(
            f"snapshot {item['name']} in the checkpoint is corrupted (SHA-256 mismatch)"
        )
    return Snapshot(item["name"], int(item["step"]), dict(st_load(data)))


# ---------------------------------------------------------------------- league table


class LeagueTable:
    """Ratings (openskill Plackett-Luce) and win/draw/loss counts for every player met.

    Players are the learner (``latest``), pool snapshots and fixed anchors (``random``,
    ``minimax``, ``mcts10``...). ``pinned`` players keep their rating: ``random`` is
    pinned at mu 25 so the scale has a fixed zero point and ratings from different
    runs compare. A snapshot starts from the learner's rating at the time it was taken.
    Every game updates both sides once (draws are ties), in the order recorded, so the
    table is deterministic; ``history`` keeps each player's mu at every evaluation for
    the rating-over-time plot.
    """

    def __init__(self, pinned: dict[str, tuple[float, float]] | None = None) -> None:
        from openskill.models import PlackettLuce

        self.model = PlackettLuce()
        self.players: dict[str, dict[str, Any]] = {}
        self.results: dict[str, list[int]] = {}  # "a|b" -> [a wins, draws, b wins]
        self.history: list[dict[str, Any]] = []
        self.pinned = dict(pinned if pinned is not None else {"random": (25.0, 1.0)})
        for name, (mu, sigma) in self.pinned.items():
            self.add(name, "anchor", mu, sigma)

    def add(
        self, name: str, kind: str, mu: float | None = None, sigma: float | None = None
    ) -> None:
        """Add a player (no-op if present). ``kind``: learner | snapshot | anchor."""
        if name in self.players:
            return
        self.players[name] = {
            "kind": kind,
            "mu": float(self.model.mu if mu is None else mu),
            "sigma": float(self.model.sigma if sigma is None else sigma),
            "games": 0,
        }

    def rating(self, name: str) -> tuple[float, float]:
        """``(mu, sigma)``."""
        p = self.players[name]
        return p["mu"], p["sigma"]

    def ordinal(self, name: str) -> float:
        """Conservative rating ``mu - 3 sigma``."""
        mu, sigma = self.rating(name)
        return mu - 3 * sigma

    def record(self, a: str, b: str, outcomes: Any) -> None:
        """Record games between ``a`` and ``b``: outcomes +1 (a won), 0 (draw), -1 (b won)."""
        outcomes = np.asarray(outcomes, np.int64).reshape(-1)
        if len(outcomes) == 0:
            return
        pa, pb = self.players[a], self.players[b]
        ra = self.model.rating(mu=pa["mu"], sigma=pa["sigma"])
        rb = self.model.rating(mu=pb["mu"], sigma=pb["sigma"])
        for o in outcomes.tolist():
            ranks = [0, 1] if o > 0 else [1, 0] if o < 0 else [0, 0]
            (na,), (nb,) = self.model.rate([[ra], [rb]], ranks=ranks)
            if a not in self.pinned:
                ra = na
            if b not in self.pinned:
                rb = nb
        for p, r in ((pa, ra), (pb, rb)):
            p["mu"], p["sigma"] = float(r.mu), float(r.sigma)
            p["games"] += len(outcomes)
        key, flip = (f"{a}|{b}", False) if a <= b else (f"{b}|{a}", True)
        row = self.results.setdefault(key, [0, 0, 0])
        wins, draws, losses = (
            int((outcomes > 0).sum()),
            int((outcomes == 0).sum()),
            int((outcomes < 0).sum()),
        )
        if flip:
            wins, losses = losses, wins
        row[0] += wins
        row[1] += draws
        row[2] += losses

    def head_to_head(self, a: str, b: str) -> tuple[int, int, int]:
        """``(a wins, draws, a losses)`` over every game recorded between them."""
        if a <= b:
            w, d, losses = self.results.get(f"{a}|{b}", [0, 0, 0])
            return w, d, losses
        w, d, losses = self.results.get(f"{b}|{a}", [0, 0, 0])
        return losses, d, w

    def matchups(self, name: str) -> dict[str, list[int]]:
        """``{opponent: [wins, draws, losses]}`` for ``name``."""
        out = {}
        for key in self.results:
            x, y = key.split("|")
            if name in (x, y):
                other = y if x == name else x
                out[other] = list(self.head_to_head(name, other))
        return out

    def log_history(self, step: int) -> None:
        """Remember every player's mu at this step (for the plot)."""
        self.history.append(
            {"step": int(step), "mu": {n: round(p["mu"], 4) for n, p in self.players.items()}}
        )

    def rows(self) -> list[dict[str, Any]]:
        """The table, best conservative rating first."""
        out = []
        for name, p in self.players.items():
            out.append(
                {
                    "player": name,
                    "kind": p["kind"],
                    "mu": round(p["mu"], 3),
                    "sigma": round(p["sigma"], 3),
                    "ordinal": round(p["mu"] - 3 * p["sigma"], 3),
                    "games": p["games"],
                }
            )
        return sorted(out, key=lambda r: -r["ordinal"])

    def format(self) -> str:
        """The table as aligned text."""
        lines = [f"{'player':<12} {'kind':<9} {'mu':>8} {'sigma':>7} {'games':>7}"]
        for r in self.rows():
            lines.append(
                f"{r['player']:<12} {r['kind']:<9} {r['mu']:>8.2f} {r['sigma']:>7.2f} {r['games']:>7}"
            )
        return "\n".join(lines)

    def state(self) -> dict:
        """JSON-able state."""
        return {
            "players": self.players,
            "results": self.results,
            "history": self.history,
            "pinned": {k: list(v) for k, v in self.pinned.items()},
        }

    def load_state(self, state: dict) -> None:
        """Restore `state`."""
        self.players = {k: dict(v) for k, v in state["players"].items()}
        self.results = {k: list(v) for k, v in state["results"].items()}
        self.history = list(state.get("history", []))
        self.pinned = {k: (float(v[0]), float(v[1])) for k, v in state.get("pinned", {}).items()}


def expected_score(table: LeagueTable, a: str, b: str) -> float:
    """Probability that ``a`` beats ``b`` under the ratings (for reports)."""
    (ma, sa), (mb, sb) = table.rating(a), table.rating(b)
    beta = table.model.beta
    return 0.5 * (1 + math.erf((ma - mb) / math.sqrt(2 * (2 * beta**2 + sa**2 + sb**2))))
