"""PDF files: the text layer of every page, pages separated by a form feed line.

The stored text is the pages' text joined by ``"\\n\\f\\n"``, so the page of any offset is one plus
the number of form feeds before it (``page_span``); chunks of PDFs carry ``page_start``/``page_end``
in their metadata. Scanned PDFs (no text layer: run OCR first) and encrypted ones are refused with a one-line reason.

Headings are written as ATX header lines (``## Install``), as for Word files, so the ``markdown`` strategy (what
``auto`` picks for a PDF) gives chunks their header path: from the outline where the PDF has one
(``pdfoutline``), else from clearly larger fonts (``pdffonts``); every other line that would read as markdown
structure is escaped (``pdfheadings``). Running headers and footers are dropped first, so they are never headings.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import logging
import math
import re
from collections import Counter
from pathlib import Path

from rag_service.errors import DocumentReadError, first_line
from rag_service.ingest.chunk import TextChunk
from rag_service.ingest.formats.pdfbudget import PdfBudget
from rag_service.ingest.formats.pdffonts import LineSize, font_headings, large_lines, line_sizes, sized_page_text
from rag_service.ingest.formats.pdfheadings import marked_page
from rag_service.ingest.formats.pdfoutline import OutlineEntry, outline_headings, read_outline

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
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
#: a calendar date (ISO, numeric with a four-digit year, or with an English month's name)
_DATE = re.compile(
    r"\b(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./]\d{1,2}[./]\d{4}"
    rf"|{_MONTH} \d{{1,2}},? \d{{4}}|\d{{1,2}} {_MONTH} \d{{4}})\b"
)


def read_pdf(path: Path, data: bytes, *, max_bytes: int) -> tuple[str, str]:
    """The text layer of ``data`` (pages joined by ``PAGE_BREAK``) and its title (``""`` if none).

    Raises DocumentReadError for an unreadable, encrypted or text-less (scanned) PDF, and for one whose reading
    would cost more than the file limit ``max_bytes`` allows (``pdfbudget``).
    """
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # broken xref tables etc. are warned about per file
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileNotDecryptedError("password required")
        budget = PdfBudget(path, max_bytes=max_bytes)
        budget.check_contents(reader.pages)
        outline = read_outline(reader)
        # the font signal only where there is no outline: the outline is the document's own headings, sizes a guess
        read: list[tuple[str, list[float] | None]]
        if outline is not None:
            read = [(_page_text(page, budget), None) for page in reader.pages]
        else:
            read = _sized_pages(reader, budget)
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
    pages = [text for text, _ in read]
    if not any(page.strip() for page in pages):
        raise DocumentReadError(
            f"{path}: no text layer (a scanned PDF?); run OCR on it first (e.g. ocrmypdf in.pdf out.pdf) "
            "and index the result"
        )
    return _marked_text(read, outline), title


def _marked_text(read: list[tuple[str, list[float] | None]], outline: list[OutlineEntry] | None) -> str:
    """The stored text of pages read as ``(text, character sizes)``: running lines dropped, then the headings
    of the ``outline`` (or, without one, of the font sizes) written as header lines, pages joined."""
    lines = [text.split("\n") for text, _ in read]
    sized = [line_sizes(page, sizes) for page, (_, sizes) in zip(lines, read, strict=True)]
    drops = running_lines(lines, headings=large_lines(lines, sized))
    kept: list[list[str]] = []
    kept_sizes: list[list[LineSize]] = []
    for page, page_sizes, dropped in zip(lines, sized, drops, strict=True):
        kept.append([line for i, line in enumerate(page) if i not in dropped])
        kept_sizes.append([size for i, size in enumerate(page_sizes) if i not in dropped])
    headings = outline_headings(outline, kept) if outline is not None else font_headings(kept, kept_sizes)
    return PAGE_BREAK.join(marked_page(page, found) for page, found in zip(kept, headings, strict=True))


def _sized_pages(reader: object, budget: PdfBudget) -> list[tuple[str, list[float] | None]]:
    """Each page's text (as ``_page_text``) with its characters' font sizes (None where unknown)."""
    out: list[tuple[str, list[float] | None]] = []
    for page in reader.pages:  # type: ignore[attr-defined]
        raw, sizes = sized_page_text(page, on_operator=budget.operator)
        out.append(_cleaned(raw, sizes))
    return out


def running_lines(pages: list[list[str]], *, headings: list[set[int]] | None = None) -> list[set[int]]:
    """For each page (its lines), the indexes of its running headers and footers: a line among the first or
    last two of a page that is, digits aside, among them on ``RUNNING_SHARE`` of the pages, in a document of at
    least ``RUNNING_MIN_PAGES`` pages (fewer pages are too few to tell a running line from a repeated heading),
    and at most ``RUNNING_MAX_CHARS`` long. Its numbers stay or grow from page to page, no faster than the pages,
    as page and chapter numbers do (``_numbers_grow``); a line in ``headings`` (set large: ``large_lines``) is a
    heading, also when every page has one. A page that would lose every line keeps them, and pages that are left
    alike (digits aside) keep all: text repeated from a template is content, not furniture. A date that
    changes from page to page is content."""
    none: list[set[int]] = [set() for _ in pages]
    if len(pages) < RUNNING_MIN_PAGES:
        return none
    large = headings or none
    edges = [{i: _running_key(page[i]) for i in _edges(page) - big} for page, big in zip(pages, large, strict=True)]
    seen: Counter[str] = Counter()
    for keys in edges:
        seen.update({key for key in keys.values() if len(key) <= RUNNING_MAX_CHARS})
    needed = max(RUNNING_MIN_PAGES, math.ceil(RUNNING_SHARE * len(pages)))
    running = {key for key, count in seen.items() if count >= needed and _numbers_grow(key, pages, edges)}
    if not running:
        return none
    drops: list[set[int]] = []
    kept: list[str] = []
    for page, keys in zip(pages, edges, strict=True):
        dropped = {i for i, key in keys.items() if key in running}
        text = "\n".join(line for i, line in enumerate(page) if i not in dropped).strip()
        if not text:  # a page that would lose every line keeps them
            dropped, text = set(), "\n".join(page).strip()
        drops.append(dropped)
        kept.append(text)
    if len({_running_key(page) for page in kept}) < needed:  # the pages repeat one template: all of it is text
        return none
    return drops


def _numbers_grow(key: str, pages: list[list[str]], edges: list[dict[int, str]]) -> bool:
    """Whether each number of the lines of ``key`` stays or grows, page after page, by at most the pages between:
    a page number, a chapter's ("Total sightings: 3", then 6 on the next page, is content). A date that changes
    (a diary's day a page) is content too, though it may grow by one a page."""
    dates = {
        tuple(_DATE.findall(page[i])) for page, keys in zip(pages, edges, strict=True) for i in keys if keys[i] == key
    }
    if len(dates) > 1:
        return False
    found = [
        (number, tuple(int(n) for n in _DIGITS.findall(page[i])))
        for number, (page, keys) in enumerate(zip(pages, edges, strict=True))
        for i in sorted(keys)
        if keys[i] == key
    ]
    return all(
        0 <= b - a <= later - page
        for (page, before), (later, after) in itertools.pairwise(found)
        for a, b in zip(before, after, strict=False)
    )


def _edges(page: list[str]) -> set[int]:
    """The indexes of the first and last ``_EDGE_LINES`` non-blank lines of a page."""
    filled = [i for i, line in enumerate(page) if line.strip()]
    return set(filled[:_EDGE_LINES] + filled[-_EDGE_LINES:])


def _page_text(page: object, budget: PdfBudget) -> str:
    raw = page.extract_text(visitor_operand_before=budget.operator)  # type: ignore[attr-defined]
    return _cleaned(str(raw or ""), None)[0]


def _cleaned(raw: str, sizes: list[float] | None) -> tuple[str, list[float] | None]:
    """A page's extracted text with line ends made ``\n``, form feeds and NULs out, stripped; ``sizes`` (one per
    character of ``raw``, or None) kept in step with it."""
    if sizes is not None and ("\r\n" in raw or "\x00" in raw):  # the characters the replacements below drop
        keep = [i for i, char in enumerate(raw) if char != "\x00" and not (char == "\r" and raw[i + 1 : i + 2] == "\n")]
        raw, sizes = "".join(raw[i] for i in keep), [sizes[i] for i in keep]
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n").replace("\x00", "")
    stripped = text.strip()
    if sizes is not None:
        lead = len(text) - len(text.lstrip())
        sizes = sizes[lead : lead + len(stripped)]
    return stripped, sizes


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
