"""How far a replica is behind its primary in time, also when its stream stalls.

A standby alone measures only the WAL it received and has not replayed yet: a stream that stalls (a network
partition, a stuck WAL sender) leaves it "caught up" on what it has, replay lag 0, while the primary moves on.
So each lag check also samples the primary's WAL position, and a replica counts as behind since the first
sample of the primary past what the replica has replayed (at the checks' resolution).
"""

from __future__ import annotations

from collections import deque

from sqlalchemy import text

#: the WAL position a replica is compared with: the primary's written WAL (a cascading primary's replayed one)
PRIMARY_LSN_SQL = text(
    "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END::text"
)
#: at most this many samples are kept per replica (older ones only matter to a replica that far behind)
KEPT_SAMPLES = 256


def lsn_value(lsn: str) -> int:
    """A WAL position (``'16/B374D848'``) as a number."""
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


class PrimaryPositions:
    """The primary's WAL positions as sampled, with when (seconds of the replica's clock)."""

    def __init__(self, kept: int = KEPT_SAMPLES) -> None:
        self._samples: deque[tuple[int, float]] = deque(maxlen=kept)
        self._looked = False  # any sample yet: a replica caught up at the last look has been behind since then

    def behind_ms(self, primary_lsn: int, replayed_lsn: int, now: float, *, standby_ms: float) -> float:
        """Record the primary at ``primary_lsn`` now; how long the primary has been past ``replayed_lsn`` (0: not).

        At this process's first look no earlier sample says since when: ``standby_ms``, the standby's own measure,
        is taken (the sample is dated back by it, so later looks go on from it). Without it, each process (each
        ``rag query``) read a standby minutes behind as 0 ms.
        """
        first_look, self._looked = not self._looked, True
        self._samples.append((primary_lsn, now - standby_ms / 1000 if first_look else now))
        while self._samples and self._samples[0][0] <= replayed_lsn:  # replayed: no longer a mark of being behind
            self._samples.popleft()
        return (now - self._samples[0][1]) * 1000 if self._samples else 0.0
