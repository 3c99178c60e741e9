"""What a server reports of its database: pool use and circuit state (no I/O), and readiness (one check)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import QueuePool

from rag_service.db.breaker import CLOSED, HALF_OPEN, OPEN
from rag_service.db.database import Database
from rag_service.errors import RagError
from rag_service.log import mask_url


@dataclass(frozen=True, slots=True)
class DatabaseHealth:
    """The primary's connection pool and circuit breaker, read without touching the database.

    The pool counts are None for a pool that does not keep connections (not a ``QueuePool``).
    """

    pool_size: int | None
    checked_out: int | None
    overflow: int | None
    #: closed, open, or half-open (the cool-down is over and a trial call may pass)
    circuit: str
    #: seconds the circuit keeps calls away once it opens
    cooldown_s: float

    @property
    def circuit_closed(self) -> bool:
        """True while calls reach the database normally."""
        return self.circuit == CLOSED


def database_health(database: Database) -> DatabaseHealth:
    """The pool use and circuit state of ``database`` now."""
    pool = database.engine.pool
    breaker = database.breaker
    if not isinstance(pool, QueuePool):
        return DatabaseHealth(None, None, None, circuit=breaker.state, cooldown_s=breaker.cooldown)
    return DatabaseHealth(
        pool.size(), pool.checkedout(), pool.overflow(), circuit=breaker.state, cooldown_s=breaker.cooldown
    )


def readiness_problem(database: Database) -> str | None:
    """Why ``database`` cannot serve now (one line), or None when it answers with its schema at head.

    An open circuit is a problem without a round trip; after its cool-down a successful check closes it.
    """
    from rag_service.db.status import require_current_schema

    circuit = database.breaker.state
    if circuit == OPEN:
        return f"circuit open: {database.url_for_display} failed repeatedly; calls resume after the cool-down"
    try:
        require_current_schema(database.engine)
    except RagError as exc:
        return mask_url(str(exc))
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        return mask_url(f"database {database.url_for_display} unreachable: {first[0] if first else type(exc).__name__}")
    if circuit == HALF_OPEN:
        database.breaker.success()  # the cool-down is over and the database answered: close the circuit
    return None
