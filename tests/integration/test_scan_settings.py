"""pgvector's HNSW settings are per transaction: in effect for the search, gone for the connection's next use."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from rag_service.config import SCHEMA_EMBEDDING_DIM, Settings
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.search import SearchRequest, hybrid_search

_SHOW = text(
    "SELECT current_setting('hnsw.ef_search', true), current_setting('hnsw.iterative_scan', true), pg_backend_pid()"
)


@pytest.fixture
def one_connection(fresh_database: Database, settings: Settings) -> Iterator[Engine]:
    """An engine with a single pooled connection, so every transaction reuses the same server session."""
    url = fresh_database.engine.url.render_as_string(hide_password=False)
    engine = make_engine(url, Settings(data_dir=settings.data_dir, pool_size=1, pool_max_overflow=0))
    yield engine
    engine.dispose()


def _request(ef_search: int) -> SearchRequest:
    vector = np.ones(SCHEMA_EMBEDDING_DIM, dtype=np.float32) / np.sqrt(SCHEMA_EMBEDDING_DIM)
    return SearchRequest(
        collection="c",
        query_vector=vector,
        any_terms="replica",
        required_terms="",
        vector_weight=0.6,
        keyword_weight=0.4,
        bm25_text="replica",
        ef_search=ef_search,
    )


def _search_then_show(ef_search: int):  # type: ignore[no-untyped-def]
    def work(session: Session) -> tuple[str, str, int]:
        hybrid_search(session, _request(ef_search))
        shown = session.execute(_SHOW).one()
        return str(shown[0]), str(shown[1]), int(shown[2])

    return work


def test_settings_hold_in_the_search_transaction_and_do_not_leak(one_connection):
    db = Database(one_connection)
    # the first search of a new connection: pgvector is loaded by the statement, after the SET LOCAL
    assert db.read(_search_then_show(137))[:2] == ("137", "relaxed_order")
    after = db.read(lambda session: session.execute(_SHOW).one())
    ef_search, iterative, pid = str(after[0]), str(after[1]), int(after[2])
    assert (ef_search, iterative) == ("40", "off")  # pgvector's defaults: nothing stayed on the session
    # again on the same server session, and another ef_search within one transaction takes effect too
    assert db.read(_search_then_show(137)) == ("137", "relaxed_order", pid)
    assert db.read(_search_then_show(321)) == ("321", "relaxed_order", pid)

    def two_searches(session: Session) -> list[str]:
        seen = []
        for ef in (50, 250, 50):
            hybrid_search(session, _request(ef))
            seen.append(str(session.execute(_SHOW).one()[0]))
        return seen

    assert db.read(two_searches) == ["50", "250", "50"]


def test_settings_do_not_leak_from_a_write_transaction(one_connection):
    db = Database(one_connection)
    with db.transaction() as session:
        hybrid_search(session, _request(77))
        assert str(session.execute(_SHOW).one()[0]) == "77"
    with db.transaction() as session:
        assert str(session.execute(_SHOW).one()[0]) == "40"


def test_every_connection_plans_without_jit_and_with_custom_plans(one_connection: Engine) -> None:
    # a server built with LLVM would JIT-compile every search past ~300k chunks (its estimated cost counts the
    # exact-scan branch that never runs): 10-16 ms a query for nothing (docs/benchmarks.md, session 15)
    with one_connection.connect() as conn:
        jit, plans = conn.execute(text("SELECT current_setting('jit'), current_setting('plan_cache_mode')")).one()
    assert (jit, plans) == ("off", "force_custom_plan")
