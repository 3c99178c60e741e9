"""The ``asciidoc`` strategy: AsciiDoc sections as parents, their recursive pieces as children.

The ``markdown`` strategy's sections, read from AsciiDoc titles (``rag_service.asciidoc_lines``: ``= Document``
is h1, ``== Section`` h2, ..., outside delimited blocks, ``[discrete]`` headings left out) instead of ATX headers:
sections at levels 1-4, small ones joined to a neighbour, each child with its title path and its section as
``parent_content``. An anchor line (``[[install]]``) before a title belongs to the section it names; a child is led
by the values of the attributes it refers to.
"""

from __future__ import annotations

from typing import ClassVar

from rag_service.asciidoc_lines import ATTRIBUTE_REFERENCE, attribute_values
from rag_service.ingest.children import Leads
from rag_service.ingest.garbage import Syntax
from rag_service.ingest.markdown import MarkdownChunker
from rag_service.ingest.spans import referenced_values


class AsciidocChunker(MarkdownChunker):
    """Chunker for the ``asciidoc`` strategy: ``CHILD`` chunks with title paths and their parent section."""

    strategy: ClassVar[str] = "asciidoc"
    syntax: ClassVar[Syntax] = "asciidoc"

    def leads(self, text: str) -> Leads | None:
        """A child is led by the values of the file's attributes its text refers to: ``{product} listens on port
        {port}`` is found by ``Zephyr Vault`` and ``8443`` (audit 59b), while the stored text stays the file's."""
        values = attribute_values(text)
        if not values:
            return None
        return lambda start, end: referenced_values(text[start:end], values, ATTRIBUTE_REFERENCE)
