"""A server that stops while a reindex-all job runs: the job is cancelled (a WARNING line), not a database ERROR."""

from __future__ import annotations

import logging
import threading

from sqlalchemy import text

from rag_service.embed import HashingEmbedder
from rag_service.ingest.report import IngestReport
from rag_service.server.jobs import CANCELLED, JobRegistry, ProgressListener
from rag_service.service import UniversalRAGService

DOCUMENTS = 12


def test_a_stopping_server_cancels_its_reindex_job_between_documents(fresh_database, settings, caplog) -> None:
    service = UniversalRAGService(settings, database=fresh_database, embedder=HashingEmbedder(), reranker=None)
    items = [(f"d{i}.md", "", f"# Doc {i}\n\nParagraph {i} about tides, kites and backups of servers.\n") for i in
             range(DOCUMENTS)]
    assert service.index_texts(items, collection="kb", strategy="markdown").added == DOCUMENTS
    midway = threading.Event()

    def work(listen: ProgressListener) -> IngestReport:
        def heard(done: int, total: int | None) -> None:
            if done >= 3:
                midway.set()
                threading.Event().wait(0.05)  # the stop arrives while documents remain
            listen(done, total)

        return service.reindex_all(collection="kb", listener=heard)

    with fresh_database.transaction() as session:
        started = session.execute(text("SELECT clock_timestamp()")).scalar_one()
    registry = JobRegistry(workers=1)
    with caplog.at_level(logging.INFO, logger="rag_service"):
        job = registry.start("reindex-all", "kb", work)
        assert midway.wait(30)
        registry.shutdown(cancel=True)  # as the app's lifespan does, before the service closes
        assert not job.active, "the stop waited for the job to end"
        service.close()
    assert job.state == "failed" and job.error == CANCELLED
    with fresh_database.transaction() as session:  # a batch's documents commit together: each one is counted
        rewritten = session.execute(
            text("SELECT count(*) FROM documents WHERE collection = 'kb' AND updated_at > :t"), {"t": started}
        ).scalar_one()
    assert 3 <= job.done == rewritten <= DOCUMENTS, (job.done, rewritten)
    records = [r for r in caplog.records if r.name == "rag_service.server.jobs"]
    assert [r.levelno for r in records] == [logging.WARNING], [r.getMessage() for r in records]
    line = f"job {job.id} (reindex-all) cancelled by the shutdown after {rewritten} documents"
    assert line in records[0].getMessage()
    with fresh_database.transaction() as session:  # every document whole: its chunks are there
        counts = session.execute(text(
            "SELECT d.source, count(c.id) FROM documents d LEFT JOIN document_chunks c ON c.document_id = d.id "
            "WHERE d.collection = 'kb' GROUP BY d.source"
        )).all()
    assert len(counts) == DOCUMENTS and all(n > 0 for _, n in counts)


def test_a_job_whose_service_closed_under_it_while_stopping_is_a_warning(caplog) -> None:
    started, closed = threading.Event(), threading.Event()

    def work(listen: ProgressListener) -> IngestReport:
        started.set()
        closed.wait(10)  # a bulk write's long step hears no progress: the service closes first
        raise RuntimeError("connection is bad: server closed the connection")

    registry = JobRegistry(workers=1)
    with caplog.at_level(logging.INFO, logger="rag_service"):
        job = registry.start("reindex-all", None, work)
        assert started.wait(10)
        registry.shutdown(cancel=True, grace_s=0.1)
        closed.set()
        registry.shutdown(wait=True)
    assert job.error == CANCELLED
    records = [r for r in caplog.records if r.name == "rag_service.server.jobs"]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert "(RuntimeError: connection is bad" in records[0].getMessage()


