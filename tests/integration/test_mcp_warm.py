"""``rag mcp`` is warm by its first tool call: a real server process, the real model, the SDK's own client."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder, bundled_model_id
from rag_service.ingest.indexer import Indexer
from tests.conftest import seed_onnx_export
from tests.timing import collector_paused

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow, pytest.mark.timing]

QUERIES = [
    "How do replication slots retain WAL?",
    "What does a checkpoint write?",
    "When does autovacuum run?",
    "Which setting bounds the WAL size?",
    "How is a standby promoted?",
    "What does VACUUM FULL lock?",
]


@pytest.fixture
def indexed_url(database_factory, settings, tmp_path) -> str:
    """A database holding a few notes under the bundled model's id (vectors from the hashing embedder)."""
    url = database_factory.create("rag_mcp_warm")
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nVacuum, checkpoints, WAL and replication slots: note {i}.\n")
    report = Indexer(Database(engine), HashingEmbedder(model_id=bundled_model_id()), settings).index_paths([str(docs)])
    engine.dispose()
    assert report.added == 6
    return url


async def _timed_searches(params: StdioServerParameters) -> tuple[float, list[float]]:
    """Seconds from the process start to the first answer, and each search's own seconds."""
    import jsonschema  # noqa: F401  # the client's own first-result cost (it imports this lazily), not the server's

    started = time.perf_counter()
    first_answer = 0.0
    seconds: list[float] = []
    async with Client(params, read_timeout_seconds=120) as client:  # initialize, then at once:
        await client.list_tools()  # as an agent does (the client's first call_tool would fetch it too)
        for query in QUERIES:  # each query new: the query-vector cache must not answer
            before = time.perf_counter()
            result = await client.call_tool("search_knowledge", {"query": query, "collection": "default"})
            seconds.append(time.perf_counter() - before)
            assert not result.is_error, result
            first_answer = first_answer or time.perf_counter() - started
    return first_answer, seconds


def test_the_first_search_after_start_is_as_fast_as_later_ones(indexed_url, onnx_export, tmp_path):
    seed_onnx_export(tmp_path / "data", onnx_export)  # exported once for the run, as `rag` does on first use
    env = dict(os.environ, RAG_DATABASE_URL=indexed_url, RAG_RERANK_MODEL="none", RAG_DATA_DIR=str(tmp_path / "data"))
    env.pop("RAG_EMBEDDING_MODEL", None)  # the bundled model on its default backend, as a new user has it
    env.pop("RAG_EMBEDDING_BACKEND", None)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rag_service.cli", "mcp"], env=env, cwd=str(tmp_path)
    )
    with collector_paused():  # the server's time, not this process's collector
        first_answer, seconds = asyncio.run(_timed_searches(params))
    later = statistics.median(seconds[1:])
    print(
        f"\nstart to first answer {first_answer:.3f} s; first search {seconds[0] * 1000:.1f} ms, "
        f"later median {later * 1000:.1f} ms ({' / '.join(f'{s * 1000:.0f}' for s in seconds[1:])})"
    )
    # 0.1 s on top of 3x: this host (a VM) makes memory left alone for 0.05-1 s slow to touch again (~5 us a 4 kB
    # page; docs/notes.md, session 49), so the first search after the warm-up pays 30-90 ms more than the later ones
    # (CI after session 48: 117 ms, then 60 / 38 / 32 / 26 / 31). What the warm-up is for costs more at a first
    # call: loading the model 0.5 s here, importing the retrieval stack 0.12 s
    assert seconds[0] <= 3 * later + 0.1, (seconds[0], seconds[1:])
