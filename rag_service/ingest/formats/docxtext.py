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


def read_docx(path: Path, data: bytes) -> tuple[str, str]:
    """The text of the Word document ``data`` and its title (core property, else the first h1).

    Raises DocumentReadError for a file that is not a readable .docx.
    """
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
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
