"""Self-play's league: when the learner joins its pool of past selves; the pool and the
rated table themselves are shared with the other arenas (`paddlecraft.arenas.engine.league`)."""

from ..engine.league import (
    LeagueTable,
    OpponentPool,
    Snapshot,
    expected_score,
    snapshot_from_state,
    snapshot_state,
    weights_of,
)

#: the learner joins the pool as a snapshot once its mean score (win 1, draw 1/2, loss 0)
#: over the pool games since the last snapshot reaches this, in [0, 1] (`SelfPlayArena`;
#: besides ``arena.league.snapshot_every``)
SNAPSHOT_SCORE = 0.7
#: pool games since the last snapshot needed before `SNAPSHOT_SCORE` is checked (>= 0)
SNAPSHOT_MIN_GAMES = 256

__all__ = [
    "SNAPSHOT_MIN_GAMES",
    "SNAPSHOT_SCORE",
    "LeagueTable",
    "OpponentPool",
    "Snapshot",
    "expected_score",
    "snapshot_from_state",
    "snapshot_state",
    "weights_of",
]
