"""A job's progress names the step a bulk load's write is in once every document is staged (``Progress.phase``)."""

from __future__ import annotations

import threading
import time

from rag_service.ingest.progress import Progress
from rag_service.ingest.report import IngestReport
from rag_service.server.jobs import JobRegistry, ProgressListener


def test_a_running_job_shows_the_write_phase_and_clears_it_when_done() -> None:
    in_phase, release = threading.Event(), threading.Event()

    def work(listen: ProgressListener) -> IngestReport:
        with Progress(total=2, enabled=False, label="reindexing", listener=listen) as bar:
            bar.advance(chunks=3)
            bar.advance(chunks=4)
            bar.phase("build index ix_hnsw")
            in_phase.set()
            release.wait(10)
        return IngestReport(collection="kb")

    registry = JobRegistry(workers=1)
    try:
        job = registry.start("reindex-all", "kb", work)
        assert in_phase.wait(10)
        during = job.to_dict()["progress"]
        assert during == {
            "done": 2,
            "total": 2,
            "fraction": 1.0,
            "phase": "build index ix_hnsw",
            "chunks_embedded": 0,
            "chunks_written": 7,
        }
        release.set()
        deadline = time.monotonic() + 10
        while job.active and time.monotonic() < deadline:
            time.sleep(0.01)
        assert job.state == "succeeded" and job.to_dict()["progress"]["phase"] is None
    finally:
        release.set()
        registry.shutdown(wait=True)


def test_a_plain_listener_still_hears_the_counts() -> None:
    heard: list[tuple[int, int | None]] = []
    with Progress(total=1, enabled=False, label="x", listener=lambda done, total: heard.append((done, total))) as bar:
        bar.phase("contexts")  # a listener without ``phase`` is not told, and nothing fails
        bar.advance(chunks=1)
    assert heard == [(0, 1), (1, 1)]


def test_a_job_of_one_large_document_shows_its_chunks_move_before_the_document_is_done() -> None:
    """A 12.6 MB upload (31,306 chunks, 210 s) showed {done: 0, total: 1} for its whole run (audit 51a)."""
    embedding, release = threading.Event(), threading.Event()

    def work(listen: ProgressListener) -> IngestReport:
        with Progress(total=1, enabled=False, label="indexing", listener=listen) as bar:
            bar.embedded(256)
            bar.embedded(256)
            embedding.set()
            release.wait(10)
            bar.advance(chunks=512)
        return IngestReport(collection="kb")

    registry = JobRegistry(workers=1)
    try:
        job = registry.start("ingest", "kb", work)
        assert embedding.wait(10)
        during = job.to_dict()["progress"]
        assert (during["done"], during["chunks_embedded"], during["chunks_written"]) == (0, 512, 0)
        release.set()
        deadline = time.monotonic() + 10
        while job.active and time.monotonic() < deadline:
            time.sleep(0.01)
        after = job.to_dict()["progress"]
        assert (after["done"], after["chunks_embedded"], after["chunks_written"]) == (1, 512, 512)
    finally:
        release.set()
        registry.shutdown(wait=True)


def test_a_queued_job_knows_the_total_it_was_started_with() -> None:
    """The 202 answer of a large POST /api/documents showed total null until the job's listener first ran."""
    release = threading.Event()

    def blocking(listen: ProgressListener) -> IngestReport:
        release.wait(10)
        return IngestReport(collection="a")

    registry = JobRegistry(workers=1)
    try:
        registry.start("ingest", "a", blocking)
        queued = registry.start("ingest", "b", lambda listen: IngestReport(collection="b"), total=7)
        assert queued.state == "queued" and queued.to_dict()["progress"]["total"] == 7
    finally:
        release.set()
        registry.shutdown(wait=True)
