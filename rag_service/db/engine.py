"""Engine creation: the configured URL or the embedded server, pooled, with errors made readable."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from rag_service.config import Settings
from rag_service.db.embedded import embedded_server_url
from rag_service.db.messages import url_for_display
from rag_service.errors import ConfigurationError, DatabaseUnavailableError, first_line
from rag_service.log import mask_url


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
                f"RAG_DATABASE_URL ({mask_url(url)}) is not a database URL; "
                "use postgresql+psycopg://user:password@host:5432/dbname"
            ) from None
        if not parsed.drivername.startswith("postgresql"):
            raise ConfigurationError(
                f"RAG_DATABASE_URL ({mask_url(url)}) is not PostgreSQL; rag_service needs PostgreSQL + pgvector"
            )
        return url
    return embedded_server_url(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)


def make_engine(url: str, settings: Settings) -> Engine:
    """A pooled engine; each new connection gets the statement timeout from the settings."""
    engine = create_engine(
        url,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_max_overflow,
        pool_pre_ping=True,
        pool_timeout=30,
    )
    timeout_ms = int(settings.statement_timeout_ms)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record):  # type: ignore[no-untyped-def]
        # Custom plans always: psycopg prepares a statement run five times, and Postgres' generic plan
        # for the search (blind to the query's lexemes and their posting counts) took 68 ms instead
        # of 10 on SciFact. The HNSW settings are per transaction (``db.search.configure_vector_scan``).
        with dbapi_connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, false), "
                "set_config('plan_cache_mode', 'force_custom_plan', false)",
                (str(timeout_ms),),
            )
        dbapi_connection.commit()

    return engine


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
