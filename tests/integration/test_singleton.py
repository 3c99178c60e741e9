"""get_universal_rag(): one service per process, built once even under concurrent first calls."""

from __future__ import annotations

import threading

import pytest

from rag_service import get_universal_rag, reset_universal_rag


@pytest.fixture
def env(monkeypatch, database_factory):
    from rag_service.db import migrate
    from rag_service.db.engine import make_engine

    url = database_factory.create("rag_single")
    engine = make_engine(url, __import__("rag_service.config", fromlist=["Settings"]).Settings())
    migrate.upgrade(engine)
    engine.dispose()
    monkeypatch.setenv("RAG_DATABASE_URL", url)
    monkeypatch.setenv("RAG_EMBEDDING_MODEL", "hashing")
    monkeypatch.setenv("RAG_RERANK_MODEL", "none")
    reset_universal_rag()
    yield
    reset_universal_rag()


def test_one_instance_across_threads_and_reset(env):
    seen: list[object] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        seen.append(get_universal_rag())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8 and all(s is seen[0] for s in seen)
    reset_universal_rag()
    assert get_universal_rag() is not seen[0]
    assert get_universal_rag().contexts()[0] == "chatbot"
