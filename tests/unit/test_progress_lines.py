"""Progress on a stderr that is no terminal (``2>file``): plain lines at a modest rate, no bar redraws."""

from __future__ import annotations

import io
import sys

import pytest

from rag_service.ingest import progress
from rag_service.ingest.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_file_gets_a_line_each_tenth_and_no_carriage_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    # `rag reindex ... 2>file` wrote tqdm's \r redraws into the file
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    with Progress(total=260, enabled=True, label="indexing kb") as bar:
        for _ in range(260):
            bar.advance(chunks=3)
    text = stderr.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert len(lines) == 10, lines  # 26, 52, ... 260
    assert lines[0].startswith("indexing kb: 26/260 docs (10%), 78 chunks, ")
    assert lines[-1].startswith("indexing kb: 260/260 docs (100%), 780 chunks, ")


def test_a_slow_run_without_a_total_gets_a_line_every_few_seconds_and_its_last_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    with Progress(total=None, enabled=True, label="reindexing") as bar:
        bar.advance(chunks=2, items=5)
        monkeypatch.setattr(progress, "LINE_EVERY_S", 3600.0)
        bar.advance(chunks=1)
    counts = [line.split(",")[0] for line in stderr.getvalue().splitlines()]
    assert counts == ["reindexing: 5 docs", "reindexing: 6 docs"]


def test_a_terminal_still_gets_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    with Progress(total=4, enabled=True, label="indexing kb") as bar:
        bar.advance(chunks=1, items=4)
    assert "\r" in stderr.getvalue() and "4/4" in stderr.getvalue()


def test_quiet_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    with Progress(total=4, enabled=False, label="indexing kb") as bar:
        bar.advance(chunks=1, items=4)
    assert stderr.getvalue() == ""
