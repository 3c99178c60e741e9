"""The service's handle on PostgreSQL: an engine and transactions that tests can nest in their own."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from rag_service.db.arm_connections import close_arm_connection
from rag_service.db.breaker import CircuitBreaker
from rag_service.db.embedded import embedded_disk_note, revive_embedded_server
from rag_service.db.messages import url_for_display
from rag_service.errors import (
    DatabaseError,
    DatabaseUnavailableError,
    DiskFullError,
    NodeUnavailableError,
    PoolExhaustedError,
    StatementTimeoutError,
    first_line,
)

T = TypeVar("T")

#: one snapshot for every statement of a read; psycopg sends both with the BEGIN, no extra round trip
_ONE_SNAPSHOT = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}


class Database:
    """Opens transactions on ``engine``; with ``bind`` (a test's connection) they become savepoints.

    Reads can go through ``read()``: bounded retries with exponential backoff when the connection is
    lost (a restart, a failover), behind a circuit breaker that fails fast while the database is down.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        bind: Connection | None = None,
        breaker: CircuitBreaker | None = None,
        retries: int = 3,
        backoff: float = 0.1,
    ) -> None:
        self.engine = engine
        self.breaker = breaker or CircuitBreaker()
        self.retries = retries
        self.backoff = backoff
        self._bound = bind is not None
        self._sessions = sessionmaker(
            bind=bind if bind is not None else engine,
            expire_on_commit=False,
            join_transaction_mode="create_savepoint",
        )

    @property
    def is_bound(self) -> bool:
        """Its transactions are savepoints of a test's connection (whose isolation level is fixed)."""
        return self._bound

    @property
    def url_for_display(self) -> str:
        """The database URL with its password masked."""
        return url_for_display(self.engine)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on any error."""
        with database_errors(self.engine), self._sessions.begin() as session:
            yield session

    def read(self, work: Callable[[Session], T]) -> T:
        """Run a read-only ``work(session)`` in one read-only REPEATABLE READ transaction, retrying lost connections.

        Every statement of ``work`` sees the same snapshot, so a reindex committing between two of them
        (query variants, follow-up reads) cannot show one document in two versions.

        At most ``retries`` extra attempts, sleeping ``backoff * 2**attempt`` seconds between them;
        then the DatabaseUnavailableError reaches the caller (it is retryable). Other errors are not
        retried.
        """
        attempt = 0
        while True:
            self.breaker.check(self.url_for_display)
            try:
                with self.transaction() as session:
                    if not self._bound:  # a test's outer transaction has its isolation fixed already
                        session.connection(execution_options=_ONE_SNAPSHOT)
                    result = work(session)
            except DatabaseUnavailableError as exc:
                # a Citus worker down: this server answered, and it waited its own connect timeout for the worker
                # already (30 s by default when the worker does not answer at all): neither counted nor retried
                if isinstance(exc, NodeUnavailableError):
                    raise
                self.breaker.failure()
                if attempt >= self.retries:
                    raise
                if revive_embedded_server(self.engine.url.query.get("host")):  # our embedded server had died
                    attempt += 1
                    continue
                time.sleep(self.backoff * 2**attempt)
                attempt += 1
                continue
            self.breaker.success()
            return result

    def dispose(self) -> None:
        """Close pooled connections (not the bound test connection)."""
        if not self._bound:
            close_arm_connection(self.engine)
            self.engine.dispose()


#: SQLSTATE of a statement cancelled by statement_timeout (or by pg_cancel_backend)
QUERY_CANCELED = "57014"
#: SQLSTATE of a write the server had no disk space for
DISK_FULL = "53100"


@contextmanager
def database_errors(engine: Engine) -> Iterator[None]:
    """Raise the one-line library error of a driver error (``as_database_error``) or of a pool that had no
    connection to give (``pool_exhausted``) inside the block; any other error as it is.

    For work on a connection of its own (``engine.connect()``: a lock, a VACUUM) as ``Database.transaction``.
    """
    try:
        yield
    except DBAPIError as exc:
        mapped = as_database_error(exc, url=url_for_display(engine))
        if mapped is None:
            raise
        raise mapped from exc
    except PoolTimeoutError as exc:
        raise pool_exhausted(engine, exc) from exc


def pool_exhausted(engine: Engine, exc: PoolTimeoutError) -> PoolExhaustedError:
    """The line for a call that waited the pool's timeout for a connection while all of them were in use."""
    reason = exc.args[0] if exc.args else first_line(exc)  # without SQLAlchemy's "Background on this error" link
    return PoolExhaustedError(
        f"no connection to {url_for_display(engine)} came free in time ({reason}): more calls use the "
        "database at once than the pool holds; retry when the load drops, or raise RAG_POOL_SIZE / "
        "RAG_POOL_MAX_OVERFLOW (within the server's max_connections), or lower RAG_API_THREADS"
    )


def as_database_error(exc: DBAPIError, *, url: str) -> DatabaseError | None:
    """The one-line library error for a driver error the user can act on; None for any other.

    A lost or refused connection becomes DatabaseUnavailableError (retryable); a statement cancelled
    by ``statement_timeout`` becomes StatementTimeoutError naming ``RAG_STATEMENT_TIMEOUT_MS``; a write the
    server had no disk space for becomes DiskFullError.
    """
    if (node := failed_node(exc)) is not None:
        return NodeUnavailableError(
            f"{url} answered, but the node {node} it reaches for this data did not ({first_line(exc)}): the "
            "collections placed on that node (a Citus worker) fail until it is back, the others are served; "
            "start the node, then retry"
        )
    if is_lost_connection(exc):
        return DatabaseUnavailableError(
            f"lost the connection to {url} ({first_line(exc)}){embedded_disk_note()}; the call can be retried once "
            "the database is back"
        )
    if sqlstate(exc) == QUERY_CANCELED:
        return StatementTimeoutError(
            f"a statement on {url} was cancelled ({first_line(exc)}): it ran longer than RAG_STATEMENT_TIMEOUT_MS "
            "allows, or waited that long for a lock; raise RAG_STATEMENT_TIMEOUT_MS (milliseconds, 0 = no limit) "
            "or retry when the competing work is done"
        )
    if sqlstate(exc) == DISK_FULL:
        return DiskFullError(
            f"the database at {url} has no disk space left ({first_line(exc)}); nothing of this write was kept: "
            "free space on the disk of the server's data directory, then retry"
        )
    return None


def sqlstate(exc: DBAPIError) -> str:
    """The SQLSTATE code of the driver error ('' when it has none)."""
    return getattr(exc.orig, "sqlstate", None) or ""


#: how Citus names the worker it could not reach: a query's connection, a size's, a transaction's at COMMIT
_REMOTE_NODE = re.compile(r"(?:remote node |could not connect to |marked as essential: )(?:\S*@)?(\S+:\d+)")


def failed_node(exc: DBAPIError) -> str | None:
    """The ``host:port`` of a node the server itself failed to reach (Citus: a worker; "another node" when the
    message names none): a connection failure the server reported over a connection that still works. None for
    any other error, a lost connection to the server included."""
    diag = getattr(exc.orig, "diag", None)
    if exc.connection_invalidated or diag is None or diag.severity is None:  # not sent by the server
        return None
    found = _REMOTE_NODE.search(str(diag.message_primary or ""))
    if found:
        return found.group(1)
    return "another node" if sqlstate(exc).startswith("08") else None


def is_lost_connection(exc: DBAPIError) -> bool:
    """The driver error says the connection is gone (refused, closed, terminated by the server)."""
    return isinstance(exc, (OperationalError, InterfaceError)) and (
        exc.connection_invalidated or (_is_connection_error(exc) and failed_node(exc) is None)
    )


def _is_connection_error(exc: DBAPIError) -> bool:
    code = sqlstate(exc)
    return code.startswith("08") or code in ("57P01", "57P02", "57P03") or not code
