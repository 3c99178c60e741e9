"""The context BM25: each result's section (or document) scored as one BM25 document, in the search statement."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest
from sqlalchemy import text

from rag_service.db import contexts
from rag_service.db.chunk_text import search_prefix
from rag_service.db.documents import ChunkRow, replace_document
from rag_service.db.search import hybrid_search
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from rag_service.result import RetrievedChunk
from rag_service.service import UniversalRAGService
from tests.integration.test_bm25 import (
    assert_contexts_consistent,
    assert_stats_consistent,
    checkout_folder,
    keyword_request,
)

# sections whose words are spread over several chunks (500 characters each), and a file without headers
GUIDE = (
    "# Operations guide\n\n"
    "## Replication\n\n"
    + "Streaming replication ships the write-ahead log to each standby server continuously. " * 6
    + "\n\n"
    + "A standby replays what it receives and can be promoted when the primary fails. " * 6
    + "\n\n## Backups\n\n"
    + "Nightly base backups are archived together with the write-ahead log segments. " * 6
    + "\n"
)
NOTES = "Checkpoints flush dirty pages; the standby keeps replaying the log it receives from the primary. " * 20


@pytest.fixture
def folder(tmp_path, monkeypatch):
    return checkout_folder(tmp_path, monkeypatch, {"guide.md": GUIDE, "notes.txt": NOTES})


def _tokens(connection, body: str) -> Counter[str]:  # type: ignore[no-untyped-def]
    rows = connection.execute(
        text(
            "SELECT u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1) "
            "FROM unnest(to_tsvector('english', :t)) u"
        ),
        {"t": body},
    ).all()
    return Counter({lexeme: tf for lexeme, tf in rows})


def _reference(connection, query: str, *, k1: float = 1.2, b: float = 0.75) -> dict[tuple[int, int], float]:  # type: ignore[no-untyped-def]
    """Each context's BM25 for ``query`` from its text rebuilt here (title, header path, section or document),
    with the chunks' idf and the contexts' mean length."""
    rows = connection.execute(
        text(
            "SELECT DISTINCT ON (c.document_id, coalesce(c.parent_start, -1)) c.document_id, "
            "coalesce(c.parent_start, -1), d.title, c.header_path, c.parent_start, c.parent_end, d.content "
            "FROM document_chunks c JOIN documents d ON d.id = c.document_id WHERE c.collection = 'one' "
            "ORDER BY c.document_id, coalesce(c.parent_start, -1), c.chunk_index"
        )
    ).all()
    bodies = {}
    for document_id, start, title, header_path, parent_start, parent_end, content in rows:
        section = content if parent_start is None else content[parent_start:parent_end]
        bodies[(document_id, start)] = "\n".join(p for p in (search_prefix(title, header_path), section) if p)
    terms = {key: _tokens(connection, body) for key, body in bodies.items()}
    average = sum(sum(t.values()) for t in terms.values()) / len(terms)
    chunks = connection.execute(text("SELECT count(*) FROM document_chunks WHERE collection = 'one'")).scalar_one()
    lexemes = connection.execute(text("SELECT tsvector_to_array(to_tsvector('english', :q))"), {"q": query}).scalar()
    scores: dict[tuple[int, int], float] = {}
    for key, counts in terms.items():
        length = sum(counts.values())
        total = 0.0
        for lexeme in lexemes:
            if counts[lexeme]:
                df = connection.execute(
                    text(
                        "SELECT count(*) FROM document_chunks c, unnest(c.content_tsv) u "
                        "WHERE c.collection = 'one' AND u.lexeme = :l"
                    ),
                    {"l": lexeme},
                ).scalar_one()
                idf = math.log(1 + (chunks - df + 0.5) / (df + 0.5))
                tf = counts[lexeme]
                total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
        scores[key] = total
    return scores


@pytest.mark.parametrize(
    "query", ["standby replays the write-ahead log", "log segments archived nightly", "primary promoted, checkpoints"]
)
def test_each_hit_carries_its_contexts_bm25(db, settings, folder, connection, query):
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    with db.transaction() as session:
        hits = hybrid_search(session, keyword_request(query, context_bm25=True, bm25_max_postings=0))
    assert hits
    expected = _reference(connection, query)
    sections = {(h.document_id, -1 if h.parent_start is None else h.parent_start) for h in hits}
    assert len(sections) >= 2  # the query reaches more than one context
    for hit in hits:
        want = expected[(hit.document_id, -1 if hit.parent_start is None else hit.parent_start)]
        got = hit.context_score or 0.0
        assert got == pytest.approx(want, rel=1e-9), (hit.source, hit.parent_start)


def test_no_context_score_unless_asked(db, settings, folder):
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    with db.transaction() as session:
        hits = hybrid_search(session, keyword_request("standby log"))
    assert hits and all(h.context_score is None for h in hits)


def test_contexts_are_sections_or_whole_documents(db, settings, folder, connection):
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    rows = connection.execute(
        text(
            "SELECT d.source, x.context_start FROM document_contexts x JOIN documents d ON d.id = x.document_id "
            "ORDER BY 1, 2"
        )
    ).all()
    parents = connection.execute(
        text(
            "SELECT DISTINCT d.source, coalesce(c.parent_start, -1) FROM document_chunks c "
            "JOIN documents d ON d.id = c.document_id ORDER BY 1, 2"
        )
    ).all()
    assert rows == parents
    assert ("kb/notes.txt", -1) in rows  # no sections: the document is the context
    assert len([r for r in rows if r[0] == "kb/guide.md"]) >= 2  # one per section
    assert_stats_consistent(connection)


def test_a_context_too_long_for_one_unit_gets_no_postings(db, settings, folder, connection, monkeypatch):
    monkeypatch.setattr(contexts, "MAX_CONTEXT_CHARS", len(NOTES) - 1)
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    stored = connection.execute(
        text("SELECT d.source FROM document_contexts x JOIN documents d ON d.id = x.document_id")
    ).scalars()
    assert "kb/notes.txt" not in set(stored)
    with db.transaction() as session:
        hits = hybrid_search(session, keyword_request("checkpoints flush", context_bm25=True))
    notes = [h for h in hits if h.source == "kb/notes.txt"]
    assert notes and all(h.context_score is None for h in notes)
    assert_contexts_consistent(connection, every_chunk=False)


def test_a_chunk_outside_the_sections_of_a_sectioned_document_has_no_context(db, connection):
    """No strategy writes such a document today (markdown gives every chunk a section); a chunk outside the
    sections gets no context rather than the whole document, which would outweigh its neighbours' sections."""
    text_ = "Top level: the standby replays the log.\n# Replicas\nStandbys replay the write-ahead log.\n"
    section = (40, len(text_))

    def row(index: int, start: int, end: int, parent: tuple[int, int] | None) -> ChunkRow:
        return ChunkRow(
            chunk_index=index,
            chunk_type="child" if parent else "text",
            content=text_[start:end],
            start_char=start,
            end_char=end,
            token_count=8,
            content_hash=f"h{index}",
            embedding=np.full(384, 0.1, dtype=np.float32),
            parent_content=None if parent is None else text_[parent[0] : parent[1]],
            parent_start=None if parent is None else parent[0],
            parent_end=None if parent is None else parent[1],
        )

    with db.transaction() as session:
        replace_document(
            session,
            collection="one",
            source="mixed.md",
            title="",
            content=text_,
            content_hash="m",
            chunker="test",
            fts_config="english",
            chunks=[row(0, 0, 39, None), row(1, *section, section)],
        )
    stored = connection.execute(text("SELECT context_start FROM document_contexts")).scalars().all()
    assert stored == [40]
    with db.transaction() as session:
        hits = hybrid_search(session, keyword_request("standby replays the log", context_bm25=True))
    scores = {h.parent_start: h.context_score for h in hits}
    assert scores[None] is None and scores[40] is not None and scores[40] > 0
    assert_contexts_consistent(connection)


@pytest.mark.parametrize("context", ["workflow", "search", "chatbot"])  # sections; chunks; expanded queries
def test_retrieve_adds_each_results_context_in_hybrid_searches_only(db, settings, folder, context):
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    query = "how does a standby replay the write-ahead log?"

    def results(weight: float, **overrides: object) -> list[RetrievedChunk]:
        service = UniversalRAGService(
            dataclasses.replace(settings, context_weight=weight), database=db, embedder=HashingEmbedder(), reranker=None
        )
        return service.retrieve(query, context, collection="one", max_chunks=10, **overrides).chunks

    on, off = results(0.6), results(0.0)
    assert on and all(c.scores.context is not None for c in on)  # every context stored here holds a query word
    assert all(c.scores.context is None for c in off)
    assert {c.source for c in on} == {c.source for c in off}  # the same candidates, re-ranked
    keyword_only = results(0.6, vector_weight=0.0, keyword_weight=1.0)
    assert keyword_only and all(c.scores.context is None for c in keyword_only)  # one arm: not applied
