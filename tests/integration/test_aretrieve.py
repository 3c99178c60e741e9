"""aretrieve(): the same result as retrieve(), off the event loop, many calls at once on the real database."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rag_service.embed import HashingEmbedder
from rag_service.retrieve.rerank import FunctionReranker
from rag_service.service import UniversalRAGService
from rag_service.tokens import DEFAULT_ENCODING, _shared_encoding, get_encoding
from tests.integration.knowledge import write_docs


@pytest.fixture
def kb(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    return write_docs(tmp_path / "kb")


def test_aretrieve_returns_what_retrieve_returns(db, settings, kb):
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    service.index_paths([kb], collection="kb")
    expected = service.retrieve("how are backups kept?", "agent", collection="kb", max_chunks=3)
    got = asyncio.run(service.aretrieve("how are backups kept?", "agent", collection="kb", max_chunks=3))
    assert got.chunks and [c.to_dict() for c in got.chunks] == [c.to_dict() for c in expected.chunks]
    assert got.formatted_context == expected.formatted_context
    # the pool's threads live as long as the service and count tokens at every call: each made its own copy
    # of the BPE table as it started (``own_encoding``), not on a search's path
    own = service._retrieve_executor().submit(lambda: get_encoding() is not _shared_encoding(DEFAULT_ENCODING))
    assert own.result(), "an aretrieve pool thread counts tokens with the shared encoding"
    service.close()


def test_the_event_loop_keeps_running_while_a_retrieve_works(db, settings, kb):
    """A reranker that holds its thread until the event loop has run meanwhile: a blocked loop cannot."""
    loop_thread: list[threading.Thread] = []
    scoring_threads: list[str] = []
    scoring, loop_ran = threading.Event(), threading.Event()
    blocked: list[str] = []

    def waiting_score(query: str, document: str) -> float:
        scoring_threads.append(threading.current_thread().name)
        scoring.set()
        if not blocked and not loop_ran.wait(30):
            blocked.append("the event loop did not run while the reranker held its thread for 30 s")
        return float(len(set(query.split()) & set(document.split())))

    service = UniversalRAGService(
        settings, database=db, embedder=HashingEmbedder(), reranker=FunctionReranker(waiting_score)
    )
    service.index_paths([kb], collection="kb")

    async def main() -> None:
        loop_thread.append(threading.current_thread())
        stop = asyncio.Event()

        async def ticker() -> None:
            ticks_while_scoring = 0
            while not stop.is_set():
                if scoring.is_set():
                    ticks_while_scoring += 1
                    if ticks_while_scoring == 3:
                        loop_ran.set()
                await asyncio.sleep(0.001)

        ticking = asyncio.create_task(ticker())
        result = await service.aretrieve("backups replica search", "search", collection="kb", candidate_k=20)
        stop.set()
        await ticking
        assert result.metrics.reranker == "function"

    asyncio.run(main())
    assert scoring_threads, "the reranker ran"
    assert blocked == []
    assert all(name.startswith("rag-aretrieve") for name in scoring_threads)
    assert loop_thread[0].name not in scoring_threads
    service.close()


@pytest.mark.multiprocess
def test_many_concurrent_calls_share_the_pool(fresh_database, settings, kb):
    """80 calls at once with RAG_POOL_SIZE=4: all answer, each like a lone retrieve, on at most 4 threads."""
    engine = fresh_database.engine
    service = UniversalRAGService(settings, database=fresh_database, embedder=HashingEmbedder(), reranker=None)
    report = service.index_paths([kb], collection="kb")
    assert report.failed == [] and report.added == 2
    queries = ["nightly backups", "replica failover", "hybrid search fusion", "cross-encoder reranking"]
    expected = {q: [c.chunk_id for c in service.retrieve(q, "search", collection="kb").chunks] for q in queries}
    threads: set[str] = set()
    checked_out: list[int] = []

    async def one(query: str) -> list[int]:
        result = await service.aretrieve(query, "search", collection="kb")
        checked_out.append(engine.pool.checkedout())  # type: ignore[attr-defined]
        return [c.chunk_id for c in result.chunks]

    async def main() -> list[list[int]]:
        threads.update(t.name for t in threading.enumerate())
        results = await asyncio.gather(*(one(queries[i % 4]) for i in range(80)))
        threads.update(t.name for t in threading.enumerate())
        return list(results)

    results = asyncio.run(main())
    assert all(results[i] == expected[queries[i % 4]] for i in range(80))
    workers = {name for name in threads if name.startswith("rag-aretrieve")}
    assert 1 <= len(workers) <= settings.pool_size, workers
    assert max(checked_out) <= settings.pool_size
    service.close()
