"""The service's handle on PostgreSQL: an engine and transactions that tests can nest in their own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from rag_service.errors import DatabaseUnavailableError
from rag_service.log import mask_url


class Database:
    """Opens transactions on ``engine``; with ``bind`` (a test's connection) they become savepoints."""

    def __init__(self, engine: Engine, *, bind: Connection | None = None) -> None:
        self.engine = engine
        self._bound = bind is not None
        self._sessions = sessionmaker(
            bind=bind if bind is not None else engine,
            expire_on_commit=False,
            join_transaction_mode="create_savepoint",
        )

    @property
    def url_for_display(self) -> str:
        """The database URL with its password masked."""
        return mask_url(self.engine.url.render_as_string(hide_password=True))

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on any error."""
        try:
            with self._sessions.begin() as session:
                yield session
        except OperationalError as exc:
            if exc.connection_invalidated or _is_connection_error(exc):
                raise DatabaseUnavailableError(
                    f"lost the connection to {self.url_for_display} ({_first_line(exc)}); "
                    "the call can be retried once the database is back"
                ) from exc
            raise

    def dispose(self) -> None:
        """Close pooled connections (not the bound test connection)."""
        if not self._bound:
            self.engine.dispose()


def _first_line(exc: DBAPIError) -> str:
    text = str(exc.orig) if exc.orig is not None else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _is_connection_error(exc: OperationalError) -> bool:
    sqlstate = getattr(exc.orig, "sqlstate", None) or ""
    return sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03") or not sqlstate
