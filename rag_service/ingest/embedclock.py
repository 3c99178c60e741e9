"""The seconds the embedding model has spent in a run, and the report of a run a stop signal ends.

A batch's embedding runs on a worker thread and its seconds used to reach the report only when the
batch's vectors arrived, so a run stopped meanwhile reported "0.00 s embedding" after seconds of
work. The clock counts the running call too: ``settle()`` moves what was spent into the report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rag_service.ingest.report import IngestReport
from rag_service.shutdown import interrupted


class EmbedClock:
    """Embedding seconds not yet in ``report.embedding_seconds``, including a call still running."""

    def __init__(self, report: IngestReport) -> None:
        self.report = report
        self._lock = threading.Lock()
        self._unsettled = 0.0
        self._since: float | None = None  # when the running call started (or was last settled)

    @contextmanager
    def running(self) -> Iterator[None]:
        """Count the time spent within (a call to the model, on any thread)."""
        with self._lock:
            self._since = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                if self._since is not None:
                    self._unsettled += time.perf_counter() - self._since
                self._since = None

    def settle(self) -> None:
        """Add the seconds spent so far to the report (on the thread that owns the report)."""
        with self._lock:
            now = time.perf_counter()
            if self._since is not None:
                self._unsettled += now - self._since
                self._since = now
            seconds, self._unsettled = self._unsettled, 0.0
        self.report.embedding_seconds += seconds


@contextmanager
def reported_if_stopped(report: IngestReport, started: float) -> Iterator[list[EmbedClock]]:
    """A stop signal ends the run carrying its report: what was written (each document is in its old
    or its new version, never half-written: every batch is one transaction), marked ``interrupted``,
    with the seconds spent, the model's in the batches' clocks (yielded, for the run to add them) too."""
    clocks: list[EmbedClock] = []
    try:
        yield clocks
    except KeyboardInterrupt as stop:
        for clock in clocks:
            clock.settle()
        report.seconds = time.perf_counter() - started
        report.interrupted = True
        raise interrupted(stop, report) from None
