"""Engine creation: the configured URL or the embedded server, pooled, with errors made readable."""

from __future__ import annotations

import time
import weakref

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, OperationalError

from rag_service.config import Settings
from rag_service.db import packed_vector  # noqa: F401 (its dumper registered before any connection opens)
from rag_service.db.embedded import embedded_server_url
from rag_service.db.messages import url_for_display
from rag_service.errors import ConfigurationError, DatabaseUnavailableError, closest_name, first_line
from rag_service.forks import after_fork_in_child, first_use_in_child
from rag_service.log import URL_TEMPLATE, mask_url


def normalise_url(url: str) -> str:
    """Make ``postgresql://`` and ``postgres://`` URLs use the psycopg 3 driver."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def resolve_database_url(settings: Settings) -> str:
    """``RAG_DATABASE_URL`` if set, else the URL of the embedded server (started on first call)."""
    if settings.database_url:
        url = normalise_url(settings.database_url)
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ConfigurationError(
                f"RAG_DATABASE_URL ({mask_url(url)}) is not a database URL; use {URL_TEMPLATE}"
            ) from None
        if problem := scheme_problem(parsed.drivername):
            raise ConfigurationError(f"RAG_DATABASE_URL ({mask_url(url)}) {problem}")
        if not parsed.drivername.startswith("postgresql"):
            raise ConfigurationError(
                f"RAG_DATABASE_URL ({mask_url(url)}) is not PostgreSQL; rag_service needs PostgreSQL + pgvector"
            )
        return url
    return embedded_server_url(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)


#: libpq gives up connecting after this many seconds (its own default waits forever: a host that accepts TCP but never
#: answers hung every command); a ``connect_timeout`` in the URL wins
CONNECT_TIMEOUT_S = 10
#: TCP keepalives and a deadline for unacknowledged sends (ms): a connection to a host that vanished (power loss, a
#: dropped route) fails within about a minute instead of the kernel's 2 h / 15 min; libpq ignores them on a unix socket
TCP_DEFAULTS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,
}


def connect_defaults(url: str | URL, *, connect_timeout: int = CONNECT_TIMEOUT_S) -> dict[str, int]:
    """The libpq parameters a connection of ``url`` gets unless the URL sets them: a bounded connect, keepalives."""
    given = make_url(url).query
    wanted = {"connect_timeout": connect_timeout, **TCP_DEFAULTS}
    return {name: value for name, value in wanted.items() if name not in given}


def scheme_problem(drivername: str) -> str | None:
    """What is wrong with a URL's ``scheme+driver`` that nearly names PostgreSQL: a typo of the scheme, or a driver
    other than psycopg 3 (the one installed; SQLAlchemy failed with a traceback); None for the right one or for
    another database (the caller says it is not PostgreSQL)."""
    scheme, plus, driver = drivername.partition("+")
    if scheme != "postgresql":
        if closest_name(scheme, ["postgresql"], cutoff=0.75) is None:
            return None
        return f"has the scheme {drivername}://; did you mean postgresql{plus}{driver}://? use {URL_TEMPLATE}"
    if driver != "psycopg":
        return (
            f"uses the driver {driver!r}; rag_service connects with psycopg 3: start the URL with "
            "postgresql+psycopg:// or postgresql://"
        )
    return None


def make_engine(url: str, settings: Settings, *, connect_timeout: int = CONNECT_TIMEOUT_S) -> Engine:
    """A pooled engine; each new connection gets the statement timeout from the settings, and gives up connecting
    after ``connect_timeout`` seconds unless the URL says otherwise (``connect_defaults``)."""
    engine = create_engine(
        url,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_max_overflow,
        pool_timeout=30,
        connect_args=connect_defaults(url, connect_timeout=connect_timeout),
        # no hstore column: the dialect's type lookup at the first connect is a round trip of a cold start, run in
        # a psycopg savepoint whose rollback, when a stop interrupted it, printed an "error ignored" warning
        use_native_hstore=False,
    )
    _ping_when_idle(engine)
    _ENGINES.add(engine)
    timeout_ms = int(settings.statement_timeout_ms)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record):  # type: ignore[no-untyped-def]
        # Custom plans always: psycopg prepares a statement run five times, and Postgres' generic plan
        # for the search (blind to the query's lexemes and their posting counts) took 68 ms instead
        # of 10 on SciFact. The HNSW settings are per transaction (``db.search.configure_vector_scan``).
        # No JIT: the search's estimated cost counts branches that never run (the exact scan of a large
        # collection), so a server built with LLVM compiled every search past ~300k chunks: a plan of that
        # shape took 10-16 ms with JIT against 1.3 without (docs/benchmarks.md, session 15).
        with dbapi_connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, false), "
                "set_config('plan_cache_mode', 'force_custom_plan', false), set_config('jit', 'off', false)",
                (str(timeout_ms),),
            )
        dbapi_connection.commit()
        first_use_in_child()  # a forked child's first connection: what its fork left for it (``rag_service.forks``)

    return engine


#: every engine ``make_engine`` built and not yet collected (the main one and the replicas')
_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _forget_inherited_connections() -> None:
    """In a forked child: new pools for every engine, the parent's connections dropped unclosed (SQLAlchemy's
    recipe, ``dispose(close=False)``; psycopg closes no connection of another process when it collects one)."""
    for engine in list(_ENGINES):
        engine.dispose(close=False)


after_fork_in_child(_forget_inherited_connections)


#: a pooled connection idle for longer than this is pinged before it is handed out (seconds)
PING_AFTER_IDLE_S = 1.0
_IDLE_SINCE = "rag_idle_since"


def _ping_when_idle(engine: Engine) -> None:
    """Ping a pooled connection at checkout only if it sat idle for ``PING_AFTER_IDLE_S``.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: a round trip on each transaction, two of a
    query's nine before its transactions were merged. A connection back from a transaction within the
    last second is taken as alive; one idle for longer (a restarted server, an idle timeout) is pinged and
    replaced when dead. A connection that dies within that second fails its statement: reads retry
    (``Database.read``), a write reports the connection lost.
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_connection, record):  # type: ignore[no-untyped-def]
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection, record, proxy):  # type: ignore[no-untyped-def]
        idle_since = record.info.get(_IDLE_SINCE)
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return  # just connected, or in use a moment ago
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            # the pool discards this connection and checks out another (a new one if need be)
            raise DisconnectionError(f"a pooled connection was dead: {first_line(exc)}") from exc


def check_connection(engine: Engine) -> None:
    """Raise DatabaseUnavailableError with a readable message if the database cannot be reached."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        raise DatabaseUnavailableError(
            f"cannot connect to {url_for_display(engine)}: {first_line(exc)}; "
            "check RAG_DATABASE_URL and that the server is running"
        ) from None


def open_engine(settings: Settings) -> Engine:
    """Resolve the URL (starting the embedded server if needed), build the engine, check it answers."""
    engine = make_engine(resolve_database_url(settings), settings)
    check_connection(engine)
    return engine
