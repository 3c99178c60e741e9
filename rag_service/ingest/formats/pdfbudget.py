"""What reading a PDF's text may cost: bounded by the file limit (``RAG_MAX_FILE_BYTES``), as its size is.

pypdf decodes and parses a page's content streams for each page that draws on them, and a form XObject's for each
``Do`` that shows it, so a file of a few KB can make it parse gigabytes: 20 pages sharing one 2 MB stream of no-op
operators (5.5 KB on disk) took 45 s. pypdf's own limits (``pypdf.Configuration``) bound one stream's unpacked size,
not how often it is read. Two budgets close that, both deterministic (no clock: a file never fails on a busy machine
and indexes on a quiet one):

- before any text is extracted, the unpacked content streams of all pages, a shared stream counted on every page
  that uses it, may add up to the file limit (a page of text is 5-30 KB of them: a limit of 20 MiB holds about a
  thousand pages);
- while text is extracted, at most one drawing operator per ``BYTES_PER_OPERATOR`` bytes of the file limit runs
  (operators in form XObjects included; pypdf runs about 500,000 a second): text sets 0.1-2 per character.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_service.errors import DocumentReadError

#: one drawing operator may run while extracting a PDF's text per this many bytes of the file limit
BYTES_PER_OPERATOR = 2


class PdfBudget:
    """The work left for reading one PDF; raises DocumentReadError naming the limit once it is spent."""

    def __init__(self, path: Path, *, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.operators = max_bytes // BYTES_PER_OPERATOR
        self.operators_left = self.operators

    def check_contents(self, pages: Any) -> None:
        """Refuse the PDF when its ``pages``' content streams unpack to more than the file limit in all."""
        sizes: dict[int, int] = {}  # unpacked size by stream (pypdf keeps one object per stream of a file)
        total = 0
        for page in pages:
            for stream in _content_streams(page):
                if id(stream) not in sizes:
                    sizes[id(stream)] = len(stream.get_data())
                total += sizes[id(stream)]
            if total > self.max_bytes:
                raise DocumentReadError(
                    f"{self.path}: its pages draw on over {total:,} bytes of unpacked content streams (one shared by "
                    f"pages counts on each), over the limit of {self.max_bytes:,} bytes (RAG_MAX_FILE_BYTES); "
                    "set it higher to index it"
                )

    def operator(self, *_: Any) -> None:
        """pypdf's ``visitor_operand_before``: count one operator; raise past the budget. (Raised inside a form
        XObject, pypdf logs and skips the form; the next operator of the page raises again, out of pypdf.)"""
        self.operators_left -= 1
        if self.operators_left < 0:
            raise DocumentReadError(
                f"{self.path}: showing its text runs over {self.operators:,} drawing operators, one per "
                f"{BYTES_PER_OPERATOR} bytes of the limit of {self.max_bytes:,} (RAG_MAX_FILE_BYTES); "
                "set it higher to index it"
            )


def _content_streams(page: Any) -> list[Any]:
    """The content stream objects of a ``pypdf.PageObject`` (``/Contents``: one stream or an array of them)."""
    contents = page.get("/Contents")
    if contents is None:
        return []
    contents = contents.get_object()
    items = contents if isinstance(contents, list) else [contents]
    streams = [item.get_object() for item in items]
    return [stream for stream in streams if hasattr(stream, "get_data")]
