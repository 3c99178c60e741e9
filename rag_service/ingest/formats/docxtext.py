"""Word (.docx) files: paragraphs and tables as text, headings as ATX header lines.

A paragraph styled "Title" or "Heading N" becomes ``#``×N followed by its text, so the ``markdown``
strategy turns headings into the header path; any other paragraph or row that would read as a header
or a fence is escaped (``\\# of ferrets``); tables become one line per row, cells joined by `` | ``.
The body is read by ``docxbody`` (content controls, tracked insertions, text boxes, nested tables, notes).
"""

from __future__ import annotations

import zipfile
from io import BytesIO
from pathlib import Path

from rag_service.errors import DocumentReadError, first_line
from rag_service.ingest.formats.docxbody import body_blocks

#: what a .docx's parts may unpack to, as a multiple of the file limit: text XML packs 5-10x, so more is a zip
#: bomb's (a 131 KB file held 34 MB of XML that became 27 million characters)
UNPACKED_PER_LIMIT = 5
#: the XML elements of a .docx's parts may number one per this many bytes of the file limit (1.3 million at 20 MiB):
#: python-docx holds them all as a tree of 100-200 bytes each, so 100 MB of empty paragraphs (16.7 million elements
#: from a 147 KB file) took 2.3 GB. Text sets about one element per 5-10 characters, so text within the limit fits.
BYTES_PER_ELEMENT = 16


def read_docx(path: Path, data: bytes, *, max_bytes: int) -> tuple[str, str]:
    """The text of the Word document ``data`` and its title (core property, else the first h1).

    Raises DocumentReadError for a file that is not a readable .docx, whose parts unpack to more than
    ``UNPACKED_PER_LIMIT`` x ``max_bytes`` (checked from the zip's directory, before anything is unpacked), or whose
    XML holds more than one element per ``BYTES_PER_ELEMENT`` bytes of ``max_bytes`` (counted streaming, before
    python-docx builds its tree).
    """
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
            if unpacked > UNPACKED_PER_LIMIT * max_bytes:
                raise DocumentReadError(
                    f"{path} unpacks to {unpacked:,} bytes, over {UNPACKED_PER_LIMIT} x the limit of {max_bytes:,} "
                    "bytes (RAG_MAX_FILE_BYTES); set it higher to index it"
                )
            _check_elements(path, archive, max_bytes=max_bytes)
        document = docx.Document(BytesIO(data))
        blocks, notes = body_blocks(document)
        title = (document.core_properties.title or "").strip()
    except (PackageNotFoundError, zipfile.BadZipFile) as err:
        why = "not a zip archive, as a .docx is" if isinstance(err, zipfile.BadZipFile) else "no Word package inside"
        raise DocumentReadError(f"{path} is not a readable Word document ({why}); re-save it as .docx") from None
    except NotImplementedError:  # zipfile: a part packed with a method it lacks (Deflate64, 9; or 12, bzip2 unbuilt)
        raise DocumentReadError(
            f"{path} is not a readable Word document (packed with a zip compression method Python cannot unpack); "
            "re-save it as .docx"
        ) from None
    except (KeyError, ValueError) as err:  # a part missing from the package, or a value out of its range
        damaged = f"a damaged part: {first_line(err, limit=80)}"
        why = "a part is missing from it" if isinstance(err, KeyError) else damaged
        raise DocumentReadError(f"{path} is not a readable Word document ({why}); re-save it as .docx") from None
    except Exception as err:  # lxml raises its own syntax errors on corrupt XML parts
        if type(err).__module__.startswith(("lxml", "docx")):
            raise DocumentReadError(
                f"{path} is not a readable Word document (its XML is corrupt); re-save it as .docx"
            ) from None
        raise
    if not title:
        title = next((b[2:] for b in blocks if b.startswith("# ")), "")
    return "\n\n".join(blocks + notes), title


def _check_elements(path: Path, archive: zipfile.ZipFile, *, max_bytes: int) -> None:
    """Refuse the package when its XML parts hold more elements than ``max_bytes // BYTES_PER_ELEMENT``; counted by
    a streaming parse that drops each element once read (constant memory), stopping at the limit."""
    from lxml import etree

    limit = max_bytes // BYTES_PER_ELEMENT
    count = 0
    for info in archive.infolist():
        if not info.filename.endswith((".xml", ".rels")):
            continue
        with archive.open(info) as part:
            try:
                for _, element in etree.iterparse(part, events=("end",), resolve_entities=False, no_network=True):
                    count += 1
                    if count > limit:
                        raise DocumentReadError(
                            f"{path} holds over {limit:,} XML elements, one per {BYTES_PER_ELEMENT} bytes of the "
                            f"limit of {max_bytes:,} (RAG_MAX_FILE_BYTES); set it higher to index it"
                        )
                    element.clear()
                    while element.getprevious() is not None:
                        del element.getparent()[0]
            except etree.XMLSyntaxError:  # a part python-docx may never read; it says so if it does
                continue
