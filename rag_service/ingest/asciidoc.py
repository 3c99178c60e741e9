"""The ``asciidoc`` strategy: AsciiDoc sections as parents, their recursive pieces as children.

The ``markdown`` strategy's sections, read from AsciiDoc titles (``rag_service.asciidoc_lines``: ``= Document``
is h1, ``== Section`` h2, ..., outside delimited blocks, ``[discrete]`` headings left out) instead of ATX headers:
sections at levels 1-4, small ones joined to a neighbour, each child with its title path and its section as
``parent_content``. An anchor line (``[[install]]``) before a title belongs to the section it names.
"""

from __future__ import annotations

from typing import ClassVar

from rag_service.ingest.garbage import Syntax
from rag_service.ingest.markdown import MarkdownChunker


class AsciidocChunker(MarkdownChunker):
    """Chunker for the ``asciidoc`` strategy: ``CHILD`` chunks with title paths and their parent section."""

    strategy: ClassVar[str] = "asciidoc"
    syntax: ClassVar[Syntax] = "asciidoc"
