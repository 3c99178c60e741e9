"""Each engine's second connection, on which ``db.parallel_search`` runs keyword arms beside the session.

One per engine, opened on first use through the engine's pool (so with its connect settings) and then
detached from it, REPEATABLE READ and read-only (it imports a session's snapshot); closed with the engine
(``Database.dispose``) or when the engine is collected; dropped unclosed in a forked child (the parent's).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import psycopg
from psycopg import IsolationLevel
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from sqlalchemy.pool import QueuePool

from rag_service.forks import after_fork_in_child


class ArmConnection:
    """An engine's second connection for keyword arms: one search at a time (``lock``), opened on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connection: psycopg.Connection[Any] | None = None

    def open(self, engine: Engine) -> psycopg.Connection[Any] | None:
        """The connection, opened through ``engine``'s pool if it is not open; call with ``lock`` held.

        None when it cannot be opened without waiting (no idle pooled connection to turn into it) or at all:
        the caller runs the one statement, and a later search tries again.
        """
        if self.connection is not None and not self.connection.closed:
            return self.connection
        pool = engine.pool
        if not isinstance(pool, QueuePool) or pool.checkedin() == 0:
            return None
        try:
            pooled = engine.raw_connection()  # through the pool: the engine's connect settings
        except (DBAPIError, SQLAlchemyTimeoutError):
            return None
        connection = pooled.driver_connection
        pooled.detach()  # ours from now on; the pool opens another in its place when it needs one
        if not isinstance(connection, psycopg.Connection):
            raise TypeError(f"expected a psycopg connection, got {type(connection).__name__}")
        connection.isolation_level = IsolationLevel.REPEATABLE_READ
        connection.read_only = True
        self.connection = connection
        return connection

    def close(self) -> None:
        """Close the connection (the next ``open`` makes a new one)."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def forget(self) -> None:
        """In a forked child: drop the parent's connection unclosed (the next ``open`` makes the child's own)."""
        self.lock = threading.Lock()  # a parent's search may have held it
        self.connection = None


_ARM_CONNECTIONS: weakref.WeakKeyDictionary[Engine, ArmConnection] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def arm_connection_of(engine: Engine) -> ArmConnection:
    """``engine``'s keyword-arm connection holder (made on first use, closed with the engine)."""
    with _REGISTRY_LOCK:
        found = _ARM_CONNECTIONS.get(engine)
        if found is None:
            found = _ARM_CONNECTIONS[engine] = ArmConnection()
            weakref.finalize(engine, found.close)
        return found


def close_arm_connection(engine: Engine) -> None:
    """Close ``engine``'s keyword-arm connection, if it has one (``Database.dispose``)."""
    with _REGISTRY_LOCK:
        found = _ARM_CONNECTIONS.pop(engine, None)
    if found is not None:
        with found.lock:
            found.close()


def _forget_inherited() -> None:
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    for found in list(_ARM_CONNECTIONS.values()):
        found.forget()


after_fork_in_child(_forget_inherited)
