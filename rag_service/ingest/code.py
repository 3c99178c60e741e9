"""The ``code`` strategy: one definition per chunk where it fits; header path module > class > function.

The language comes from the file suffix (``filetypes.CODE_LANGUAGES``). Definitions are found by ``ast`` for Python
(``code_python``; a file that does not parse, or is over ``MAX_PARSED_CHARS``, is treated like the other languages)
and by definition lines and block ends for the others (``code_generic``: a heuristic, not a parser; LangChain's
splitter itself is not used, as it returns no offsets and cuts only at unindented definitions). Each definition
comes with the comments, attributes and decorators right above it (in Go, Rust, JS and TS, comments too long to go
with it are chunked apart under its name), and is one chunk if it fits ``chunk_size``; one that does not fit, and a Rust
``impl``, ``trait`` or ``mod`` block whatever its size (its items are Rust's methods, as a Go method is a definition
of its own), is replaced by its own code plus one chunk per nested definition (a class's methods), or else split by
the recursive splitter (its pieces keep its header path). Inside a class, code this short before the first method
(the class line, a docstring, a few attributes) or after the last (a closing brace) joins that method's chunk. Code
between definitions (imports, constants) is merged into chunks of at most ``chunk_size`` under the enclosing path,
never named after a definition; a text with no definition rule (language ``text``) has only such chunks. A chunk
starts at the beginning of its first line, indentation kept. The header path starts with the module: the file's
stem, a Rust ``mod.rs``'s folder.
"""


from __future__ import annotations

from pathlib import PurePath
from typing import ClassVar

from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.code_generic import generic_definitions
from rag_service.ingest.code_items import ITEM_LANGUAGES
from rag_service.ingest.code_lines import Definition
from rag_service.ingest.code_python import python_definitions
from rag_service.ingest.code_scan import JS_LANGUAGES
from rag_service.ingest.filetypes import language_for
from rag_service.ingest.recursive import SizedChunker, recursive_pieces
from rag_service.ingest.spans import Span, make_chunk, merge_pieces, trim_lines
from rag_service.ingest.strategies import DEFAULT_MIN_CHUNK_CHARS

#: a larger Python file is split as the other languages are: ``ast`` holds 150-230 bytes per character of a module
#: (a generated 10 MB ``_pb2.py`` took 1.9 GB), and hand-written modules stay far below this (the largest are ~500 KB)
MAX_PARSED_CHARS = 1_000_000
#: code this short (stripped) before a class's first method, or after its last, goes with that method's chunk
SHORT_CODE_CHARS = 200
#: the languages whose comments too long to go with their definition are chunked apart under its name
_NAMED_LEADS = ITEM_LANGUAGES | JS_LANGUAGES


class CodeChunker(SizedChunker):
    """Chunker for the ``code`` strategy (``TEXT`` chunks); ``source`` picks the language and module name."""

    strategy: ClassVar[str] = "code"

    def __init__(
        self,
        *,
        source: str = "",
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
    ) -> None:
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, min_chunk_chars=min_chunk_chars)
        self.language = language_for(source)
        path = PurePath(source)
        # a Rust ``mod.rs`` is its folder's module (``src/ast/mod.rs`` is ``ast``)
        folder = self.language == "rust" and path.name == "mod.rs" and path.parent.name
        self.module = (folder or path.stem) if source else ""

    def split(self, text: str) -> ChunkedDocument:
        """Chunk ``text`` by definitions with exact offsets (see the module doc)."""
        if not text.strip():
            return ChunkedDocument([], {})
        definitions = None
        if self.language == "python" and len(text) <= MAX_PARSED_CHARS:
            definitions = python_definitions(text)
        trailing = definitions is None
        if definitions is None:
            definitions = generic_definitions(text, self.language)
        units: list[tuple[Span, tuple[str, ...]]] = []
        self._walk(text, definitions, (0, len(text)), (), units, inside=False, trailing=trailing)
        base = {"h1": self.module} if self.module else {}
        chunks: list[TextChunk] = []
        for span, names in units:
            trimmed = trim_lines(text, *span)
            if trimmed is None:
                continue
            headers = {**base, **{f"h{i}": n for i, n in enumerate(names, start=len(base) + 1) if i <= 6}}
            chunks.append(make_chunk(text, trimmed, index=len(chunks), chunk_type=TEXT, headers=headers))
        return ChunkedDocument(chunks, {})

    # -- definitions to chunks ------------------------------------------------------------------------

    def _walk(
        self,
        text: str,
        definitions: list[Definition],
        span: Span,
        names: tuple[str, ...],
        units: list[tuple[Span, tuple[str, ...]]],
        *,
        inside: bool,
        trailing: bool = False,
    ) -> None:
        """Chunks of ``span`` holding ``definitions``: each whole where it fits (from its lead, else from its own
        start), else its children walked, else split; the code between them as ``_plain``. ``inside`` a
        definition (a class), short code before a child (the class line, a docstring, short attributes) goes
        with it, and short code after the last one (a closing brace) too, so no tiny chunk stands alone.
        ``trailing`` (the other languages): short code after any definition goes with it (``exports.A = A;``, a
        separator comment), not only inside one, and a short preamble before the first goes with that one."""
        cursor, end = span
        last: int | None = None  # the unit of the last definition, when it is whole
        for node in definitions:
            gap_end = max(cursor, node.lead)
            after_last = trailing and last is not None and self._short(text, cursor, gap_end)
            if after_last and last is not None and self._fits(text, units[last][0][0], gap_end):
                (begin, _), path = units[last]
                cursor, units[last] = gap_end, ((begin, gap_end), path)
            # a short file preamble (a header comment, `use strict`) has no definition of its own to join but this
            joined = [cursor] if (inside or trailing) and self._short(text, cursor, node.lead) else []
            candidates = [*joined, max(node.lead, cursor), max(node.start, cursor)]
            begin = next((c for c in candidates if self._fits(text, c, node.end)), candidates[0])
            path = (*names, *node.names)
            lead = max(node.lead, cursor)
            if lead < begin and self.language in _NAMED_LEADS:  # a lead too long for its definition: named after it
                self._plain(text, cursor, lead, names, units)
                self._plain(text, lead, begin, path, units)
            else:
                self._plain(text, cursor, begin, names, units)
            last = None
            if self._fits(text, begin, node.end) and not (node.container and node.children):
                units.append(((begin, node.end), path))
                last = len(units) - 1
            elif node.children:
                self._walk(text, node.children, (begin, node.end), path, units, inside=True, trailing=trailing)
            else:
                self._plain(text, begin, node.end, path, units)
            cursor = max(cursor, node.end)
        joins = (inside or trailing) and last is not None and self._short(text, cursor, end)
        if joins and last is not None and self._fits(text, units[last][0][0], end):
            (begin, _), path = units[last]
            units[last] = ((begin, end), path)
        else:
            self._plain(text, cursor, end, names, units)

    def _fits(self, text: str, start: int, end: int) -> bool:
        trimmed = trim_lines(text, start, end)  # as the chunk will be
        return trimmed is None or trimmed[1] - trimmed[0] <= self.chunk_size

    @staticmethod
    def _short(text: str, start: int, end: int) -> bool:
        return len(text[start:end].strip()) <= SHORT_CODE_CHARS

    def _plain(
        self, text: str, start: int, end: int, names: tuple[str, ...], units: list[tuple[Span, tuple[str, ...]]]
    ) -> None:
        """Code with no definition to keep whole: the recursive split, merged to ``chunk_size``."""
        if start >= end or not text[start:end].strip():
            return
        pieces = recursive_pieces(text, start, end, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap)
        for span in merge_pieces(pieces, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap):
            units.append((span, names))
