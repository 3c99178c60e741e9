"""``search_knowledge`` takes ``min_relevance`` and says when no passage passes it (in-process MCP client)."""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client

from rag_service.embed import HashingEmbedder
from rag_service.integrations.mcp_server import build_server
from rag_service.retrieve.relevance import CALIBRATIONS, Calibration
from rag_service.service import UniversalRAGService
from rag_service.tokens import count_tokens


def test_search_knowledge_floors_and_says_no_relevant_passages(db, settings, monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = HashingEmbedder()
    # the hashing fake has no calibration of its own; this curve stands in for a measured model's
    monkeypatch.setitem(CALIBRATIONS, embedder.model_id, Calibration(center=0.5, scale=0.05, background_weight=0))
    service = UniversalRAGService(settings, database=db, embedder=embedder, reranker=None)
    text = "Nightly backups run with pg_dump and are kept for thirty days before cold storage takes them."
    assert service.index_texts([("ops.md", "Ops", text)], collection="kb").added == 1
    service.update_preset("search", vector_weight=0.0)  # keywords only: stop words find no candidate at all

    async def calls() -> list[str]:
        async with Client(build_server(service)) as client:
            out = []
            for floor in (0.0, 0.99):
                query = {"query": "zebra stripes", "collection": "kb", "min_relevance": floor}  # agent
                result = await client.call_tool("search_knowledge", query)
                assert not result.is_error
                out.append("\n".join(part.text for part in result.content))
            # no candidate at all (stop words only): the line every entry gives, within the budget
            query = {"query": "the of and", "collection": "kb", "context": "search", "max_tokens": 5}
            result = await client.call_tool("search_knowledge", query)
            out.append("\n".join(part.text for part in result.content))
            return out

    kept, floored, unmatched = asyncio.run(calls())
    assert kept.startswith("[1] ops.md")
    assert floored.startswith("no relevant passages for 'zebra stripes'") and "min_relevance 99%" in floored
    assert unmatched.startswith("no relevant passages for '") and count_tokens(unmatched.split("\n\n")[0]) <= 5


def test_search_knowledge_takes_a_token_budget_and_says_when_it_holds_nothing(db, settings) -> None:
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    text = "Nightly backups run with pg_dump and are kept for thirty days before cold storage takes them. " * 4
    assert service.index_texts([("ops.md", "Ops", text)], collection="kb").added == 1

    async def calls() -> list[str]:
        async with Client(build_server(service)) as client:
            out = []
            for budget in (100, 5):
                query = {"query": "backups", "collection": "kb", "context": "search", "max_tokens": budget}
                result = await client.call_tool("search_knowledge", query)
                assert not result.is_error
                out.append("\n".join(part.text for part in result.content))
            return out

    fitted, starved = asyncio.run(calls())
    assert fitted.startswith("[1] ops.md") and count_tokens(fitted.split("\n\ndegraded: ")[0]) <= 100
    assert starved.startswith("degraded: format: max_tokens 5 holds none of the 1 results: the first needs ")


def test_a_floor_the_call_gives_an_uncalibrated_model_is_said_not_applied(db, settings) -> None:
    """The hashing fake has no calibration: a call's own min_relevance cannot apply, and says so (it was silently
    dropped: min_relevance=1.0 returned five passages with degraded []); the preset's own floor stays quiet."""
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    assert service.index_texts([("ops.md", "Ops", "Nightly backups are kept for thirty days.")], collection="kb").added
    given = service.retrieve("zebra stripes", "agent", collection="kb", min_relevance=1.0)
    assert given.chunks and given.metrics.relevance == "uncalibrated"
    assert [d[:46] for d in given.metrics.degraded] == ["relevance: min_relevance 1 not applied: this e"]
    stock = service.retrieve("zebra stripes", "agent", collection="kb")  # the stock floor 0.45: no warning
    assert stock.chunks and stock.metrics.degraded == []
