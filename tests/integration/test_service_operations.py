"""Every operation of the HTTP API as a Python call on ``UniversalRAGService`` (real PostgreSQL).

Adding uploaded and in-memory documents, deleting one, listing and editing presets, and the database's
health: what ``server/`` calls, so a Python caller gets the same behaviour.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Connection, text

from rag_service import NewDocument
from rag_service.config import Settings
from rag_service.db.catalog import update_preset
from rag_service.db.database import Database
from rag_service.db.locks import reindex_lock
from rag_service.embed import HashingEmbedder
from rag_service.errors import (
    ConfigurationError,
    RagError,
    ReindexInProgressError,
    UnknownCollectionError,
    UnknownContextError,
)
from rag_service.ingest.repeated import REPEATED_SOURCE
from rag_service.service import UniversalRAGService

KITES = "# Kites\n\nA kite flies on the wind when the line holds it against the moving air above the field."
TIDES = "Tides rise twice a day in the harbour basin and the pilots plan every berth around them. " * 3


@pytest.fixture
def service(db: Database, settings: Settings, tmp_path: Path) -> UniversalRAGService:
    return UniversalRAGService(
        dataclasses.replace(settings, data_dir=tmp_path), database=db, embedder=HashingEmbedder(), reranker=None
    )


def _chunks(connection: Connection, collection: str, source: str) -> int:
    query = text(
        "SELECT count(*) FROM document_chunks c JOIN documents d ON d.id = c.document_id "
        "WHERE d.collection = :c AND d.source = :s"
    )
    return int(connection.execute(query, {"c": collection, "s": source}).scalar_one())


def test_delete_document_removes_it_with_its_chunks_and_only_it(
    service: UniversalRAGService, connection: Connection
) -> None:
    collection = f"del-{uuid.uuid4().hex[:8]}"
    documents = [NewDocument("kites.md", KITES, "Kites"), NewDocument("tides.txt", TIDES)]
    report = service.index_documents(documents, collection=collection, strategy="markdown")
    assert report.added == 2 and _chunks(connection, collection, "kites.md") >= 1

    assert service.delete_document("kites.md", collection=collection) == 1
    assert _chunks(connection, collection, "kites.md") == 0
    assert service.delete_document("kites.md", collection=collection) == 0, "a second delete finds nothing"
    counts = {info.name: info for info in service.collections()}[collection]
    assert (counts.documents, counts.chunks) == (1, _chunks(connection, collection, "tides.txt"))
    misspelled = f"no document 'tides.txt' to delete: .*did you mean {collection!r}"  # it said "no document with"
    with pytest.raises(UnknownCollectionError, match=misspelled):
        service.delete_document("tides.txt", collection=collection + "x")


def test_a_key_stored_in_nfd_is_filtered_and_deleted_by_its_name_typed_in_nfc(
    service: UniversalRAGService, connection: Connection
) -> None:
    """Audit 54a (8): a file named on macOS is keyed in NFD; the same name typed (NFC) matched no filter and
    deleted nothing. A document stored under each form is deleted by its own exact spelling first."""
    import unicodedata

    collection = f"nfd-{uuid.uuid4().hex[:8]}"
    nfd, nfc = (unicodedata.normalize(form, "équipe/Résumé.md") for form in ("NFD", "NFC"))
    service.index_documents([NewDocument(nfd, KITES), NewDocument("tides.txt", TIDES)], collection=collection)
    for filters in ({"source": nfc}, {"source_prefix": unicodedata.normalize("NFC", "équipe/")}):
        found = service.retrieve("kites", "search", collection=collection, filters=filters, min_relevance=0.0)
        assert found.chunks and {chunk.source for chunk in found.chunks} == {nfd}, filters
    assert service.delete_document(nfc, collection=collection) == 1
    assert _chunks(connection, collection, nfd) == 0

    both = collection + "-both"  # a delete's lock is held to the end of the test's transaction
    service.index_documents([NewDocument(nfd, KITES), NewDocument(nfc, KITES)], collection=both)
    assert service.delete_document(nfc, collection=both) == 1, "the exact spelling only"
    assert _chunks(connection, both, nfd) >= 1
    assert service.delete_document(nfc, collection=both) == 1, "then the other spelling"
    assert _chunks(connection, both, nfd) == 0


def test_delete_document_is_refused_while_a_reindex_holds_the_collection(service: UniversalRAGService) -> None:
    collection = f"del-{uuid.uuid4().hex[:8]}"
    service.index_documents([NewDocument("kites.md", KITES)], collection=collection)
    with reindex_lock(service.db.engine, collection), pytest.raises(ReindexInProgressError) as refused:
        service.delete_document("kites.md", collection=collection)
    assert str(refused.value) == (
        f"collection {collection!r} is being indexed (an ingest or reindex is running); wait for it to finish "
        "and try again"
    )
    assert service.delete_document("kites.md", collection=collection) == 1


def test_update_preset_is_validated_and_what_the_next_call_uses(service: UniversalRAGService) -> None:
    collection = f"pre-{uuid.uuid4().hex[:8]}"
    documents = [NewDocument(f"kites{i}.md", f"{KITES} Kite number {i} is red.") for i in range(4)]
    service.index_documents(documents, collection=collection, strategy="markdown")
    before = service.preset("search")
    assert len(service.retrieve("kite wind", "search", collection=collection, min_relevance=0.0).chunks) > 1

    edited = service.update_preset("search", max_chunks=1, min_relevance=0.0)
    assert (edited.max_chunks, edited.min_relevance) == (1, 0.0)
    assert service.preset("search") == edited
    assert {preset.context_type: preset for preset in service.presets()}["search"] == edited
    assert len(service.retrieve("kite wind", "search", collection=collection).chunks) == 1
    assert service.preset("search").candidate_k == before.candidate_k, "knobs not given stay as they were"

    with pytest.raises(ConfigurationError) as bad:
        service.update_preset("search", diversity=3)
    assert "diversity" in str(bad.value) and "\n" not in str(bad.value)
    with pytest.raises(UnknownContextError, match="unknown context 'nope'; valid contexts: chatbot"):
        service.update_preset("nope", max_chunks=2)
    with pytest.raises(ConfigurationError, match="no values to change for preset 'search'; give one"):
        service.update_preset("search")
    assert service.preset("search") == edited, "a refused edit changes nothing"


def test_update_preset_stores_numpy_and_fraction_values_as_plain_types(
    service: UniversalRAGService, connection: Connection
) -> None:
    """D3: a Fraction ended in psycopg's "cannot adapt type" with the SQL statement, np.int64 came back in the
    Preset, and np.float32(0.1) was stored as 0.10000000149011612."""
    edited = service.update_preset(
        "workflow", diversity=Fraction(1, 10), max_chunks=np.int64(6), graph_weight=np.float32(0.1)
    )
    assert (edited.diversity, edited.max_chunks, edited.graph_weight) == (0.1, 6, 0.1)
    assert (type(edited.diversity), type(edited.max_chunks), type(edited.graph_weight)) == (float, int, float)
    assert service.preset("workflow") == edited
    stored = connection.execute(
        text("SELECT diversity, graph_weight FROM rag_configurations WHERE context_type = 'workflow'")
    ).one()
    assert tuple(stored) == (0.1, 0.1)


def test_numpy_overrides_and_document_id_take_the_plain_rule(service: UniversalRAGService) -> None:
    """D4: max_tokens=np.int64(500) ran the whole search, then failed in the formatter ("must be a positive
    integer"); np.bool_ and a numpy document_id were refused."""
    collection = f"np-{uuid.uuid4().hex[:8]}"
    service.index_documents([NewDocument("kites.md", KITES)], collection=collection)
    plain = service.retrieve("kite wind", "search", collection=collection, max_tokens=500, expand_query=True)
    found = service.retrieve(
        "kite wind",
        "search",
        collection=collection,
        max_tokens=np.int64(500),
        expand_query=np.bool_(True),
        filters={"document_id": np.int64(plain.chunks[0].document_id)},
    )
    assert [c.chunk_id for c in found.chunks] == [c.chunk_id for c in plain.chunks]
    assert found.formatted_context == plain.formatted_context


def test_presets_and_contexts_list_the_stored_rows(service: UniversalRAGService) -> None:
    presets = service.presets()
    names = [preset.context_type for preset in presets]
    assert names[:5] == ["chatbot", "agent", "search", "workflow", "context_engineering"]
    assert service.contexts() == names
    for preset in presets:
        assert service.preset(preset.context_type) == preset


def test_uploads_are_read_by_type_then_indexed_with_progress(service: UniversalRAGService, tmp_path: Path) -> None:
    collection = f"up-{uuid.uuid4().hex[:8]}"
    uploads = [
        ("guide.md", f"# Guide\n\n## Tides\n\n{TIDES}".encode()),
        ("notes.txt", TIDES.encode()),
        ("tool.exe", b"MZ\x90\x00"),
    ]
    batch = service.read_uploads(uploads)
    assert [(d.source, d.strategy) for d in batch.documents] == [("guide.md", "markdown"), ("notes.txt", "recursive")]
    assert [problem.source for problem in batch.failed] == ["tool.exe"]
    assert str(tmp_path) not in batch.failed[0].reason and "tool.exe" in batch.failed[0].reason
    assert batch.chars == sum(len(d.text) for d in batch.documents)
    assert not [p for p in (tmp_path / "uploads").rglob("*") if p.is_file()], "nothing staged is kept"

    heard: list[tuple[int, int | None]] = []
    report = service.index_documents(batch, collection=collection, listener=lambda *progress: heard.append(progress))
    assert report.added == 2 and [problem.source for problem in report.failed] == ["tool.exe"] and not report.ok
    assert heard[0] == (1, 3) and heard[-1] == (3, 3), heard
    assert [done for done, _ in heard] == sorted(done for done, _ in heard)

    chosen = service.read_uploads([("notes.txt", TIDES.encode())], strategy="sentence")
    assert chosen.documents[0].strategy == "sentence", "a strategy given is used for every file"
    with pytest.raises(ConfigurationError, match="is not a plain file name"):
        service.read_uploads([("../evil.md", b"# Evil")])
    assert not list(tmp_path.parent.glob("evil.md"))


def test_one_source_twice_in_a_call_is_refused_or_reported_never_written_over(
    service: UniversalRAGService, tmp_path: Path
) -> None:
    """Two documents under one source: the second replaced the first while the report said "added 2"."""
    collection = f"dup-{uuid.uuid4().hex[:8]}"
    twice = [NewDocument("d.md", "# One\n\nThe first text."), NewDocument("d.md", "# Two\n\nThe second text.")]
    with pytest.raises(ConfigurationError, match=r"documents of this call share a source: 'd.md' \(2 times\)"):
        service.index_documents(twice, collection=collection)
    assert collection not in {c.name for c in service.collections()}, "refused before any work"

    streamed = ((d.source, "", d.text) for d in twice)  # index_texts streams: the later one is reported
    report = service.index_texts(streamed, collection=collection)
    assert report.added == 1 and [(p.source, p.reason) for p in report.failed] == [("d.md", REPEATED_SOURCE)]
    assert "first text" in service.retrieve("text", "search", collection=collection).chunks[0].content

    for checkout in ("one", "two"):  # two checkouts' docs/a.md share the key docs/a.md
        (tmp_path / checkout / ".git").mkdir(parents=True)
        (tmp_path / checkout / "docs").mkdir()
        (tmp_path / checkout / "docs" / "a.md").write_text(f"# A\n\nThe {checkout} checkout.")
    walked = service.index_paths([tmp_path / "one", tmp_path / "two"], collection=f"{collection}-paths")
    assert walked.added == 1 and [p.source for p in walked.failed] == ["docs/a.md"]
    refused, kept = tmp_path / "two" / "docs" / "a.md", tmp_path / "one" / "docs" / "a.md"
    assert walked.failed[0].reason.startswith(f"{refused} has the same source as {kept}, indexed earlier in this run")
    assert walked.failed[0].reason.endswith("or pass --root above both; not indexed")


def test_a_document_given_without_a_title_is_titled_as_its_file_would_be(service: UniversalRAGService) -> None:
    """JSON documents had an empty title even with a ``# h1``: the README's rule (h1, front matter, file name)."""
    collection = f"ttl-{uuid.uuid4().hex[:8]}"
    documents = [
        NewDocument("guide.md", "# Backup Guide\n\nBackups run nightly and are kept in object storage."),
        NewDocument("notes/plain.txt", "Backups run nightly; restores take an hour from object storage."),
        NewDocument("named.md", "# Inner\n\nBackups are verified weekly by a restore drill.", title="Given"),
        NewDocument("job.py", "# run the backups\nimport os\nprint(os.environ['BACKUP'])", strategy="code"),
    ]
    service.index_documents(documents, collection=collection)
    service.index_texts([("loose", "", "---\ntitle: From Front Matter\n---\nBackups of the database.")],
                        collection=collection)  # fmt: skip
    found = service.retrieve("backups", "search", collection=collection, max_chunks=10, min_relevance=0.0)
    titles = {document["source"]: document["title"] for document in found.documents()}
    assert titles == {
        "guide.md": "Backup Guide",
        "notes/plain.txt": "plain",
        "named.md": "Given",
        "job.py": "job",  # a comment is no title
        "loose": "From Front Matter",
    }


def test_a_document_without_chunks_is_named_in_the_report(service: UniversalRAGService) -> None:
    """An empty document counted "added 1" with 0 chunks and nothing said: it is stored and can never be found."""
    collection = f"empty-{uuid.uuid4().hex[:8]}"
    documents = [NewDocument("empty.md", ""), NewDocument("blank.md", "  \n\n "), NewDocument("kites.md", KITES)]
    report = service.index_documents(documents, collection=collection)
    assert report.added == 3 and sorted(report.without_chunks) == ["blank.md", "empty.md"]
    line = [line for line in report.lines() if line.startswith("no chunks: ")]
    assert line and "empty, or only markup the garbage filter drops; nothing to search" in line[0]
    assert report.to_dict()["without_chunks"] == report.without_chunks


def test_arguments_of_the_wrong_kind_are_one_line_each(service: UniversalRAGService, tmp_path: Path) -> None:
    """Each of these ended in a raw TypeError, AttributeError or SQLAlchemy's SQL dump (a helper's audit)."""
    calls = {
        "context must be a preset name (text), not int": lambda: service.retrieve("kites", 5),  # type: ignore[arg-type]
        "collection must be a name (text), not NoneType": lambda: service.retrieve("kites", collection=None),  # type: ignore[arg-type]
        "source must be a document's source (text), not None": lambda: service.delete_document(None),  # type: ignore[arg-type]
        "documents[0] is a tuple; pass NewDocument": lambda: service.index_documents([("a.md", "t")]),  # type: ignore[list-item]
        "documents[0]: source '  ' and text must be text": lambda: service.index_documents([NewDocument("  ", "t")]),
        "paths or items must be a list, not NoneType": lambda: service.index_paths(None),  # type: ignore[arg-type]
        "metadata must be a JSON object (a dict), not str": lambda: service.index_paths([tmp_path], metadata="team"),  # type: ignore[arg-type]
    }  # fmt: skip
    for message, call in calls.items():
        with pytest.raises(RagError) as raised:
            call()
        assert str(raised.value).startswith(message), (message, str(raised.value))

    (tmp_path / "one.md").write_text("# One\n\nThe only file named.")
    (tmp_path / "other.md").write_text("# Other\n\nA file nobody named.")
    named = service.index_paths(str(tmp_path / "one.md"), collection=f"str-{uuid.uuid4().hex[:8]}")  # type: ignore[arg-type]
    assert named.added == 1 and not named.skipped, "a string is one path, not its letters"


def test_collection_names_are_checked_before_any_work(service: UniversalRAGService) -> None:
    assert service.check_collection_name("../../x") == "../../x"
    for bad in ("", "   ", "x" * 201):
        with pytest.raises(ConfigurationError, match="must be 1-200 characters"):
            service.check_collection_name(bad)
    with pytest.raises(ConfigurationError, match="contains a NUL character"):
        service.index_texts([("a.md", "", "text")], collection="a\x00b")


def test_readiness_and_health_of_a_migrated_database(service: UniversalRAGService) -> None:
    assert service.readiness_problem() is None
    health = service.database_health()
    assert health.circuit == "closed" and health.circuit_closed and health.cooldown_s > 0
    assert health.pool_size is not None and health.pool_size >= 1 and health.checked_out is not None


def test_documents_are_chunked_by_their_source_name_by_default(
    service: UniversalRAGService, connection: Connection
) -> None:
    from rag_service.server.schemas import DocumentsRequest

    collection = f"auto-{uuid.uuid4().hex[:8]}"
    errors = "# Errors\n\nEvery failure is one line.\n\n## Codes\n\nCode 42 means the quota ran out of room today.\n"
    documents = [NewDocument("errors.md", errors), NewDocument("notes", TIDES)]
    assert service.index_documents(documents, collection=collection).added == 2
    query = text("SELECT source, chunker FROM documents WHERE collection = :c ORDER BY source")
    chunkers = {row[0]: row[1] for row in connection.execute(query, {"c": collection})}
    assert chunkers["errors.md"].startswith("markdown") and chunkers["notes"].startswith("recursive")
    found = service.retrieve("code 42 quota", "agent", collection=collection)
    assert found.chunks[0].source == "errors.md" and found.chunks[0].headers, "a markdown text has header paths"
    body = DocumentsRequest.model_validate({"documents": [{"source": "errors.md", "text": errors}]})
    assert body.strategy == "auto", "POST /api/documents chunks as the Python call does"


def test_a_preset_row_edited_out_of_limits_is_named_as_stored(
    service: UniversalRAGService, connection: Connection
) -> None:
    collection = f"wild-{uuid.uuid4().hex[:8]}"
    service.index_documents([NewDocument("kites.md", KITES)], collection=collection)
    connection.execute(text(  # SQL accepts what the knobs refuse: the table's CHECKs are looser
        "INSERT INTO rag_configurations (context_type, expand_query, return_parents, diversity, max_chunks, "
        "max_tokens, vector_weight) VALUES ('wild', false, false, 0.1, 3000, 1500, 2.5)"
    ))
    stored = (
        "preset 'wild' stores max_chunks 3000 (must be between 1 and 1000), vector_weight 2.5 (must be between 0 and 1)"
    )
    for call in (
        lambda: service.retrieve("kite", "wild", collection=collection),
        lambda: service.retrieve("kite", "wild", collection=collection, max_tokens=900),
        lambda: service.preset("wild"),  # GET /api/presets/wild
    ):
        with pytest.raises(ConfigurationError) as bad:
            call()
        assert str(bad.value) == f"{stored}; fix it with PUT /api/presets/wild (update_preset) or in rag_configurations"
    with pytest.raises(ConfigurationError) as partial:  # PUT {"max_tokens": 900}
        service.update_preset("wild", max_tokens=900)
    assert str(partial.value) == f"{stored}; send valid max_chunks, vector_weight in this change too"
    with pytest.raises(ConfigurationError, match=r"^max_tokens \(0\) must be between"):  # what was sent comes first
        service.update_preset("wild", max_tokens=0)
    overridden = service.retrieve("kite", "wild", collection=collection, max_chunks=5, vector_weight=0.5)
    assert overridden.chunks, "a call that replaces the bad values runs"

    fixed = service.update_preset("wild", max_chunks=8, vector_weight=0.5)
    assert (fixed.max_chunks, fixed.vector_weight) == (8, 0.5)
    assert service.retrieve("kite", "wild", collection=collection).chunks


def test_two_edits_of_one_preset_at_once_keep_both_changes(fresh_database: Database, settings: Settings) -> None:
    """Each edit wrote back every knob as it had read it: the later undid the earlier's change, and both callers
    were told their change was stored (39 of 40 concurrent pairs lost one)."""
    svc = UniversalRAGService(settings, database=fresh_database, embedder=HashingEmbedder())
    before = svc.preset("workflow")
    edited: dict[str, object] = {}
    later = threading.Thread(target=lambda: edited.update(b=svc.update_preset("workflow", diversity=0.5)))
    with fresh_database.transaction() as session:
        update_preset(session, "workflow", {"max_chunks": before.max_chunks + 2})  # held open: not committed yet
        later.start()
        waiting = text("SELECT count(*) FROM pg_locks WHERE NOT granted")
        deadline = time.monotonic() + 30
        with fresh_database.engine.connect() as watch:
            while not watch.execute(waiting).scalar_one() and time.monotonic() < deadline:
                time.sleep(0.02)  # the later edit waits on the row
    later.join(timeout=30)
    after = svc.preset("workflow")
    assert (after.max_chunks, after.diversity) == (before.max_chunks + 2, 0.5), edited
