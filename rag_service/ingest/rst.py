"""The ``rst`` strategy: reStructuredText sections as parents, their recursive pieces as children.

The ``markdown`` strategy's sections, read from reStructuredText titles (``rag_service.rst_lines``: a title
over an adornment line, with or without an overline; levels in the order the styles first appear) instead of
ATX headers: sections at levels 1-4, small ones joined to a neighbour, each child with its title path and its
section as ``parent_content``. A label (``.. _install:``) before a title belongs to the section it names; a piece
of an object directive's body is led by the directive's argument (``rst_markup.directive_leads``).
"""

from __future__ import annotations

from typing import ClassVar

from rag_service.ingest.children import Leads
from rag_service.ingest.garbage import Syntax
from rag_service.ingest.markdown import MarkdownChunker
from rag_service.ingest.spans import joined_lead, referenced_values
from rag_service.rst_markup import SUBSTITUTION_REFERENCE, directive_leads, substitutions


class RstChunker(MarkdownChunker):
    """Chunker for the ``rst`` strategy: ``CHILD`` chunks with title paths and their parent section."""

    strategy: ClassVar[str] = "rst"
    syntax: ClassVar[Syntax] = "rst"

    def leads(self, text: str) -> Leads | None:
        """A child cut from an object directive's body (``.. function:: bisect_left(a, x)``) is led by its argument:
        the description's piece no longer lost the name it describes (253 of 464 such pieces, audit 59); then the
        values of the substitutions it refers to (``|ASN.1|`` reads ``BitString`` where the file replaces it so)."""
        if ".. " not in text:
            return None
        directive = directive_leads(text)
        values = substitutions(text)

        def lead(start: int, end: int) -> str:
            return joined_lead(directive(start), referenced_values(text[start:end], values, SUBSTITUTION_REFERENCE))

        return lead
