"""PDF files: the text layer of every page, pages separated by a form feed line.

The stored text is the pages' text joined by ``"\\n\\f\\n"``, so the page of any offset is one plus
the number of form feeds before it (``page_span``); chunks of PDFs carry ``page_start``/``page_end``
in their metadata. Scanned PDFs (no text layer: run OCR first) and encrypted ones are refused with a one-line reason.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math
import re
from collections import Counter
from pathlib import Path

from rag_service.errors import DocumentReadError, first_line
from rag_service.ingest.chunk import TextChunk

#: what separates pages in the stored text of a PDF
PAGE_BREAK = "\n\f\n"
#: running headers and footers are looked for in documents of this many pages or more
RUNNING_MIN_PAGES = 3
#: a line among the first or last ``_EDGE_LINES`` of a page is a running header or footer if it is on at least
#: this share of the pages (digits aside: "Page 2 of 9")
RUNNING_SHARE = 0.6
#: longer lines are text, not a running header or footer (a page of repeated prose has long lines at its edges)
RUNNING_MAX_CHARS = 80
_EDGE_LINES = 2
_DIGITS = re.compile(r"\d+")


def read_pdf(path: Path, data: bytes) -> tuple[str, str]:
    """The text layer of ``data`` (pages joined by ``PAGE_BREAK``) and its title (``""`` if none).

    Raises DocumentReadError for an unreadable, encrypted or text-less (scanned) PDF.
    """
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # broken xref tables etc. are warned about per file
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileNotDecryptedError("password required")
        pages = [_page_text(page) for page in reader.pages]
        title = str(reader.metadata.get("/Title") or "").strip() if reader.metadata else ""
    except (FileNotDecryptedError, DependencyError):
        raise DocumentReadError(
            f"{path} is an encrypted PDF; decrypt it first (e.g. qpdf --decrypt in.pdf out.pdf)"
        ) from None
    except DocumentReadError:
        raise
    except Exception as err:  # whatever a damaged or unusual PDF makes pypdf raise fails this file alone
        # pypdf's own errors say what is broken ("startxref not found"), as does a feature it lacks ("Unsupported
        # filter /FooDecode"); Python's from deep inside it do not
        known = isinstance(err, (PdfReadError, NotImplementedError))
        why = first_line(err, limit=80) if known else "its structure is damaged"
        raise DocumentReadError(f"{path} is not a readable PDF ({why}); re-save or re-export it") from None
    if not any(page.strip() for page in pages):
        raise DocumentReadError(
            f"{path}: no text layer (a scanned PDF?); run OCR on it first (e.g. ocrmypdf in.pdf out.pdf) "
            "and index the result"
        )
    return PAGE_BREAK.join(without_running_lines(pages)), title


def without_running_lines(pages: list[str]) -> list[str]:
    """``pages`` without their running headers and footers: a line among the first or last two of a page
    that is, digits aside, among them on ``RUNNING_SHARE`` of the pages, in a document of at least
    ``RUNNING_MIN_PAGES`` pages (fewer pages are too few to tell a running line from a repeated heading), and at
    most ``RUNNING_MAX_CHARS`` long. A page that would lose every line keeps them, and pages that are left alike
    (digits aside) keep all: text repeated from a template is content, not furniture."""
    if len(pages) < RUNNING_MIN_PAGES:
        return pages
    lines = [page.split("\n") for page in pages]
    edges = [{i: _running_key(page[i]) for i in _edges(page)} for page in lines]  # line index -> its key
    seen: Counter[str] = Counter()
    for keys in edges:
        seen.update({key for key in keys.values() if len(key) <= RUNNING_MAX_CHARS})
    needed = max(RUNNING_MIN_PAGES, math.ceil(RUNNING_SHARE * len(pages)))
    running = {key for key, count in seen.items() if count >= needed}
    if not running:
        return pages
    kept: list[str] = []
    for page, keys in zip(lines, edges, strict=True):
        dropped = {i for i, key in keys.items() if key in running}
        text = "\n".join(line for i, line in enumerate(page) if i not in dropped).strip()
        kept.append(text or "\n".join(page).strip())
    if len({_running_key(page) for page in kept}) < needed:  # the pages repeat one template: all of it is text
        return pages
    return kept


def _edges(page: list[str]) -> set[int]:
    """The indexes of the first and last ``_EDGE_LINES`` non-blank lines of a page."""
    filled = [i for i, line in enumerate(page) if line.strip()]
    return set(filled[:_EDGE_LINES] + filled[-_EDGE_LINES:])


def _page_text(page: object) -> str:
    text = str(page.extract_text() or "")  # type: ignore[attr-defined]
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n").replace("\x00", "")
    return text.strip()


def _running_key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()).lower())


def page_span(text: str, start: int, end: int) -> tuple[int, int]:
    """1-based first and last page of ``text[start:end]`` in a stored PDF text."""
    first = text.count("\f", 0, start) + 1
    return first, first + text.count("\f", start, end)


def with_pages(text: str, chunks: list[TextChunk]) -> list[TextChunk]:
    """``chunks`` with ``page_start``/``page_end`` added to their metadata (1-based, inclusive)."""
    out: list[TextChunk] = []
    for chunk in chunks:
        first, last = page_span(text, chunk.start_char, chunk.end_char)
        out.append(dataclasses.replace(chunk, metadata={**chunk.metadata, "page_start": first, "page_end": last}))
    return out
