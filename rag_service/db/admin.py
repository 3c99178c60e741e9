"""Database administration: what the ``rag`` command does with the database outside ``UniversalRAGService``.

Migrating (``rag db upgrade``), the status report (``rag db status``), the embedded server's start and
leave around a command, the last-resort line for a driver error, and server-level helpers for scripts
(psycopg keywords from a URL, databases by name). Every other operation goes through the service.

Cheap to import: SQLAlchemy, alembic and the embedded server load only in the function that needs them
(a cold ``rag query`` starts the embedded server in a thread while the main thread imports SQLAlchemy).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_service.config import Settings


def upgrade_database(settings: Settings, *, revision: str = "head", partition_by_collection: bool = False) -> list[str]:
    """Migrate the database of ``settings`` to ``revision``; returns the status lines after it (``rag db upgrade``).

    ``partition_by_collection``: LIST-partition the (still empty) document, chunk and posting tables.
    """
    from rag_service.db import migrate
    from rag_service.db.engine import open_engine
    from rag_service.db.status import read_status

    engine = open_engine(settings)
    try:
        migrate.upgrade(engine, revision, partition_by_collection=partition_by_collection)
        return read_status(engine).lines()
    finally:
        engine.dispose()


def database_status(settings: Settings) -> tuple[list[str], bool]:
    """The lines of ``rag db status`` (server, schema, stored model, counts) and whether the schema is at
    the code's newest revision."""
    from rag_service.db.engine import open_engine
    from rag_service.db.status import read_status

    engine = open_engine(settings)
    try:
        status = read_status(engine)
    finally:
        engine.dispose()
    return status.lines(), status.up_to_date


def replica_status(settings: Settings) -> list[str]:
    """One ``rag db status`` line per read replica of ``RAG_READ_DATABASE_URL`` (its lag, or why unreachable)."""
    if not settings.read_database_url:
        return []
    from rag_service.db.replicas import replica_report

    return replica_report(settings)


def start_embedded_server(settings: Settings) -> None:
    """Start (or join) the embedded server of ``settings`` now, when it uses one; imports no SQLAlchemy."""
    if settings.database_url is not None:
        return
    from rag_service.db.embedded import embedded_server_url

    embedded_server_url(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)


def joined_embedded_servers() -> frozenset[Path]:
    """The embedded servers this process has joined so far (none, without importing them, when it has not)."""
    embedded = sys.modules.get("rag_service.db.embedded")
    return frozenset() if embedded is None else embedded.joined_embedded_servers()


def leave_embedded_servers(*, keep: frozenset[Path]) -> None:
    """Leave the embedded servers joined since ``keep`` was taken (``joined_embedded_servers``), so a server
    no other process uses stops now; a later command of this process starts or joins it again."""
    embedded = sys.modules.get("rag_service.db.embedded")  # not imported: no server joined
    if embedded is not None and embedded.leave_embedded_servers(keep=keep):
        embedded.forget_embedded_server_urls()


def database_failure(exc: Exception) -> str | None:
    """One line for a driver error no library layer mapped (the CLI's last resort); None for any other error."""
    from sqlalchemy.exc import DBAPIError

    if not isinstance(exc, DBAPIError):
        return None
    from rag_service.db.database import as_database_error, sqlstate
    from rag_service.errors import first_line

    mapped = as_database_error(exc, url="the database")
    if mapped is not None:
        return str(mapped)
    code = sqlstate(exc)
    return f"the database refused the command: {first_line(exc)}" + (f" (SQLSTATE {code})" if code else "")


def admin_params(url: str, *, database: str | None = None) -> dict[str, Any]:
    """psycopg connection keywords for a SQLAlchemy URL (unix-socket URLs of the embedded server too)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    params: dict[str, Any] = {"dbname": database or parsed.database or "postgres", "autocommit": True}
    for key in ("host", "port"):
        if key in parsed.query:
            params[key] = parsed.query[key]
    if parsed.host:
        params["host"] = parsed.host
    if parsed.port:
        params["port"] = parsed.port
    if parsed.username:
        params["user"] = parsed.username
    if parsed.password:
        params["password"] = parsed.password
    return params


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``server_url``."""
    from sqlalchemy.engine import make_url

    return make_url(server_url).set(database=name).render_as_string(hide_password=False)
