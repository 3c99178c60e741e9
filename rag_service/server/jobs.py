"""Background jobs (``reindex-all``): one at a time per collection, state kept in memory.

A job's scope is one collection or every collection (``None``); a job whose scope overlaps a
queued or running one is refused with ``JobConflictError`` (HTTP 409). Finished jobs stay
readable until the registry holds ``keep`` of them, oldest dropped first.

A server that stops cancels its running jobs: each stops at its next document, as ``rag reindex``
does on Ctrl-C (every batch is one transaction: a document is in its old or its new version), and
is logged as cancelled at WARNING, also when the service closed under it before that.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rag_service.errors import RagError
from rag_service.log import mask_url
from rag_service.server.errors import JobConflictError
from rag_service.server.middleware import one_line
from rag_service.shutdown import Interrupted

if TYPE_CHECKING:
    from rag_service import IngestReport

log = logging.getLogger(__name__)

JobState = Literal["queued", "running", "succeeded", "failed"]
#: hears a job's progress: (documents done, total or None), as the service's ``listener`` arguments do
ProgressListener = Callable[[int, int | None], None]
#: the work of a job: given a progress listener, returns the ingest report
JobWork = Callable[[ProgressListener], "IngestReport"]
#: how long a stopping server waits for its running jobs to stop at their next document
SHUTDOWN_GRACE_S = 10.0
#: a cancelled job's error
CANCELLED = "cancelled: the server stopped before the job ended (documents done so far are kept); start it again"


@dataclass(slots=True)
class Job:
    """One background job and what is known about it so far."""

    id: str
    kind: str
    collection: str | None
    state: JobState = "queued"
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    done: int = 0
    total: int | None = None
    phase: str | None = None  # the step of a bulk load's write, once every document is staged
    chunks_embedded: int = 0  # chunks embedded and written so far: a large document's job moves before it is done
    chunks_written: int = 0
    report: dict[str, Any] | None = None
    error: str | None = None

    @property
    def active(self) -> bool:
        """True while queued or running."""
        return self.state in ("queued", "running")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state, counts and progress."""
        fraction = self.done / self.total if self.total else (1.0 if self.state == "succeeded" else 0.0)
        counts = None
        if self.report is not None:
            counts = {
                key: self.report[key]
                for key in ("added", "updated", "unchanged", "deleted", "chunks_written", "chunks_embedded")
            }
            counts["failed"] = len(self.report["failed"])
        return {
            "id": self.id,
            "kind": self.kind,
            "collection": self.collection,
            "state": self.state,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "progress": {
                "done": self.done,
                "total": self.total,
                "fraction": round(fraction, 4),
                "phase": self.phase,
                "chunks_embedded": self.chunks_embedded,
                "chunks_written": self.chunks_written,
            },
            "counts": counts,
            "failures": None if self.report is None else self.report["failed"],
            "error": self.error,
        }


class _JobListener:
    """A job's progress listener: documents done, and the step a bulk load's write is in (``Progress.phase``)."""

    def __init__(self, job: Job, stopping: threading.Event) -> None:
        self.job = job
        self.stopping = stopping

    def __call__(self, done: int, total: int | None) -> None:
        self.job.done, self.job.total = done, total
        if self.stopping.is_set():  # between documents: the work unwinds as on Ctrl-C
            raise Interrupted(signal.SIGTERM)

    def phase(self, name: str) -> None:
        """The step the write is in (None again once the job ends)."""
        self.job.phase = name

    def chunks(self, embedded: int, written: int) -> None:
        """Chunks embedded and written so far (the model's thread calls it too: two plain assignments)."""
        self.job.chunks_embedded, self.job.chunks_written = embedded, written


def _overlaps(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a == b


class JobRegistry:
    """Runs jobs on a small thread pool of their own (not the request pool) and remembers them."""

    def __init__(self, *, workers: int = 2, keep: int = 100, on_finish: Callable[[Job], None] | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rag-job")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._keep = keep
        self._on_finish = on_finish
        self._stopping = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._running = 0

    @property
    def keep(self) -> int:
        """How many finished jobs are remembered (the oldest is forgotten first); running ones always are."""
        return self._keep

    def check_free(self, collection: str | None) -> None:
        """JobConflictError when a queued or running job overlaps ``collection`` (before checks that a running
        job makes wrong: a collection whose first ingest has not committed yet does not exist)."""
        with self._lock:
            self._refuse_overlap(collection)

    def _refuse_overlap(self, collection: str | None) -> None:
        for other in self._jobs.values():
            if other.active and _overlaps(other.collection, collection):
                scope = "every collection" if other.collection is None else f"collection {other.collection!r}"
                raise JobConflictError(
                    f"job {other.id} ({other.kind}) is still {other.state} on {scope}; "
                    f"wait for it (GET /api/jobs/{other.id}) and try again"
                )

    def start(self, kind: str, collection: str | None, work: JobWork, *, total: int | None = None) -> Job:
        """Queue ``work`` (``total`` documents, where known now); JobConflictError when an overlapping job is queued
        or running."""
        with self._lock:
            self._refuse_overlap(collection)
            job = Job(id=uuid.uuid4().hex, kind=kind, collection=collection, total=total)
            self._jobs[job.id] = job
            self._forget_old()
        self._pool.submit(self._run, job, work)
        return job

    def get(self, job_id: str) -> Job | None:
        """The job with this id, if it is still remembered."""
        with self._lock:
            return self._jobs.get(job_id)

    def _forget_old(self) -> None:
        finished = [j.id for j in self._jobs.values() if not j.active]
        for job_id in finished[: max(len(self._jobs) - self._keep, 0)]:
            del self._jobs[job_id]

    def _run(self, job: Job, work: JobWork) -> None:
        with self._lock:
            self._running += 1
        try:
            self._run_job(job, work)
        finally:
            with self._lock:
                self._running -= 1
                self._idle.notify_all()

    def _run_job(self, job: Job, work: JobWork) -> None:
        job.state, job.started_at = "running", time.time()
        try:
            report = work(_JobListener(job, self._stopping))
        except (KeyboardInterrupt, Exception) as exc:
            if self._stopping.is_set():  # stopped at a document, or the service closed under it
                self._cancelled(job, exc)
            elif isinstance(exc, KeyboardInterrupt):
                raise
            else:
                self._failed(job, exc)
        else:
            job.report = report.to_dict()
            job.state = "succeeded" if report.ok else "failed"
            if not report.ok:
                job.error = f"{len(report.failed)} document(s) failed; see failures"
        job.finished_at, job.phase = time.time(), None
        if self._on_finish is not None:
            self._on_finish(job)

    def _cancelled(self, job: Job, exc: BaseException) -> None:
        partial = exc.partial if isinstance(exc, Interrupted) else None
        if partial is not None and hasattr(partial, "to_dict"):
            job.report = partial.to_dict()
        job.error, job.state = CANCELLED, "failed"
        how = "" if isinstance(exc, KeyboardInterrupt) else f" ({one_line(exc)})"
        log.warning("job %s (%s) cancelled by the shutdown after %d documents%s", job.id, job.kind, job.done, how)

    def _failed(self, job: Job, exc: BaseException) -> None:
        job.state = "failed"
        if isinstance(exc, RagError):
            job.error = mask_url(str(exc))
            return
        # a job must end in a state, whatever went wrong
        job.error = f"internal error ({type(exc).__name__}); the server log has the details"
        log.error("job %s failed: %s", job.id, one_line(exc))  # one line; the traceback at DEBUG
        log.debug("traceback of job %s", job.id, exc_info=exc)

    def shutdown(self, *, wait: bool = False, cancel: bool = False, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Stop accepting jobs; queued ones are dropped. A running job finishes (``wait``: before this returns),
        or with ``cancel`` stops at its next document: this waits up to ``grace_s`` for that."""
        if cancel:
            self._stopping.set()
        self._pool.shutdown(wait=wait, cancel_futures=True)
        if cancel:
            with self._idle:
                self._idle.wait_for(lambda: self._running == 0, timeout=grace_s)
