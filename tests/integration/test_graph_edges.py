"""The chunk graph follows every write: edges are built with a document and leave with its chunks."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from sqlalchemy import event, text

from rag_service.db import catalog, documents
from rag_service.db import graph as store
from rag_service.db.database import Database
from rag_service.embed import HashingEmbedder
from rag_service.ingest.graph import GraphBuilder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bulk_index import _fresh, write_corpus
from tests.integration.test_dimension_switch import _EDGES

PARAGRAPH = (
    "PostgreSQL keeps the vectors and the postings in one database, so a backup holds the whole index "
    "and a restore brings every collection back at once without any other service to rebuild. "
)
GUIDE = f"""# Guide

{PARAGRAPH * 2}

## Install

Run the installer with the default options; it creates a virtual environment for the service.
{PARAGRAPH * 3}

## Usage

Call retrieve with a question and a context preset; the result carries chunks and sources.
{PARAGRAPH}
"""
API = f"""# API

The retrieve call is described in [the guide's usage section](guide.md#usage), and the set-up in
[the guide](./guide.md). {PARAGRAPH}
"""


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(GUIDE)
    (docs / "api.md").write_text(API)
    (docs / "page.html").write_text(
        "<html><body><h1>Page</h1><p>Installing is explained in <a href='guide.md#install'>the guide</a>. "
        f"{PARAGRAPH}</p></body></html>"
    )
    return docs


@pytest.fixture
def indexer(db, settings) -> Indexer:
    return Indexer(db, HashingEmbedder(), settings, graph=GraphBuilder(neighbours=3, min_similarity=0.2))


def _edges(connection, collection: str = "g") -> set[tuple[str, str, int, int, str]]:
    """Edges as (source document, target document, source chunk index, target chunk index, kind)."""
    rows = connection.execute(
        text(
            "SELECT ds.source, dt.source, s.chunk_index, t.chunk_index, e.kind FROM chunk_edges e "
            "JOIN document_chunks s ON s.id = e.source_chunk_id JOIN documents ds ON ds.id = s.document_id "
            "JOIN document_chunks t ON t.id = e.target_chunk_id JOIN documents dt ON dt.id = t.document_id "
            "WHERE e.collection = :c"
        ),
        {"c": collection},
    ).all()
    return {tuple(r) for r in rows}  # type: ignore[misc]


def _dangling(connection) -> int:
    return int(
        connection.execute(
            text(
                "SELECT count(*) FROM chunk_edges e WHERE NOT EXISTS (SELECT 1 FROM document_chunks c "
                "WHERE c.id = e.source_chunk_id AND c.collection = e.collection) OR NOT EXISTS "
                "(SELECT 1 FROM document_chunks c WHERE c.id = e.target_chunk_id AND c.collection = e.collection)"
            )
        ).scalar_one()
        + connection.execute(
            text(
                "SELECT count(*) FROM chunk_links l WHERE NOT EXISTS "
                "(SELECT 1 FROM document_chunks c WHERE c.id = l.source_chunk_id AND c.collection = l.collection)"
            )
        ).scalar_one()
    )


def _first_chunk(connection, source: str, header: str) -> int:
    return int(
        connection.execute(
            text(
                "SELECT min(c.chunk_index) FROM document_chunks c JOIN documents d ON d.id = c.document_id "
                "WHERE d.source = :s AND c.header_path LIKE :h"
            ),
            {"s": source, "h": f"%{header}"},
        ).scalar_one()
    )


def test_structure_link_and_similarity_edges_are_written_with_the_documents(indexer, corpus, connection):
    report = indexer.index_paths([corpus], collection="g")
    assert report.ok and report.edges_written > 0 and report.graph_seconds > 0, report.lines()
    assert "graph" in report.lines()[2]
    edges = _edges(connection)
    guide, api = "docs/guide.md", "docs/api.md"
    install = _first_chunk(connection, guide, "Install")
    usage = _first_chunk(connection, guide, "Usage")
    # siblings: consecutive chunks of the Install section, both ways
    assert (guide, guide, install, install + 1, "sibling") in edges
    assert (guide, guide, install + 1, install, "sibling") in edges
    # parent/child between the Install section's first chunk and the Guide (h1) section's
    assert (guide, guide, install, 0, "parent") in edges and (guide, guide, 0, install, "child") in edges
    assert (guide, guide, usage, 0, "parent") in edges
    assert not any(kind == "sibling" and s == install - 1 and t == install for _, _, s, t, kind in edges)
    # links: api -> the Usage section (#usage) and -> the guide itself (its first chunk), with backlinks
    assert (api, guide, 0, usage, "link") in edges and (guide, api, usage, 0, "backlink") in edges
    assert (api, guide, 0, 0, "link") in edges
    assert ("docs/page.html", guide, 0, install, "link") in edges, "an HTML link to a section"
    # similarity: across documents only, both ways, weighted by the cosine similarity
    similar = {(a, b, s, t) for a, b, s, t, kind in edges if kind == "similar"}
    assert similar and all(a != b for a, b, _, _ in similar)
    assert all((b, a, t, s) in similar for a, b, s, t in similar)
    weights = connection.execute(text("SELECT min(weight), max(weight) FROM chunk_edges WHERE kind = 'similar'")).one()
    assert 0.2 <= weights[0] <= weights[1] <= 1.0 + 1e-6
    assert _dangling(connection) == 0


def test_a_rerun_on_unchanged_files_writes_no_edges(indexer, corpus, connection):
    indexer.index_paths([corpus], collection="g")
    before = connection.execute(text("SELECT * FROM chunk_edges ORDER BY 1, 2, 3, 4")).all()
    again = indexer.index_paths([corpus], collection="g")
    assert (again.unchanged, again.edges_written) == (3, 0), again.lines()
    assert connection.execute(text("SELECT * FROM chunk_edges ORDER BY 1, 2, 3, 4")).all() == before


def test_a_link_to_a_document_indexed_later_gets_its_edge_then(indexer, corpus, connection):
    indexer.index_paths([corpus / "api.md"], collection="g")
    assert not any(kind == "link" for *_, kind in _edges(connection)), "the guide is not stored yet"
    indexer.index_paths([corpus / "guide.md"], collection="g")
    usage = _first_chunk(connection, "docs/guide.md", "Usage")
    assert ("docs/api.md", "docs/guide.md", 0, usage, "link") in _edges(connection)


def test_a_changed_document_has_its_edges_replaced_and_links_to_it_follow(indexer, corpus, connection):
    indexer.index_paths([corpus], collection="g")
    old_ids = set(connection.execute(text("SELECT id FROM document_chunks")).scalars())
    (corpus / "guide.md").write_text(
        GUIDE.replace("## Usage", f"## Setup\n\nA new section before usage. {PARAGRAPH}\n\n## Usage")
    )
    report = indexer.index_paths([corpus], collection="g")
    assert (report.updated, report.unchanged) == (1, 2) and report.edges_written > 0
    assert _dangling(connection) == 0
    usage = _first_chunk(connection, "docs/guide.md", "Usage")
    edges = _edges(connection)
    assert ("docs/api.md", "docs/guide.md", 0, usage, "link") in edges, "the unchanged api.md links the new Usage"
    assert any(kind == "sibling" and a == "docs/guide.md" for a, _, _, _, kind in edges)
    kept = set(connection.execute(text("SELECT source_chunk_id FROM chunk_edges")).scalars()) & old_ids
    api_ids = set(
        connection.execute(
            text("SELECT c.id FROM document_chunks c JOIN documents d ON d.id = c.document_id WHERE d.source <> :s"),
            {"s": "docs/guide.md"},
        ).scalars()
    )
    assert kept <= api_ids, "only the unchanged documents' chunks keep their ids"


def test_deleted_documents_take_their_edges_with_them(indexer, corpus, connection, db):
    indexer.index_paths([corpus], collection="g")
    (corpus / "api.md").unlink()
    assert indexer.index_paths([corpus], collection="g", prune=True).deleted == 1
    assert _dangling(connection) == 0
    assert not any("docs/api.md" in (a, b) for a, b, *_ in _edges(connection))
    with db.transaction() as session:
        assert catalog.delete_by_source(session, collection="g", source="docs/guide.md") == 1
    assert connection.execute(text("SELECT count(*) FROM chunk_edges WHERE collection = 'g'")).scalar_one() == 0
    assert _dangling(connection) == 0


def test_a_document_whose_edges_fail_keeps_its_old_version_and_old_edges(indexer, corpus, connection):
    """A failure while the edges are written (a trigger raises) rolls the whole document back: no half state."""
    indexer.index_paths([corpus], collection="g")
    before_edges = _edges(connection)
    before_chunks = connection.execute(text("SELECT id, content FROM document_chunks ORDER BY id")).all()
    connection.execute(
        text(
            "CREATE FUNCTION test_refuse_edges() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.kind = 'sibling' THEN RAISE EXCEPTION 'refused by test'; END IF; RETURN NEW; END $$; "
            "CREATE TRIGGER test_refuse_edges BEFORE INSERT ON chunk_edges FOR EACH ROW "
            "EXECUTE FUNCTION test_refuse_edges()"
        )
    )
    (corpus / "guide.md").write_text(GUIDE + "\n## More\n\nAnother section.\n" + PARAGRAPH)
    report = indexer.index_paths([corpus], collection="g")
    assert [p.source for p in report.failed] == ["docs/guide.md"] and "refused by test" in report.failed[0].reason
    assert connection.execute(text("SELECT id, content FROM document_chunks ORDER BY id")).all() == before_chunks
    assert _edges(connection) == before_edges
    assert _dangling(connection) == 0


def test_the_similarity_statement_can_walk_the_hnsw_index(indexer, corpus, connection):
    """One index scan per new chunk (ORDER BY distance LIMIT k), not a sort of the collection."""
    indexer.index_paths([corpus], collection="g")
    connection.execute(text("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off"))  # a tiny table
    plan = "\n".join(
        connection.execute(
            text("EXPLAIN " + str(store._SIMILAR_EDGES.text)),
            {
                "collection": "g",
                "document_id": 1,
                "ids": [1, 2],
                "pool": 12,
                "neighbours": 3,
                "min_similarity": 0.2,
                "kind": "similar",
                "up_to": store.MAX_ID,
            },
        ).scalars()
    )
    assert "ix_document_chunks_embedding_hnsw" in plan, plan


def test_a_new_collections_similarity_scans_walk_the_hnsw_index(indexer, tmp_path, connection):
    """A new collection's chunks are unanalysed in the ingest's own transaction: planned for a handful of
    rows, each chunk's nearest were found by sorting the whole collection (113 s for a 5,000-chunk file)."""
    docs = tmp_path / "big"
    docs.mkdir()
    (docs / "long.md").write_text("".join(f"# Part {i}\n\n{PARAGRAPH}Item {i}.\n\n" for i in range(300)))
    (docs / "guide.md").write_text(GUIDE)
    scans = text("SELECT pg_stat_get_xact_numscans(CAST('ix_document_chunks_embedding_hnsw' AS regclass))")
    before = connection.execute(scans).scalar_one()
    indexer.index_paths([docs], collection="fresh")
    chunks = connection.execute(text("SELECT count(*) FROM document_chunks WHERE collection = 'fresh'")).scalar_one()
    assert chunks >= 300
    assert connection.execute(scans).scalar_one() - before >= chunks, "similarity scans did not use the HNSW index"
    planner = text(
        "SELECT current_setting('enable_seqscan'), current_setting('enable_bitmapscan'), current_setting('enable_sort')"
    )
    assert tuple(connection.execute(planner).one()) == ("on", "on", "on"), "the rest of the transaction plans as before"


def test_the_backfill_builds_edges_for_a_collection_indexed_without_them(db, settings, corpus, connection):
    """``rag graph build``'s library call: edges from stored chunks, nothing embedded."""

    class Counting(HashingEmbedder):
        calls = 0

        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return super().embed_documents(texts)

    builder = GraphBuilder(neighbours=3, min_similarity=0.2)
    with_graph = Indexer(db, Counting(), settings, graph=builder)
    with_graph.index_paths([corpus], collection="g")
    ingested = _edges(connection)
    connection.execute(text("DELETE FROM chunk_edges; DELETE FROM chunk_links"))  # as before migration 0006
    forget = "SELECT pg_clear_attribute_stats('public', 'chunk_edges', 'collection', false)"
    connection.execute(text(forget))  # the planner's statistics know no edge of "g"
    calls = Counting.calls

    report = with_graph.build_graph(collection="g")
    assert (report.collections, report.documents) == (["g"], 3) and report.edges_written > 0
    known = "SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'chunk_edges' AND attname = 'collection'"
    assert connection.execute(text(known)).scalar() == "{g}", "a rebuild refreshes the edges' statistics"
    assert Counting.calls == calls, "the backfill embeds nothing"
    rebuilt = _edges(connection)
    assert {e for e in rebuilt if e[4] != "similar"} == {e for e in ingested if e[4] != "similar"}
    assert {e for e in ingested if e[4] == "similar"} <= rebuilt
    assert _dangling(connection) == 0
    again = with_graph.build_graph()  # every collection; replaces, never duplicates
    assert again.collections == ["g"] and _edges(connection) == rebuilt


def test_a_collection_written_after_deleted_copies_of_its_documents_gets_its_similarity_edges(
    indexer, db, tmp_path, connection
):
    """Deleted chunks stay in the HNSW graph until a vacuum and fill the scan's candidate list before the
    collection's own chunks: copies of the documents written and deleted 14 times cost a new collection a fifth
    of its edges (anthropic-docs-qa: 6,140-7,112 against 7,690; here 370 against 414). The scans read on until
    their pool is full."""
    rng = random.Random(3)
    stems, endings = ("rep", "ind", "vec", "tok", "chu", "que"), ("ly", "ica", "ex", "en", "nk")
    vocabulary = [stem + ending for stem in stems for ending in endings]
    docs = tmp_path / "pages"
    docs.mkdir()
    for i in range(24):
        sections = (" ".join(rng.choices(vocabulary, k=30)) for _ in range(3))
        parts = "".join(f"## Part {j}\n\n{body}.\n\n" for j, body in enumerate(sections))
        (docs / f"page{i:02d}.md").write_text(f"# Page {i}\n\n{parts}")
    indexer.index_paths([docs], collection="alone")
    for copy in range(14):
        indexer.index_paths([docs], collection=f"gone{copy}")
        with db.transaction() as session:
            stored = text("SELECT id FROM documents WHERE collection = :c")
            ids = list(session.execute(stored, {"c": f"gone{copy}"}).scalars())
            documents.delete_documents(session, collection=f"gone{copy}", ids=ids)
    indexer.index_paths([docs], collection="after")
    alone = [e for e in _edges(connection, "alone") if e[4] == "similar"]
    after = [e for e in _edges(connection, "after") if e[4] == "similar"]
    assert len(alone) > 100
    assert len(after) >= 0.98 * len(alone)


def test_a_full_reindex_on_the_row_path_keeps_the_graph_a_first_index_wrote(
    database_factory, settings, tmp_path, monkeypatch
):
    """``rag reindex --all`` rewrites documents in id order: each one's similarity edges went to every document, and
    those to documents rewritten after it went with their old chunks (226 edges -> 174 on these pages). Replayed as
    a first index writes them (edges only to documents up to its own id), the graph is the same after every reindex."""
    pages = write_corpus(tmp_path, monkeypatch)
    engine = _fresh(database_factory, settings)
    try:
        row_path = Indexer(Database(engine), HashingEmbedder(), settings)
        row_path.bulk_min_documents = 10**9
        assert row_path.index_paths([pages], collection="kb").added == 8
        with engine.connect() as conn:
            first = conn.execute(_EDGES).all()
        assert any(kind == store.SIMILAR for _, _, kind, _ in first)
        for _ in range(2):
            assert row_path.reindex_all().updated == 8
            with engine.connect() as conn:
                assert conn.execute(_EDGES).all() == first
    finally:
        engine.dispose()


def test_the_citus_catalog_is_read_once_per_connection_not_per_document(indexer, corpus, engine):
    """The write path asks whether it is on Citus (contexts, graph, vector reuse): a catalog read per document on
    the row path of one node, unless the answer is kept with the connection."""
    reads: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        if "extname = 'citus'" in statement:
            reads.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        report = indexer.index_paths([corpus], collection="g")
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert report.ok and report.added == 3, report.lines()
    assert len(reads) <= 1, reads


def _exact_similar(connection, collection: str, builder: GraphBuilder) -> set[tuple[int, int]]:
    """The similarity edges of ``collection`` with every document present, found by comparing every pair of chunks
    (``write_similar_edges``' rule: the pool nearest of the collection, those of other documents kept)."""
    import numpy as np

    rows = connection.execute(
        text("SELECT id, document_id, CAST(embedding AS text) FROM document_chunks WHERE collection = :c ORDER BY id"),
        {"c": collection},
    ).all()
    ids, docs = [r[0] for r in rows], [r[1] for r in rows]
    vectors = np.array([json.loads(r[2]) for r in rows], dtype=np.float32)
    similarity = vectors @ vectors.T
    edges = set()
    for i in range(len(ids)):
        nearest = [j for j in np.argsort(-similarity[i], kind="stable") if j != i]
        pool = nearest[: store.POOL_PER_NEIGHBOUR * builder.neighbours]
        for j in [j for j in pool if docs[j] != docs[i]][: builder.neighbours]:
            if builder.min_similarity <= similarity[i, j] < 1.0 + 1e-6:
                edges |= {(ids[i], ids[j]), (ids[j], ids[i])}
    return edges


def test_a_small_collections_similarity_edges_are_found_beside_a_large_one(db, settings, connection):
    """A small collection's walk of the HNSW index shared with a large one spent its budget of tuples on the large
    one's and stopped with few of its own: 66-78 of a 62-chunk collection's 356 edges beside 68,000 chunks (a table
    this test cannot afford: in a few hundred chunks the walk's first pass sees most of the graph). A collection no
    larger than the walk's budget is compared chunk by chunk instead: no walk, and every edge."""
    rng = random.Random(11)
    words = [f"term{i}" for i in range(60)]

    def texts(prefix: str, documents: int, sections: int) -> list[tuple[str, str, str]]:
        return [
            (
                f"{prefix}{d}.md",
                "",
                "\n\n".join(f"## S{s}\n\n" + " ".join(rng.choices(words, k=40)) + "." for s in range(sections)),
            )
            for d in range(documents)
        ]

    indexer = Indexer(db, HashingEmbedder(), settings)
    assert indexer.index_texts(texts("big", 90, 5), collection="large", strategy="markdown").ok
    assert indexer.index_texts(texts("small", 8, 3), collection="small", strategy="markdown").ok
    connection.execute(text("DELETE FROM chunk_edges WHERE collection = 'small' AND kind = 'similar'"))
    scans = text("SELECT pg_stat_get_xact_numscans(CAST('ix_document_chunks_embedding_hnsw' AS regclass))")
    before = connection.execute(scans).scalar_one()
    with db.transaction() as session:  # every document present: the edges depend on nothing but the vectors
        for (document_id,) in session.execute(text("SELECT id FROM documents WHERE collection = 'small' ORDER BY id")):
            chunk_ids = session.scalars(
                text("SELECT id FROM document_chunks WHERE document_id = :d ORDER BY id"), {"d": document_id}
            )
            store.write_similar_edges(
                session,
                collection="small",
                document_id=document_id,
                chunk_ids=list(chunk_ids),
                neighbours=indexer.graph.neighbours,
                min_similarity=indexer.graph.min_similarity,
                exact_below=getattr(indexer.graph, "exact_below", 0),
            )
    stored = set(
        connection.execute(
            text(
                "SELECT source_chunk_id, target_chunk_id FROM chunk_edges "
                "WHERE collection = 'small' AND kind = 'similar'"
            )
        ).all()
    )
    assert connection.execute(scans).scalar_one() == before, "the small collection's neighbours walked the HNSW index"
    expected = _exact_similar(connection, "small", indexer.graph)
    assert len(expected) > 20
    found = len(stored & expected)
    assert found >= 0.95 * len(expected), f"{found} of {len(expected)} edges found, {len(stored - expected)} others"
