"""Office Open XML packages (.docx, .pptx): what is checked before a library builds a document's tree.

A package is a zip of XML parts. Both checks read only the zip's directory and a streaming parse, so a small file
that unpacks to gigabytes (a zip bomb) or to millions of empty elements is refused before python-docx or python-pptx
holds it in memory.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import TypeVar

from rag_service.errors import DocumentReadError, first_line

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PackageKind:
    """What a failure line calls a package and its suffix, and the library that reads it."""

    name: str  # "Word document"
    suffix: str  # ".docx"
    library: str  # "docx": the module whose exceptions mean a corrupt package
    #: the library's "this zip holds no such package" exception
    not_package: type[Exception]
    missing: str  # what that exception says, in words: "no Word package inside"


def read_package(path: Path, data: bytes, kind: PackageKind, *, max_bytes: int, read: Callable[[BytesIO], T]) -> T:
    """``read(stream)`` of a package that passed ``check_package``; every way it is unreadable is one
    DocumentReadError line that names the file and says to re-save it (``kind.suffix``)."""

    def unreadable(why: str) -> DocumentReadError:
        return DocumentReadError(f"{path} is not a readable {kind.name} ({why}); re-save it as {kind.suffix}")

    try:
        check_package(path, data, max_bytes=max_bytes)
        return read(BytesIO(data))
    except DocumentReadError:  # the package's size, from check_package
        raise
    except zipfile.BadZipFile:
        raise unreadable(f"not a zip archive, as a {kind.suffix} is") from None
    except kind.not_package:
        raise unreadable(kind.missing) from None
    except NotImplementedError:  # zipfile: a part packed with a method it lacks (Deflate64, 9; or 12, bzip2 unbuilt)
        raise unreadable("packed with a zip compression method Python cannot unpack") from None
    except (KeyError, ValueError) as err:  # a part missing from the package, or a value out of its range
        damaged = f"a damaged part: {first_line(err, limit=80)}"
        raise unreadable("a part is missing from it" if isinstance(err, KeyError) else damaged) from None
    except Exception as err:  # lxml raises its own syntax errors on corrupt XML parts
        if type(err).__module__.startswith(("lxml", kind.library)):
            raise unreadable("its XML is corrupt") from None
        raise

#: what a package's parts may unpack to, as a multiple of the file limit: text XML packs 5-10x, so more is a zip
#: bomb's (a 131 KB file held 34 MB of XML that became 27 million characters)
UNPACKED_PER_LIMIT = 5
#: the XML elements of a package's parts may number one per this many bytes of the file limit (1.3 million at 20 MiB):
#: python-docx and python-pptx hold them all as a tree of 100-200 bytes each, so 100 MB of empty paragraphs (16.7
#: million elements from a 147 KB file) took 2.3 GB. Text sets about one element per 5-10 characters, so text within
#: the limit fits.
BYTES_PER_ELEMENT = 16


def check_package(path: Path, data: bytes, *, max_bytes: int) -> None:
    """Raise DocumentReadError when the package ``data`` unpacks to more than ``UNPACKED_PER_LIMIT`` x ``max_bytes``
    (from the zip's directory, before anything is unpacked) or its XML holds more than one element per
    ``BYTES_PER_ELEMENT`` bytes of ``max_bytes``. Raises ``zipfile.BadZipFile`` for data that is no zip."""
    with zipfile.ZipFile(BytesIO(data)) as archive:
        unpacked = sum(info.file_size for info in archive.infolist())
        if unpacked > UNPACKED_PER_LIMIT * max_bytes:
            raise DocumentReadError(
                f"{path} unpacks to {unpacked:,} bytes, over {UNPACKED_PER_LIMIT} x the limit of {max_bytes:,} "
                "bytes (RAG_MAX_FILE_BYTES); set it higher to index it"
            )
        _check_elements(path, archive, max_bytes=max_bytes)


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
