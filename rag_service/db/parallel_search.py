"""The hybrid search of a large collection with its two arms at once, on two connections and one snapshot.

One statement runs the arms one after the other on one core; at 1M chunks each takes milliseconds (the
HNSW walk ~10 ms, the BM25 arm ~8 ms). For a request with ``parallel_arms`` the keyword arm runs on a
second connection while the session runs the vector arm, then the session runs the hybrid statement with
both arms' rows given (``build_search(..., arms_given=True)``): the same fusion, contexts and rows as the
one statement. The second connection imports the session's snapshot (``pg_export_snapshot``), so both
arms read the same rows.

Each engine has one such connection, used by one search at a time and never waited for: a search that
finds it busy runs the one statement, as does one whose session cannot share its snapshot (writes of its
own, a standby, Citus) or whose request has filters, and one whose database shares this host while no core
is idle (there the arms at once cost ~2 ms more: ``has_idle_core``). So concurrent
searches never hold more than one extra connection.
"""

from __future__ import annotations

import os
from concurrent.futures import wait
from typing import Any

import psycopg
from psycopg.sql import SQL, Literal
from sqlalchemy import Engine, Row, text
from sqlalchemy.orm import Session

from rag_service.db.arm_connections import ArmConnection, arm_connection_of
from rag_service.db.search import (
    STATEMENTS,
    SearchHit,
    SearchRequest,
    configure_vector_scan,
    hits_from_rows,
    hybrid_search,
    search_parameters,
)
from rag_service.db.search_arms import ArmRow, given_arm_values
from rag_service.pools import LazyThreadPool

# the snapshot, where another connection can import it: no writes of the session's own (a test's outer
# transaction), not a standby, not Citus (its workers' snapshots are not the coordinator's)
_EXPORT = text(
    "SELECT CASE WHEN txid_current_if_assigned() IS NULL AND NOT pg_is_in_recovery() "
    "AND NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN pg_export_snapshot() END"
)
_LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1"})
#: made anew in a forked child (``pools.LazyThreadPool``): an inherited pool counts workers only the parent has
_KEYWORD_ARM_THREADS = LazyThreadPool(4, "rag-keyword-arm")


def fused_search(session: Session, request: SearchRequest) -> list[SearchHit]:
    """The hybrid search of ``request``: its arms at once where it asks (``parallel_arms``) and they can run so,
    else the one statement (``db.search.hybrid_search``). Both return the same hits."""
    if not (request.parallel_arms and request.runs_vector and request.runs_keyword):
        return hybrid_search(session, request)
    if STATEMENTS.shape(request) is None:  # filters: values in anonymous parameters, built each time
        return hybrid_search(session, request)
    engine = session.get_bind()
    if not isinstance(engine, Engine):  # a test's connection: its own transaction
        return hybrid_search(session, request)
    if not has_idle_core(engine):
        return hybrid_search(session, request)
    arm_connection = arm_connection_of(engine)
    if not arm_connection.lock.acquire(blocking=False):
        return hybrid_search(session, request)
    try:
        rows = _rows_with_parallel_arms(session, engine, arm_connection, request)
    finally:
        arm_connection.lock.release()
    return hybrid_search(session, request) if rows is None else hits_from_rows(rows)


def has_idle_core(engine: Engine, *, running: int | None = None, cores: int | None = None) -> bool:
    """Whether the database likely has a core to spare for the second arm: a server on another host is assumed
    to; one on this host (a Unix socket or a loopback address) when fewer tasks are running right now than this
    process may use cores (the search's own thread included). On a busy machine the arms at once cost ~2 ms
    more than one statement (docs/benchmarks.md, "Session 30": 1M chunks beside a CPU hog); the 1-minute
    load average lags by a minute both ways, so the running count of this instant decides."""
    url = engine.url
    host = url.host or str(url.query.get("host", "") or "")
    if host not in _LOCAL_HOSTS and not host.startswith("/"):
        return True
    running = _running_tasks() if running is None else running
    cores = _usable_cores() if cores is None else cores
    return running < cores


def _running_tasks() -> int:
    """Tasks running or runnable on this host now (``/proc/loadavg``; elsewhere the load average, rounded, + 1)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as stats:
            return int(stats.read().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return round(os.getloadavg()[0]) + 1


def _usable_cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _rows_with_parallel_arms(
    session: Session, engine: Engine, arm_connection: ArmConnection, request: SearchRequest
) -> list[Row[Any]] | None:
    """The hybrid statement's rows with the arms run at once; None: run the one statement instead."""
    connection = arm_connection.open(engine)
    if connection is None:
        return None
    snapshot = session.execute(_EXPORT).scalar_one()
    if snapshot is None:
        return None
    parameters = search_parameters(request)
    keyword_sql = STATEMENTS.compiled_arm(request, "keyword_arm", engine.dialect)
    keyword_parameters = dict(keyword_sql.construct_params(parameters) or {})  # every bound value, as psycopg takes
    keyword_rows = _KEYWORD_ARM_THREADS.get().submit(
        _run_keyword_arm, connection, snapshot, str(keyword_sql), keyword_parameters
    )
    try:
        configure_vector_scan(session, ef_search=request.ef_search)
        vector_statement, _ = STATEMENTS.arm(request, "vector_arm")
        vector_rows = session.connection().execute(vector_statement, parameters).all()
    except BaseException:
        wait([keyword_rows])  # the second connection is done before the next search may take it
        raise
    try:
        keyword = keyword_rows.result()
    except psycopg.Error:
        arm_connection.close()  # a broken connection is opened anew by a later search
        return None
    statement, _ = STATEMENTS.statement(request, arms_given=True)
    given = {
        **parameters,
        **given_arm_values("vector_arm", _arm_rows(vector_rows)),
        **given_arm_values("keyword_arm", keyword),
    }
    return list(session.connection().execute(statement, given).all())


def _run_keyword_arm(
    connection: psycopg.Connection[Any], snapshot: str, sql: str, parameters: dict[str, Any]
) -> list[ArmRow]:
    """The keyword arm's rows on ``connection`` in the session's snapshot (its own short transaction)."""
    with connection.transaction():
        connection.execute(SQL("SET TRANSACTION SNAPSHOT {}").format(Literal(snapshot)))
        found = connection.execute(sql, parameters, prepare=True).fetchall()
    return _arm_rows(found)


def _arm_rows(rows: Any) -> list[ArmRow]:
    return [(int(r[0]), int(r[1]), float(r[2]), float(r[3])) for r in rows]
