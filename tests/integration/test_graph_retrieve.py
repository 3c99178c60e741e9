"""graph_weight: the walk from the fused top results brings in what the search alone misses."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from rag_service.db.presets import load_preset
from rag_service.embed import HashingEmbedder
from rag_service.errors import ConfigurationError
from rag_service.service import UniversalRAGService

COLLECTION = "graph-walk"  # its own: other tests' committed rows never join its candidates
WORDS = [
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
    "incididunt",
    "labore",
]


@pytest.fixture
def service(db, settings, tmp_path, monkeypatch) -> UniversalRAGService:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "zebra.md").write_text(
        "# Zebra\n\nZebra quartz migration: the whole procedure is in [the runbook](runbook.md), step by step.\n"
    )
    (kb / "runbook.md").write_text(
        "# Runbook\n\nStop the writers, copy the files, start the new server and check the counts before "
        "opening traffic again.\n"
    )
    for n in range(30):
        words = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(40))
        # every filler shares a query word, so the search's top 5 never needs the runbook (no ties at 0)
        (kb / f"filler{n}.md").write_text(f"# Filler {n}\n\nMigration {words}.\n")
    svc = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    assert svc.index_paths([kb], collection=COLLECTION).ok
    return svc


def _ask(service: UniversalRAGService, **overrides):  # type: ignore[no-untyped-def]
    return service.retrieve(
        "zebra quartz migration",
        context="search",
        collection=COLLECTION,
        candidate_k=5,
        expand_query=False,
        rerank_enabled=False,
        **overrides,
    )


def test_graph_weight_zero_is_off_and_the_walk_brings_in_the_linked_document(service):
    off = _ask(service)
    assert "kb/runbook.md" not in {c.source for c in off.chunks}
    assert (off.metrics.graph_time_ms, off.metrics.graph_added) == (0.0, 0)
    assert all("graph" not in c.scores.as_dict() for c in off.chunks)

    on = _ask(service, graph_weight=0.5)
    sources = [c.source for c in on.chunks]
    assert sources[0] == "kb/zebra.md" and "kb/runbook.md" in sources, sources
    assert on.metrics.graph_added >= 1 and on.metrics.graph_time_ms > 0
    assert on.metrics.after_rerank == on.metrics.total_candidates  # the walk's additions counted in (no reranker)
    assert on.metrics.to_dict()["graph_added"] == on.metrics.graph_added
    runbook = next(c for c in on.chunks if c.source == "kb/runbook.md")
    assert runbook.scores.graph is not None and runbook.scores.graph > 0 and runbook.scores.vector is None
    assert 0.0 <= runbook.relevance_score <= 1.0


def test_graph_weight_on_a_collection_without_a_graph_says_it_did_nothing(service, connection):
    """An index made before the chunk graph has no edges: the weight did nothing and metrics said nothing."""
    assert not any(line.startswith("graph:") for line in _ask(service, graph_weight=0.5).metrics.degraded)
    connection.execute(text("DELETE FROM chunk_edges WHERE collection = :c"), {"c": COLLECTION})
    lone = _ask(service, graph_weight=0.5)
    assert lone.metrics.graph_added == 0 and lone.chunks == _ask(service).chunks
    [line] = [line for line in lone.metrics.degraded if line.startswith("graph:")]
    assert "no chunk graph" in line and f"rag graph build --collection {COLLECTION}" in line, line


def test_the_walk_respects_filters(service):
    filtered = _ask(service, graph_weight=0.5, filters={"source_prefix": "kb/zebra"})
    assert {c.source for c in filtered.chunks} == {"kb/zebra.md"}


def test_graph_weight_is_validated(service):
    with pytest.raises(ConfigurationError, match=r"graph_weight \(1.5\) must be between 0 and 1"):
        _ask(service, graph_weight=1.5)


def test_presets_ship_with_the_graph_off(service):
    presets = service.db.read(lambda session: {c: load_preset(session, c) for c in service.contexts()})
    assert {c: p.graph_weight for c, p in presets.items()} == dict.fromkeys(service.contexts(), 0.0)


def test_aretrieve_takes_the_override(service):
    result = asyncio.run(
        service.aretrieve(
            "zebra quartz migration",
            context="search",
            collection=COLLECTION,
            candidate_k=5,
            expand_query=False,
            rerank_enabled=False,
            graph_weight=0.5,
        )
    )
    assert result.metrics.graph_added >= 1
