"""Read replicas for retrieval (``RAG_READ_DATABASE_URL``), with fallback to the primary.

Only retrieval reads (the preset row and the hybrid search of a ``retrieve()`` call) go to a replica;
writes, migrations, advisory locks and catalog reads stay on the primary. One call tries the
replicas in their configured order and falls back to the next one, then to the primary, when a
replica

* cannot be reached or loses the connection mid-read (each replica has its own circuit breaker, so
  a dead replica is skipped at once for a while instead of being retried on every call);
* cancels the read for a conflict with recovery (a hot-standby conflict: the primary vacuumed rows
  the read still needed);
* lags behind the primary by more than ``RAG_READ_MAX_LAG_MS`` (when set). Its replay lag is read at
  most once per ``lag_check_interval`` seconds per replica, by whichever call finds it stale, so a
  search pays no extra round trip;
* has left recovery (promoted) while the primary, another server, runs on: it no longer replays the primary's
  writes. Checked with the lag, at most once per ``lag_check_interval``, also without a lag bound.

The call's result says where it was served (``metrics.read_from``: ``primary`` or ``replica N``,
N counting from 1 in ``RAG_READ_DATABASE_URL``) and every fallback is an entry of
``metrics.degraded`` with its reason.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session

from rag_service.config import Settings
from rag_service.db.breaker import CircuitBreaker
from rag_service.db.database import Database
from rag_service.db.replica_lag import PRIMARY_LSN_SQL, PrimaryPositions, lsn_value
from rag_service.errors import (
    ConfigurationError,
    DatabaseError,
    DatabaseUnavailableError,
    UnknownCollectionError,
    first_line,
)
from rag_service.forks import ChildLock
from rag_service.log import URL_TEMPLATE, mask_url

T = TypeVar("T")

PRIMARY = "primary"
#: a replica's engine gives up connecting after this many seconds (libpq's own default is to wait forever)
CONNECT_TIMEOUT_S = 2
#: failed calls that open a replica's circuit, and how long it then stays open
BREAKER_THRESHOLD = 2
BREAKER_COOLDOWN_S = 5.0
#: hot-standby conflicts (serialization failure, deadlock): the read can run elsewhere
_RECOVERY_CONFLICTS = ("40001", "40P01")
# Replay lag in milliseconds: 0 when everything received is replayed (an idle primary), NULL when no
# WAL receiver runs (the standby lost its primary: its lag is unknown), 0 on a server not in recovery.
# A standby that has replayed no commit since it started has no replay timestamp: while it streams,
# what it is replaying then is WAL without a commit yet (seen right after pg_basebackup), counted 0.
# With it, the WAL position replayed (compared with the primary's: ``replica_lag``), whether the server is a
# standby at all and when it started (a server not in recovery is the primary itself or one split off from it).
_LAG_SQL = text(
    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0 "
    "WHEN NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver) THEN NULL "
    "WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
    "ELSE coalesce(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000, 0) END, "
    "pg_last_wal_replay_lsn()::text, pg_is_in_recovery(), pg_postmaster_start_time()"
)
_STARTED_SQL = text("SELECT pg_postmaster_start_time()")
#: why a replica that left recovery while its primary runs on is skipped (with or without a lag bound)
SPLIT_OFF = "is not a standby of the primary (promoted?): it no longer replays the primary's writes"
# a comma followed by the next URL's scheme separates URLs (a password may hold a comma)
_URL_SEPARATOR = re.compile(r"\s*,\s*(?=postgres(?:ql)?(?:\+\w+)?://)")


def parse_read_urls(value: str | None) -> list[str]:
    """The URLs of ``RAG_READ_DATABASE_URL`` (comma-separated), each checked and made to use psycopg."""
    from rag_service.db.engine import normalise_url, scheme_problem

    if not value or not value.strip():
        return []
    urls = []
    for raw in _URL_SEPARATOR.split(value.strip()):
        url = normalise_url(raw.strip())
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            raise ConfigurationError(
                f"RAG_READ_DATABASE_URL: {mask_url(url)!r} is not a database URL; use comma-separated "
                f"{URL_TEMPLATE} URLs"
            ) from None
        if problem := scheme_problem(parsed.drivername):
            raise ConfigurationError(f"RAG_READ_DATABASE_URL: {mask_url(url)} {problem}")
        if not parsed.drivername.startswith("postgresql"):
            raise ConfigurationError(
                f"RAG_READ_DATABASE_URL: {mask_url(url)} is not PostgreSQL; replicas must be PostgreSQL standbys"
            )
        urls.append(parsed.render_as_string(hide_password=False))
    return urls


class Replica:
    """One read replica: its database handle (own pool and circuit breaker) and its cached replay lag."""

    def __init__(
        self,
        name: str,
        database: Database,
        *,
        max_lag_ms: int | None = None,
        lag_check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.database = database
        self.max_lag_ms = max_lag_ms
        self.lag_check_interval = lag_check_interval
        self._clock = clock
        self._lock = ChildLock()
        self._lag_ms: float | None = None
        self._read_at: float | None = None  # when the lag was last read
        self._checked_at: float | None = None  # when a call last set out to read it
        #: the primary it replicates (``ReadRouter`` sets it): its WAL position bounds a stalled stream's lag
        self.primary: Database | None = None
        self._positions = PrimaryPositions()
        #: bytes of WAL the primary had written past what this replica replayed, at the last read (None: unknown)
        self.behind_bytes: int | None = None
        #: at the last read: not in recovery while the primary, another server, answered (a promoted standby)
        self.split_off = False

    def lag_ms(self) -> float | None:
        """The replay lag in ms as last read (None: unknown, or never read)."""
        return self._lag_ms

    def read_lag(self) -> float | None:
        """Read the replay lag now (one short read-only transaction here, one on the primary first when it is
        known): with the primary, the time since it passed what the standby has replayed (``replica_lag``; at a
        process's first look at a standby behind it, the standby's own measure); without it, the standby's own
        measure, which a stalled stream reads as 0 and WAL without a commit (a read's page pruning) as the age of
        the last commit. DatabaseUnavailableError if the replica is unreachable; an unreachable primary leaves
        the standby's own measure. A server not in recovery reads 0, and ``split_off`` says whether it is another
        server than the primary (a standby promoted while the primary runs on)."""
        primary_lsn = self._primary_lsn()
        lag, replayed, standby, started = self.database.read(lambda session: session.execute(_LAG_SQL).one())
        value = None if lag is None else max(float(lag), 0.0)
        split_off = not standby and self._other_than_primary(started)
        with self._lock:
            now = self._clock()
            self.behind_bytes = None
            self.split_off = split_off
            if value is not None and primary_lsn is not None and replayed is not None:
                value = self._positions.behind_ms(primary_lsn, lsn_value(replayed), now, standby_ms=value)
                self.behind_bytes = max(primary_lsn - lsn_value(replayed), 0)
            self._lag_ms, self._read_at = value, now
        return value

    def _primary_lsn(self) -> int | None:
        if self.primary is None:
            return None
        try:
            return lsn_value(self.primary.read(lambda session: session.execute(PRIMARY_LSN_SQL).scalar_one()))
        except DatabaseError:
            return None

    def _other_than_primary(self, started: object) -> bool:
        """Whether the primary answers and is not the server that started at ``started`` (no primary, or one that
        cannot be reached: a failover may have promoted this server to replace it, so it is not called split off)."""
        if self.primary is None:
            return False
        try:
            return bool(self.primary.read(lambda session: session.execute(_STARTED_SQL).scalar_one()) != started)
        except DatabaseError:
            return False

    def skip_reason(self) -> str | None:
        """Why this call should not read here (split off from the primary; lag over the bound, or unknown); None
        when it may. The state is read at most once per ``lag_check_interval``, also without a lag bound."""
        with self._lock:
            never_read = self._read_at is None
            due = self._checked_at is None or self._clock() - self._checked_at >= self.lag_check_interval
            if due:  # this call refreshes the value; concurrent calls use the one read before
                self._checked_at = self._clock()
        lag = self.read_lag() if due or never_read else self._lag_ms
        if self.split_off:
            return SPLIT_OFF
        if self.max_lag_ms is None:
            return None
        if lag is None:
            return "replay lag unknown (no WAL receiver: the standby is not streaming from its primary)"
        if lag > self.max_lag_ms:
            return f"replay lag {lag:.0f} ms is over RAG_READ_MAX_LAG_MS ({self.max_lag_ms})"
        return None


@dataclass
class ReadRoute:
    """The reads of one call: tried on the replicas in order, then on the primary; remembers what failed."""

    router: ReadRouter
    served_by: str = PRIMARY
    notes: list[str] = field(default_factory=list)
    _failed: set[str] = field(default_factory=set)

    def read(self, work: Callable[[Session], T]) -> T:
        """``work(session)`` in one read-only transaction on the first replica that can serve it, else the primary."""
        for replica in self.router.replicas:
            if replica.name in self._failed:
                continue
            try:
                reason = replica.skip_reason()
                if reason is None:
                    result = replica.database.read(work)
                    self.served_by = replica.name
                    return result
            except DatabaseUnavailableError as exc:
                reason = f"unavailable ({first_line(exc)})"
            except DBAPIError as exc:
                if getattr(exc.orig, "sqlstate", None) not in _RECOVERY_CONFLICTS:
                    raise
                reason = f"read cancelled ({first_line(exc)})"
            except UnknownCollectionError:  # indexed on the primary, not replayed here yet: the primary decides
                reason = "lacks the collection (behind the primary)"
            self._failed.add(replica.name)
            self.notes.append(f"{replica.name} {reason}; read from the next replica or the primary")
        result = self.router.primary.read(work)
        self.served_by = PRIMARY
        return result


class ReadRouter:
    """The primary and the read replicas of one service; ``route()`` starts the reads of one call."""

    def __init__(self, primary: Database, replicas: Sequence[Replica] = ()) -> None:
        self.primary = primary
        self.replicas = list(replicas)
        for replica in self.replicas:
            replica.primary = primary

    def route(self) -> ReadRoute:
        """A new route for one call's reads."""
        return ReadRoute(self)

    def dispose(self) -> None:
        """Close the replicas' pooled connections (the primary belongs to its owner)."""
        for replica in self.replicas:
            replica.database.dispose()


def open_read_router(primary: Database, settings: Settings) -> ReadRouter:
    """The router of ``RAG_READ_DATABASE_URL`` and ``RAG_READ_MAX_LAG_MS``; no replica is contacted yet.

    A replica that is down at start-up is no error: calls fall back to the primary until it answers.
    """
    return ReadRouter(primary, open_replicas(settings))


def open_replicas(settings: Settings) -> list[Replica]:
    """One ``Replica`` per URL of ``RAG_READ_DATABASE_URL``: own pool, own circuit breaker, no retries."""
    from rag_service.db.engine import make_engine

    return [
        Replica(
            f"replica {number}",
            Database(
                make_engine(url, settings, connect_timeout=CONNECT_TIMEOUT_S),
                breaker=CircuitBreaker(threshold=BREAKER_THRESHOLD, cooldown=BREAKER_COOLDOWN_S),
                retries=0,
            ),
            max_lag_ms=settings.read_max_lag_ms,
        )
        for number, url in enumerate(parse_read_urls(settings.read_database_url), start=1)
    ]


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """What ``rag db status`` shows of one replica."""

    name: str
    url: str
    lag_ms: float | None
    error: str | None = None
    behind_bytes: int | None = None
    split_off: bool = False

    def line(self) -> str:
        """One report line (one read: a stream stalled since shows as WAL behind the primary, not as time)."""
        if self.error is not None:
            return f"{self.name}:  {self.url} unreachable ({self.error})"
        if self.split_off:
            return f"{self.name}:  {self.url} {SPLIT_OFF}; reads skip it"
        lag = "unknown (not streaming)" if self.lag_ms is None else f"{self.lag_ms:.0f} ms"
        behind = f", {self.behind_bytes / 1024:,.0f} kB of WAL behind the primary" if self.behind_bytes else ""
        return f"{self.name}:  {self.url} replay lag {lag}{behind}"


def replica_statuses(replicas: Sequence[Replica]) -> list[ReplicaStatus]:
    """Each replica's URL and current replay lag (or why it cannot be read)."""
    out = []
    for replica in replicas:
        try:
            lag = replica.read_lag()
            out.append(
                ReplicaStatus(
                    replica.name, replica.database.url_for_display, lag, None, replica.behind_bytes, replica.split_off
                )
            )
        except DatabaseUnavailableError as exc:
            out.append(ReplicaStatus(replica.name, replica.database.url_for_display, None, first_line(exc)))
    return out


def replica_report(settings: Settings) -> list[str]:
    """``rag db status`` lines for the replicas of ``RAG_READ_DATABASE_URL`` (none when it is unset)."""
    from rag_service.db.engine import open_engine

    primary = Database(open_engine(settings))
    router = ReadRouter(primary, open_replicas(settings))  # each replica compared with the primary's WAL
    try:
        return [status.line() for status in replica_statuses(router.replicas)]
    finally:
        router.dispose()
        primary.dispose()
