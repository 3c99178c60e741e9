"""Word (.docx) files: paragraphs and tables as text, headings as ATX header lines.

A paragraph styled "Title" or "Heading N" becomes ``#``×N followed by its text, so the ``markdown``
strategy turns headings into the header path; any other paragraph or row that would read as a header
or a fence is escaped (``\\# of ferrets``); tables become one line per row, cells joined by `` | ``.
The body is read by ``docxbody`` (content controls, tracked insertions, text boxes, nested tables, notes).
"""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

from rag_service.ingest.formats.docxbody import body_blocks
from rag_service.ingest.formats.ooxml import PackageKind, read_package


def read_docx(path: Path, data: bytes, *, max_bytes: int) -> tuple[str, str]:
    """The text of the Word document ``data`` and its title (core property, else the first h1).

    Raises DocumentReadError for a file that is not a readable .docx, whose parts unpack to more than
    ``UNPACKED_PER_LIMIT`` x ``max_bytes``, or whose XML holds more than one element per ``BYTES_PER_ELEMENT`` bytes
    of ``max_bytes`` (``ooxml.check_package``, before python-docx builds its tree).
    """
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    kind = PackageKind("Word document", ".docx", "docx", PackageNotFoundError, "no Word package inside")

    def read(stream: BytesIO) -> tuple[list[str], list[str], str]:
        document = docx.Document(stream)
        blocks, notes = body_blocks(document)
        return blocks, notes, (document.core_properties.title or "").strip()

    blocks, notes, title = read_package(path, data, kind, max_bytes=max_bytes, read=read)
    if not title:
        title = next((b[2:] for b in blocks if b.startswith("# ")), "")
    return "\n\n".join(blocks + notes), title

