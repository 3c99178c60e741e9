"""PDF files: the text layer of every page, pages separated by a form feed line.

The stored text is the pages' text joined by ``"\\n\\f\\n"``, so the page of any offset is one plus
the number of form feeds before it (``page_span``); chunks of PDFs carry ``page_start``/``page_end``
in their metadata. Scanned PDFs (no text layer: run OCR first) and encrypted ones are refused with a one-line reason.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from pathlib import Path

from rag_service.errors import DocumentReadError, first_line
from rag_service.ingest.chunk import TextChunk

#: what separates pages in the stored text of a PDF
PAGE_BREAK = "\n\f\n"


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
    return PAGE_BREAK.join(pages), title


def _page_text(page: object) -> str:
    text = str(page.extract_text() or "")  # type: ignore[attr-defined]
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n").replace("\x00", "")
    return text.strip()


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
