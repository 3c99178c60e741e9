"""Ingestion against the real database: offsets, parents, incremental runs, prune, failures, locks."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.config import Settings
from rag_service.db import locks
from rag_service.db.locks import lock_for_edit, reindex_lock
from rag_service.embed import HashingEmbedder
from rag_service.errors import ReindexInProgressError
from rag_service.ingest import batch, chunking, embedclock
from rag_service.ingest.indexer import Indexer
from rag_service.ingest.progress import Progress
from rag_service.ingest.report import IngestReport
from rag_service.shutdown import Interrupted

GUIDE = """# Guide

Intro paragraph that explains what the guide covers in enough words to be a real chunk of text.

## Install

Run the installer with the default options. It creates a virtual environment and installs the CPU
build of torch first, so that nothing pulls the large CUDA build by accident on a fresh machine.

```bash
# not a header: a comment inside a code fence
make demo
```

## Usage

Call retrieve with a question and a context preset; the result carries chunks, sources and metrics
so the caller can cite where every piece of the context came from.
"""


class CountingEmbedder(HashingEmbedder):
    """Counts how many texts reach the model."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded = 0

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.embedded += len(texts)
        return super().embed_documents(texts)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def indexer(db, embedder, settings) -> Indexer:
    return Indexer(db, embedder, settings)


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a checkout: sources are relative to its root
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(GUIDE)
    (docs / "notes.txt").write_text("Plain notes about PostgreSQL full text search and pgvector HNSW indexes. " * 3)
    return docs


def _chunks(connection, source: str) -> list:
    return connection.execute(
        text(
            "SELECT c.content, c.start_char, c.end_char, c.headers, c.parent_content, c.parent_start, "
            "c.parent_end, c.chunk_type, c.token_count, d.content AS doc FROM document_chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE d.source = :s ORDER BY c.chunk_index"
        ),
        {"s": source},
    ).all()


def test_markdown_rows_carry_exact_offsets_headers_and_parents(indexer, corpus, connection):
    report = indexer.index_paths([corpus], collection="t")
    assert (report.added, report.failed) == (2, []), report.lines()
    rows = _chunks(connection, "docs/guide.md")
    assert rows, "no chunks written"
    for row in rows:
        assert row.doc[row.start_char : row.end_char] == row.content
        assert row.doc[row.parent_start : row.parent_end] == row.parent_content
        assert row.parent_start <= row.start_char and row.end_char <= row.parent_end
        assert row.chunk_type == "child"
        assert row.token_count > 0
    install = [r for r in rows if "Run the installer" in r.content]
    assert install and install[0].headers == {"h1": "Guide", "h2": "Install"}
    assert install[0].parent_content.startswith("## Install")
    assert "make demo" in install[0].parent_content, "code fence stays in its section"
    assert not any(r.headers.get("h1") == "not a header: a comment inside a code fence" for r in rows)


def test_unchanged_run_embeds_nothing_and_changed_document_reuses_vectors(indexer, corpus, embedder):
    indexer.index_paths([corpus], collection="t")
    first = embedder.embedded
    again = indexer.index_paths([corpus], collection="t")
    assert (again.unchanged, again.added, again.updated, embedder.embedded) == (2, 0, 0, first)

    (corpus / "guide.md").write_text(GUIDE + "\n## Extra\n\nA new section with a new paragraph of text to embed.\n")
    changed = indexer.index_paths([corpus], collection="t")
    assert (changed.updated, changed.unchanged) == (1, 1)
    assert changed.embeddings_reused > 0, "unchanged chunk texts must reuse stored vectors"
    assert 0 < changed.chunks_embedded < changed.chunks_written


def test_a_second_collection_of_the_same_documents_reuses_their_vectors(indexer, corpus, embedder, connection):
    """The same texts under the same headings in another collection: nothing embedded again, the same vectors."""
    first = indexer.index_paths([corpus], collection="t")
    embedded = embedder.embedded
    second = indexer.index_paths([corpus], collection="copy")
    assert first.chunks_written == second.chunks_written == second.embeddings_reused > 0
    assert (second.chunks_embedded, embedder.embedded) == (0, embedded)
    differ = text(
        "SELECT count(*) FROM document_chunks a JOIN document_chunks b USING (content_hash)"
        " WHERE a.collection = 't' AND b.collection = 'copy' AND a.embedding <> b.embedding"
    )
    assert connection.execute(differ).scalar() == 0
    (corpus / "guide.md").write_text(GUIDE + "\n## Extra\n\nA paragraph no collection holds yet, to embed.\n")
    third = indexer.index_paths([corpus], collection="another")
    assert 0 < third.chunks_embedded < third.chunks_written, "only the new text is embedded"


def test_identical_chunks_are_embedded_once_and_the_report_adds_up(indexer, tmp_path, embedder):
    """A text whose chunks repeat (a generated file, a pasted log): one vector for all copies of a chunk, counted
    as reused, so written chunks are the embedded ones plus the reused ones (it once said 758 written, 2 embedded,
    0 reused)."""
    (tmp_path / "log.txt").write_text("retry the upload after the timeout. " * 400)
    report = indexer.index_paths([tmp_path / "log.txt"], collection="t")
    assert report.failed == [] and report.chunks_written > 2 * report.chunks_embedded > 0
    assert report.chunks_embedded == embedder.embedded
    assert report.chunks_written == report.chunks_embedded + report.embeddings_reused


def test_the_bar_counts_chunks_as_they_are_embedded_before_any_document_is_written(indexer, tmp_path, monkeypatch):
    """A first batch of 1,024 chunks takes ~20 s to embed here: the bar moves during it, not only when the batch's
    documents are written (a repository's first run once sat at 0 documents for 93 s, then showed a 10-hour ETA)."""
    events: list[tuple[str, int]] = []
    monkeypatch.setattr(batch, "EMBED_PROGRESS_CHUNKS", 3)
    monkeypatch.setattr(Progress, "embedded", lambda self, chunks: events.append(("embedded", chunks)))
    monkeypatch.setattr(Progress, "advance", lambda self, *, chunks, items=1: events.append(("written", items)))
    for name in ("a", "b"):
        sections = (f"# {name} part {i}\n\n" + f"{name} says {i}. " * 9 for i in range(4))
        (tmp_path / f"{name}.md").write_text("\n\n".join(sections))
    report = indexer.index_paths([tmp_path], collection="t")
    embedded = [n for kind, n in events if kind == "embedded"]
    assert report.chunks_embedded > 3 and sum(embedded) == report.chunks_embedded
    assert max(embedded) == 3, "the batch is embedded in calls of EMBED_PROGRESS_CHUNKS"
    first_written = next(i for i, (kind, _) in enumerate(events) if kind == "written")
    assert [kind for kind, _ in events[:first_written]] == ["embedded"] * len(embedded)
    assert [n for kind, n in events if kind == "written"] == [2], "the batch's documents in one step, at its commit"


def test_a_batch_is_written_in_transactions_of_whole_documents(indexer, tmp_path, monkeypatch, connection):
    """Stats rows updated by every chunk make one long transaction slow (each update a version later lookups walk
    past): a batch commits every ``WRITE_CHUNKS`` chunks, whole documents each, a larger document alone."""
    steps: list[int] = []  # chunks written per commit
    monkeypatch.setattr(batch, "WRITE_CHUNKS", 2)
    monkeypatch.setattr(Progress, "advance", lambda self, *, chunks, items=1: steps.append(chunks))
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_text(f"{name} keeps the nightly backups of the {name} cluster.")
    steps_text = (f"Step {i} of the runbook restores replica {i} from its backup." for i in range(40))
    (tmp_path / "d.txt").write_text(" ".join(steps_text))
    report = indexer.index_paths([tmp_path], collection="t")
    assert report.added == 4 and report.failed == []
    assert steps[:2] == [2, 1] and len(steps) == 3 and steps[2] > 2, "a+b, c, then d alone: one commit each"
    written = connection.execute(text("SELECT count(*) FROM document_chunks WHERE collection = 't'")).scalar()
    assert written == report.chunks_written == sum(steps)


def test_force_rechunks_unchanged_documents(indexer, corpus):
    indexer.index_paths([corpus], collection="t")
    forced = indexer.index_paths([corpus], collection="t", force=True)
    assert forced.updated == 2


def test_prune_deletes_documents_whose_files_are_gone(indexer, corpus, connection):
    indexer.index_paths([corpus], collection="t")
    (corpus / "notes.txt").unlink()
    kept = indexer.index_paths([corpus], collection="t")
    assert kept.deleted == 0
    pruned = indexer.index_paths([corpus], collection="t", prune=True)
    assert pruned.deleted == 1
    sources = connection.execute(text("SELECT source FROM documents WHERE collection='t'")).scalars().all()
    assert sources == ["docs/guide.md"]
    orphans = connection.execute(
        text("SELECT count(*) FROM document_chunks c LEFT JOIN documents d ON d.id=c.document_id WHERE d.id IS NULL")
    ).scalar()
    assert orphans == 0


def test_a_run_without_prune_names_the_stored_documents_whose_files_are_gone(indexer, corpus):
    (corpus / "old.md").write_text("# Old\n\nAn old page about the lighthouse keeper and the lamp.\n")
    (corpus.parent / "elsewhere").mkdir()
    (corpus.parent / "elsewhere" / "far.md").write_text("# Far\n\nA page outside the walked folder entirely.\n")
    indexer.index_paths([corpus, corpus.parent / "elsewhere"], collection="t")
    (corpus / "old.md").unlink()
    (corpus / "notes.txt").unlink()
    (corpus.parent / "elsewhere" / "far.md").unlink()
    kept = indexer.index_paths([corpus], collection="t")
    assert kept.deleted == 0 and kept.gone == ["docs/notes.txt", "docs/old.md"], "only the walked folder's"
    assert (
        "2 stored documents' files are gone: docs/notes.txt, docs/old.md; run with --prune to delete them"
        in kept.lines()
    )
    assert kept.to_dict()["gone"] == ["docs/notes.txt", "docs/old.md"]
    one = indexer.index_paths([corpus / "guide.md", corpus / "old.md"], collection="t")
    assert "1 stored document's file is gone: docs/old.md; run with --prune to delete it" in one.lines()
    pruned = indexer.index_paths([corpus], collection="t", prune=True)
    assert pruned.deleted == 2 and pruned.gone == []
    assert indexer.index_paths([corpus], collection="t").gone == []


def test_failing_file_is_reported_and_others_are_indexed(indexer, corpus):
    (corpus / "bad.txt").write_bytes(b"valid start \xff\xfe invalid utf-8")
    (corpus / "binary.md").write_bytes(b"abc\x00def" * 20)
    (corpus / "image.png").write_bytes(b"\x89PNG")
    report = indexer.index_paths([corpus], collection="t")
    assert report.added == 2
    failed = {p.source: p.reason for p in report.failed}
    assert set(failed) == {"docs/bad.txt", "docs/binary.md"}
    assert "UTF-8" in failed["docs/bad.txt"]
    assert "NUL" in failed["docs/binary.md"]
    assert [p.source for p in report.skipped] == ["docs/image.png"]


def test_failed_update_keeps_previous_version(indexer, corpus, connection):
    indexer.index_paths([corpus], collection="t")
    before = _chunks(connection, "docs/notes.txt")
    (corpus / "notes.txt").write_bytes(b"\xff\xfe broken now")
    report = indexer.index_paths([corpus], collection="t")
    assert [p.source for p in report.failed] == ["docs/notes.txt"]
    assert _chunks(connection, "docs/notes.txt") == before


def test_empty_and_whitespace_files_leave_no_chunks(indexer, corpus, connection):
    (corpus / "empty.md").write_text("")
    (corpus / "blank.txt").write_text("   \n\n\t  \n")
    (corpus / "headers.md").write_text("# Only\n\n## Headers\n\n---\n")
    report = indexer.index_paths([corpus], collection="t")
    assert report.failed == []
    for source in ("docs/empty.md", "docs/blank.txt", "docs/headers.md"):
        assert _chunks(connection, source) == []
    assert report.filtered_total >= 1


def test_reindex_all_rechunks_from_stored_text(indexer, corpus, connection, embedder):
    indexer.index_paths([corpus], collection="t")
    before = _chunks(connection, "docs/guide.md")
    (corpus / "guide.md").unlink()  # the stored text is the source now
    calls = embedder.embedded
    report = indexer.reindex_all(collection="t")
    assert report.updated == 2 and report.failed == []
    assert embedder.embedded > calls, "reindex --all re-embeds"
    assert _chunks(connection, "docs/guide.md") == before


@contextmanager
def _held_by_another_run(engine, collection: str) -> Iterator[None]:
    """``collection``'s run lock held by a run on another thread while the block runs."""
    holding = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with reindex_lock(engine, collection):
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(10)
        yield
    finally:
        release.set()
        thread.join()


def test_second_reindex_of_same_collection_is_refused(engine, indexer, corpus):
    with _held_by_another_run(engine, "t"):
        with pytest.raises(ReindexInProgressError, match="another ingest or reindex of collection 't'"):
            indexer.index_paths([corpus], collection="t")
        indexer.index_paths([corpus], collection="other")  # other collections are not blocked
    indexer.index_paths([corpus], collection="t")


def test_collections_whose_names_share_a_32_bit_hash_do_not_block_each_other(engine, indexer, corpus):
    """The run lock was keyed by hashtext(name), 32 bits: among a few hundred thousand names some pairs share it,
    and a run of one refused the other's runs and edits as if its own were running."""
    first, second = "team-103077", "team-239063"
    with engine.connect() as conn:
        hashes = conn.execute(text("SELECT hashtext(:a), hashtext(:b)"), {"a": first, "b": second}).one()
    assert hashes[0] == hashes[1], "the pair must collide under the old key for this test to mean anything"
    with _held_by_another_run(engine, first):
        assert indexer.index_paths([corpus], collection=second).failed == []
        with Session(engine) as edit:
            lock_for_edit(edit, second)
        with Session(engine) as edit, pytest.raises(ReindexInProgressError):
            lock_for_edit(edit, first)  # the held one still excludes its own collection's edits


def test_a_run_waits_for_an_edit_and_refuses_edits_while_it_waits(engine, indexer, corpus, monkeypatch):
    """A DELETE holds the lock shared for its transaction: a run starting then waits for it instead of failing
    (a reindex-all job failed when a delete came a moment after it), and an edit arriving meanwhile is refused."""
    edit = Session(engine)
    lock_for_edit(edit, "t")
    done: list[float] = []

    def run() -> None:
        started = time.perf_counter()
        indexer.index_paths([corpus], collection="t")
        done.append(time.perf_counter() - started)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        _wait_for_a_waiter(engine)
        with Session(engine) as second, pytest.raises(ReindexInProgressError, match="is being indexed"):
            lock_for_edit(second, "t")  # queued behind the waiting run
        time.sleep(0.5)
        assert not done, "the run went ahead of the edit's transaction"
    finally:
        edit.commit()
        edit.close()
        thread.join(30)
    assert done and done[0] >= 0.5

    held = Session(engine)
    lock_for_edit(held, "t")
    monkeypatch.setattr(locks, "EDIT_WAIT", "200ms")
    try:
        with pytest.raises(ReindexInProgressError, match="another ingest or reindex of collection 't'"):
            indexer.index_paths([corpus], collection="t")  # an edit that does not end in time
    finally:
        held.rollback()
        held.close()


def _wait_for_a_waiter(engine) -> None:
    """Until a session waits for an advisory lock."""
    query = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    for _ in range(200):
        with engine.connect() as conn:
            if conn.execute(query).scalar_one():
                return
        time.sleep(0.05)
    raise AssertionError("no run waited for the lock")


def test_unknown_strategy_is_a_clear_error(indexer, corpus):
    from rag_service.errors import ChunkingError

    with pytest.raises(ChunkingError, match="unknown"):
        indexer.index_paths([corpus], collection="t", strategy="semantik")


def test_strategies_write_exact_offsets(indexer, corpus, connection, settings: Settings):
    for strategy in ("recursive", "sentence", "token"):
        indexer.index_paths([corpus / "guide.md"], collection=f"s_{strategy}", strategy=strategy)
        rows = connection.execute(
            text(
                "SELECT c.content, c.start_char, c.end_char, d.content AS doc, c.chunk_type FROM document_chunks c "
                "JOIN documents d ON d.id=c.document_id WHERE d.collection=:c"
            ),
            {"c": f"s_{strategy}"},
        ).all()
        assert rows, strategy
        for row in rows:
            assert row.doc[row.start_char : row.end_char] == row.content
            assert row.chunk_type == "text"


def test_a_document_failing_in_the_database_rolls_back_alone(indexer, corpus, connection, monkeypatch):
    from rag_service.db import documents as repo

    indexer.index_paths([corpus], collection="t")
    before = _chunks(connection, "docs/notes.txt")
    real = repo.replace_document

    def failing_for_notes(session, **kwargs):  # type: ignore[no-untyped-def]
        written = real(session, **kwargs)  # the rows are written, then the statement below fails
        if kwargs["source"] == "docs/notes.txt":
            session.execute(text("SELECT 1 / 0"))
        return written  # (id, created): the pipeline builds the document's graph edges with the id

    monkeypatch.setattr(repo, "replace_document", failing_for_notes)
    (corpus / "notes.txt").write_text("Rewritten notes about logical replication slots and WAL retention. " * 3)
    (corpus / "guide.md").write_text(GUIDE + "\n## More\n\nA further section written in the same batch as the notes.\n")
    report = indexer.index_paths([corpus], collection="t")
    assert [p.source for p in report.failed] == ["docs/notes.txt"]
    assert "division by zero" in report.failed[0].reason
    assert report.updated == 1
    assert _chunks(connection, "docs/notes.txt") == before, "the failed document keeps its previous version"
    assert any("further section" in r.content for r in _chunks(connection, "docs/guide.md"))


class _FakeClock:
    """The ``time`` module of the batch and of chunking as a test sees it: only the model below moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class _SlowEmbedder(HashingEmbedder):
    """Hashing vectors that take one second of the fake clock per call: model time a test can see."""

    def __init__(self, clock: _FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.clock.now += 1.0
        return super().embed_documents(texts)


def test_model_time_inside_semantic_chunking_counts_as_embedding(db, settings, tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text(
        " ".join(f"Sentence {i} talks about {'replicas' if i < 20 else 'vacuum'} at length." for i in range(40))
    )
    clock = _FakeClock()
    monkeypatch.setattr(batch, "time", clock)
    monkeypatch.setattr(chunking, "time", clock)
    monkeypatch.setattr(embedclock, "time", clock)
    report = Indexer(db, _SlowEmbedder(clock), settings).index_paths([tmp_path / "notes.txt"], strategy="semantic")
    assert report.added == 1
    assert report.embedding_seconds == 2.0  # the sentence vectors and the chunk vectors: two model calls
    assert report.chunking_seconds == 0.0, "chunking is the splitting, not the model"


class _StoppedWhileEmbedding(HashingEmbedder):
    """A model that works half a second, then a stop signal reaches the main thread while it works on (once)."""

    stops = 1

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        if self.stops:
            self.stops -= 1
            time.sleep(0.5)
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            time.sleep(0.5)
        return super().embed_documents(texts)


def test_a_run_stopped_while_embedding_reports_the_models_seconds_and_that_it_was_interrupted(
    db, settings, corpus
):
    indexer = Indexer(db, _StoppedWhileEmbedding(), settings)
    with pytest.raises(Interrupted) as stopped:
        indexer.index_paths([corpus], collection="t")
    report = stopped.value.partial
    assert isinstance(report, IngestReport) and report.chunks_written == 0
    assert report.interrupted and report.to_dict()["interrupted"] is True
    assert 0.4 <= report.embedding_seconds <= report.seconds, "the model's seconds before the stop count"
    assert not indexer.index_paths([corpus], collection="t").interrupted, "a finished run is not"


class _FailingModel(HashingEmbedder):
    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        raise RuntimeError("the model crashed")


def test_a_stop_heard_while_a_batch_fails_loses_none_of_its_failures(db, settings: Settings) -> None:
    """A job's listener raises the stop at the first document it hears; every failed document is reported."""

    def stop_at_once(done: int, total: int | None) -> None:
        if done:  # (0 is the start's call, with the total)
            raise Interrupted(signal.SIGTERM)

    items = [(f"d{i}.md", "", f"# Doc {i}\n\nParagraph {i} about tides and kites.\n") for i in range(3)]
    with pytest.raises(Interrupted) as stopped:
        Indexer(db, _FailingModel(), settings).index_texts(items, collection="failing", listener=stop_at_once)
    report = stopped.value.partial
    assert isinstance(report, IngestReport) and report.interrupted
    assert sorted(f.source for f in report.failed) == ["d0.md", "d1.md", "d2.md"], report.failed
