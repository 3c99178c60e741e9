"""The bulk first index (``ingest.bulkwrite``, ``db.bulk``) ends in the row path's state, table by table.

The same markdown corpus (headers, links both ways, keywords and graph edges on) is indexed once
through the row path and once through the bulk path, each into a fresh database, and every table of
the two databases is compared row for row (timestamps aside), with the index definitions,
constraints and triggers. A failing bulk load must leave the database as it was, and a run into a
populated collection must take the row path.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from rag_service.db import bulk as bulk_load
from rag_service.db import bulk_staging, migrate
from rag_service.db.bulk import BulkLoad
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.partitions import partition_by_collection
from rag_service.embed import HashingEmbedder
from rag_service.ingest.fingerprint import content_hash
from rag_service.ingest.graph import GraphBuilder
from rag_service.ingest.indexer import Indexer
from rag_service.ingest.progress import Progress

TOPICS = [
    ("install", "Installing the service needs PostgreSQL with pgvector and a virtual environment for Python."),
    ("backup", "A backup of the database holds vectors, postings and documents; restore brings them back."),
    ("search", "Hybrid search fuses the vector arm and the keyword arm with reciprocal rank fusion."),
    ("graph", "The chunk graph links sections, siblings and similar passages across documents."),
    ("tuning", "Tuning HNSW means choosing ef_search and m; recall rises with both, latency too."),
    ("keywords", "Keywords are the most distinctive lexemes of a chunk by BM25 against its collection."),
]


#: a table whose rows are children under its header row when ``Settings.table_rows`` is on
SETTINGS_TABLE = (
    "## Settings\n\n| variable | meaning |\n|---|---|\n"
    + "".join(f"| `RAG_{name.upper()}` | {sentence} |\n" for name, sentence in TOPICS)
)


CLIENT_CODE = (
    '"""A client of the service."""\n\n\nclass SearchClient:\n    """Searches one collection."""\n\n'
    "    def search(self, ds, query):\n        return ds.repartition(8).hybridSearch(query)\n"
)


def _page(index: int, name: str, sentence: str) -> str:
    """A markdown page with sections, repeated vocabulary and links to an earlier and a later page (the
    first page ends with a table)."""
    later = TOPICS[(index + 1) % len(TOPICS)][0]
    earlier = TOPICS[index - 1][0]
    return (
        f"# {name.title()}\n\n{sentence} {sentence}\n\n"
        f"## Details of {name}\n\n{sentence} See [the {later} page]({later}.md#overview) and "
        f"[{earlier}](./{earlier}.md). " + " ".join(t[1] for t in TOPICS[: index + 2]) + "\n\n"
        f"### Overview\n\n{sentence.upper()} {TOPICS[(index + 3) % len(TOPICS)][1]}\n"
        + ("\n" + SETTINGS_TABLE if index == 0 else "")
    )


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_corpus(tmp_path, monkeypatch)


def write_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The markdown pages of ``TOPICS`` and a page without sections in a checkout's ``docs`` folder (cwd)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    docs = tmp_path / "docs"
    docs.mkdir()
    for index, (name, sentence) in enumerate(TOPICS):
        (docs / f"{name}.md").write_text(_page(index, name, sentence))
    # a page without sections: its context is the whole document
    (docs / "faq.txt").write_text("\n\n".join(sentence for _, sentence in TOPICS))
    # code: the keyword arm reads its names' parts too (keyword_text.name_parts)
    (docs / "client.py").write_text(CLIENT_CODE)
    return docs


def _fresh(database_factory: Any, settings: Any, *, partitioned: bool = False) -> Engine:
    engine = make_engine(database_factory.create("rag_bulk"), settings)
    migrate.upgrade(engine)
    if partitioned:
        with engine.begin() as conn:
            assert partition_by_collection(conn)
    return engine


def _indexer(engine: Engine, settings: Any, *, bulk: bool) -> Indexer:
    indexer = Indexer(
        Database(engine), HashingEmbedder(), settings, graph=GraphBuilder(neighbours=3, min_similarity=0.1)
    )
    indexer.bulk_min_documents = 0 if bulk else 10**9
    return indexer


# the tables as the application sees them: a partitioned parent holds its partitions' rows
_TABLES = text(
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
    "AND c.relname <> 'alembic_version' ORDER BY 1"
)
_STRUCTURE = (
    "SELECT indexrelid::regclass::text || ' ' || pg_get_indexdef(indexrelid) FROM pg_index "
    "WHERE indrelid::regclass::text IN ('documents', 'document_chunks', 'chunk_terms', 'lexeme_stats', "
    "'collection_stats', 'chunk_edges', 'chunk_links', 'document_contexts', 'context_terms', 'context_stats') "
    "ORDER BY 1",
    "SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE connamespace = 'public'::regnamespace ORDER BY 1",
    "SELECT tgrelid::regclass::text || ' ' || tgname || ' ' || tgenabled::text FROM pg_trigger WHERE NOT tgisinternal "
    "ORDER BY 1",
)


def dump(engine: Engine) -> dict[str, list[Any]]:
    """Every table's rows (sorted, timestamps left out) and the indexes, constraints and triggers."""
    found: dict[str, list[Any]] = {}
    with engine.connect() as conn:
        for (table,) in conn.execute(_TABLES).all():
            columns = [
                c
                for (c,) in conn.execute(
                    text(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = :t "
                        "AND data_type NOT LIKE 'timestamp%' ORDER BY ordinal_position"
                    ),
                    {"t": table},
                )
            ]
            listed = ", ".join(f'"{c}"::text' for c in columns)
            order = ", ".join(str(n) for n in range(1, min(3, len(columns)) + 1))
            rows = conn.execute(text(f'SELECT {listed} FROM "{table}" ORDER BY {order}')).all()
            found[table] = sorted(tuple(r) for r in rows)
        for number, statement in enumerate(_STRUCTURE):
            found[f"structure {number}"] = [r[0] for r in conn.execute(text(statement))]
    return found


def _record_parallel_plans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(staged table, plan) of each statement the load runs on parallel workers, EXPLAINed as it is run."""
    plans: list[tuple[str, str]] = []
    run = bulk_staging.run_in_parallel

    def explained(session: Any, statement: Any, params: dict[str, Any], **settings: str) -> Any:
        plan = run(session, text("EXPLAIN " + statement.text), params, **settings).scalars().all()
        plans.append((statement.text.split(" AS ", 1)[0].split()[-1], "\n".join(plan)))
        return run(session, statement, params, **settings)

    monkeypatch.setattr(bulk_staging, "run_in_parallel", explained)
    return plans


_LOAD_SCHEMAS = text("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'rag_bulk%'")


@pytest.mark.parametrize(
    ("partitioned", "schema_allowed", "one_pass"),
    [(False, True, True), (True, True, True), (False, False, True), (False, True, False), (False, False, False)],
    ids=["plain", "partitioned", "temporary-staging", "set-based-keywords", "temporary-staging-set-based-keywords"],
)
def test_a_bulk_first_index_ends_as_the_row_path_table_by_table(
    corpus, database_factory, settings, partitioned, schema_allowed, one_pass, monkeypatch
):
    if not schema_allowed:  # a role that may not create a schema stages in temporary tables
        monkeypatch.setattr(bulk_staging, "_CAN_CREATE_SCHEMA", text("SELECT false"))
    if not one_pass:  # a server without the rag_bm25 extension ranks the keywords set-based
        monkeypatch.setattr(bulk_load, "one_pass_available", lambda session: False)
    row_engine = _fresh(database_factory, settings, partitioned=partitioned)
    bulk_engine = _fresh(database_factory, settings, partitioned=partitioned)
    # packed postings compared too; table rows take their header row into the BM25 text and the embedding
    settings = dataclasses.replace(settings, bm25_packed_min_chunks=1, table_rows=True)
    try:
        row = _indexer(row_engine, settings, bulk=False).index_paths([corpus], collection="kb")
        parallel_plans = _record_parallel_plans(monkeypatch)
        phases: list[str] = []
        monkeypatch.setattr(Progress, "phase", lambda self, name: phases.append(name))
        bulk = _indexer(bulk_engine, settings, bulk=True).index_paths([corpus], collection="kb")
        assert row.ok and bulk.ok
        # the progress bar names each step of the load; a first index on a plain table rebuilds the indexes
        assert any(p.startswith("insert ") for p in phases) and phases[-1] == "graph edges"
        assert ("build index ix_document_chunks_embedding_hnsw" in phases) is not partitioned
        # the context postings' key and reference too: checked row by row they were ~80% of a 100k load
        context_keys = {"build index pk_context_terms", "check fk_context_terms_context"}
        assert (context_keys <= set(phases)) is not partitioned
        assert ("keyword statistics" in phases) is not one_pass and "best lexemes" in phases
        pages = len(TOPICS) + 2
        assert (bulk.added, bulk.chunks_written) == (row.added, row.chunks_written) == (pages, row.chunks_written)
        row_state, bulk_state = dump(row_engine), dump(bulk_engine)
        # the corpus exercises what is compared
        assert len(row_state["chunk_terms"]) > 100 and len(row_state["lexeme_stats"]) > 50
        assert len(row_state["context_terms"]) > 50 and len(row_state["context_stats"]) == 1
        assert any(context[2] == "-1" for context in row_state["document_contexts"]), "no whole-document context"
        # a table row's header row ("| variable | meaning |") is in its BM25 text, not in its content
        (row_chunk,) = [c for c in row_state["document_chunks"] if any(str(f).startswith("| `RAG_BACKUP`") for f in c)]
        assert any("'variabl'" in str(field) for field in row_chunk)
        # a code chunk's names are read in parts too: ds.repartition(8).hybridSearch -> repartition, hybrid, search
        (code_chunk,) = [c for c in row_state["document_chunks"] if any("ds.repartition" in str(f) for f in c)]
        assert all(any(f"'{lexeme}'" in str(field) for field in code_chunk) for lexeme in ("repartit", "hybrid"))
        content = next(f for f in row_chunk if str(f).startswith("| `RAG_BACKUP`"))  # embedded under it too
        assert content_hash(f"Install > Settings\n| variable | meaning |\n{content}") in row_chunk
        packed = row_state["bm25_packed_snapshots"]
        assert packed and packed[0][4] == "true", "no packed postings: is rag_bm25 built (make install)?"
        assert len(row_state["bm25_packed_lists"]) > 50
        kinds = {edge[3] for edge in row_state["chunk_edges"]}
        assert {"similar", "sibling", "link", "backlink"} <= kinds
        assert all(
            '"keywords"' in chunk_row[-2] or '"keywords"' in chunk_row[-1] for chunk_row in row_state["document_chunks"]
        )
        for table in row_state:
            assert bulk_state[table] == row_state[table], table
        # unlogged staging: the tokenizing and the keywords (the costliest steps) are planned on parallel workers
        planned = {table for table, plan in parallel_plans if "Gather" in plan and "Workers Planned" in plan}
        expected = {"bulk_vectors", "bulk_best_lexemes", "bulk_keywords"} if schema_allowed else set()
        assert planned == expected, parallel_plans
        with bulk_engine.connect() as conn:  # the load's staging schema went with it
            assert conn.execute(_LOAD_SCHEMAS).scalar_one() == 0
    finally:
        row_engine.dispose()
        bulk_engine.dispose()


def test_a_run_into_a_populated_collection_takes_the_row_path(corpus, database_factory, settings, monkeypatch):
    engine = _fresh(database_factory, settings)
    try:
        indexer = _indexer(engine, settings, bulk=True)
        assert indexer.index_paths([corpus], collection="kb").ok
        started: list[str] = []
        start = BulkLoad.start

        def spy(self: BulkLoad) -> None:
            started.append(self.collection)
            start(self)

        monkeypatch.setattr(BulkLoad, "start", spy)
        (corpus / "extra.md").write_text("# Extra\n\nA page added later, written by the row path.\n")
        (corpus / "install.md").write_text("# Install\n\nThe installer changed.\n")
        report = indexer.index_paths([corpus], collection="kb")
        assert report.ok and (report.added, report.updated) == (1, 1)
        assert started == []
        assert indexer.index_paths([corpus], collection="new").ok
        assert started == ["new"]  # and an empty collection takes the bulk path
    finally:
        engine.dispose()


def fail_after_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every bulk load fail once ``finish`` has written everything (before the commit)."""
    finish = BulkLoad.finish

    def finish_then_fail(self: BulkLoad, phase: Any = None) -> dict[str, float]:
        finish(self, phase) if phase is not None else finish(self)
        raise RuntimeError("disk full while building the index")

    monkeypatch.setattr(BulkLoad, "finish", finish_then_fail)


def assert_as_it_was(engine: Engine, before: dict[str, list[Any]], report: Any) -> None:
    """Every page of the corpus reported failed in one line naming the cause; the database as ``before``."""
    assert report.chunks_written == 0
    assert len(report.failed) == len(TOPICS) + 2  # every page of the corpus
    reason = report.failed[0].reason
    assert "disk full while building the index" in reason and "the collection is as it was" in reason
    assert "\n" not in reason
    after = dump(engine)
    after.pop("index_settings"), before.pop("index_settings")  # every run records the model before writing
    assert after == before
    with engine.connect() as conn:
        assert conn.execute(_LOAD_SCHEMAS).scalar_one() == 0


@pytest.mark.parametrize("populated", [False, True], ids=["first-index", "beside-another-collection"])
def test_a_failing_bulk_load_leaves_the_database_as_it_was(corpus, database_factory, settings, monkeypatch, populated):
    engine = _fresh(database_factory, settings)
    try:
        if populated:
            assert _indexer(engine, settings, bulk=False).index_paths([corpus], collection="other").ok
        before = dump(engine)
        fail_after_finish(monkeypatch)
        report = _indexer(engine, settings, bulk=True).index_paths([corpus], collection="kb")
        assert report.added == 0
        assert_as_it_was(engine, before, report)
    finally:
        engine.dispose()
