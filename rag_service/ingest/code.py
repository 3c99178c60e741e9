"""The ``code`` strategy: functions and classes whole where they fit; header path module > class > function.

The language comes from the file suffix (``filetypes.CODE_LANGUAGES``).

- **Python** is parsed with ``ast``: each top-level function or class (decorators included) is one
  chunk if it fits ``chunk_size``; a class that does not fit is replaced by its own code between
  methods plus one chunk per method; a function that does not fit is split by the recursive splitter
  (its pieces keep its header path). Code between definitions (imports, constants) is merged into
  chunks of at most ``chunk_size``. A file that does not parse, or is over ``MAX_PARSED_CHARS``, is treated like
  the other languages.
- **Other languages**: a definition line (``class``, ``func``, ``fn``, ``function``, ``public ...``;
  LangChain's per-language separators, from ``RecursiveCharacterTextSplitter.get_separators_for_language``)
  starts a new piece; pieces that do not fit are split by the recursive splitter; consecutive pieces
  are merged while they fit, so a definition that fits is never cut. LangChain's splitter itself is not
  used: it returns no offsets and only cuts at top-level (unindented) definitions, so methods in a
  class could not be separated. The header path of such a chunk names the first definition in it and
  the nearest enclosing class-like declaration (by indentation): a heuristic, not a parser.
  SQL and shell have no LangChain separators; theirs are here (statements, functions).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from pathlib import PurePath
from typing import ClassVar

from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.code_lines import Definition
from rag_service.ingest.code_python import python_definitions
from rag_service.ingest.filetypes import language_for
from rag_service.ingest.recursive import SizedChunker, recursive_pieces
from rag_service.ingest.spans import Piece, Span, make_chunk, merge_pieces, trim_lines
from rag_service.ingest.strategies import DEFAULT_MIN_CHUNK_CHARS

#: a larger Python file is split as the other languages are: ``ast`` holds 150-230 bytes per character of a module
#: (a generated 10 MB ``_pb2.py`` took 1.9 GB), and hand-written modules stay far below this (the largest are ~500 KB)
MAX_PARSED_CHARS = 1_000_000
#: code this short (stripped) before a class's first method, or after its last, goes with that method's chunk
SHORT_CODE_CHARS = 200
#: keywords that start a definition, per language (LangChain's separators minus control flow)
_CONTROL = frozenset({"if", "for", "while", "switch", "case", "default", "else", "return", "continue", "break",
                      "try", "throw", "finally", "catch", "foreach", "do", "loop", "match", "when", "unless",
                      "begin", "rescue", "let", "var", "val", "const"})  # fmt: skip
_LANGCHAIN_NAMES = {
    "js": "JS", "ts": "TS", "go": "GO", "java": "JAVA", "rust": "RUST", "c": "C", "cpp": "CPP",
    "csharp": "CSHARP", "ruby": "RUBY", "php": "PHP", "kotlin": "KOTLIN", "swift": "SWIFT", "scala": "SCALA",
    "python": "PYTHON", "proto": "PROTO", "lua": "LUA", "elixir": "ELIXIR", "powershell": "POWERSHELL", "sol": "SOL",
}  # fmt: skip
_OWN_KEYWORDS = {
    "sql": ("create", "alter", "drop", "insert", "update", "delete", "select", "with", "grant", "comment"),
    "shell": ("function",),
}
_CLASS_WORDS = "class|interface|struct|enum|trait|impl|object|namespace|module"
_CLASS_LIKE_FORM = r"^([ \t]*)(?:[\w@\[\]()\"',.=]+[ \t]+)*?(?:{words})[ \t]+([A-Za-z_$][\w$]*)"
_CLASS_LIKE = re.compile(_CLASS_LIKE_FORM.format(words=_CLASS_WORDS), re.MULTILINE)
#: a language whose declarations have words of their own (a proto file's messages and services)
_CLASS_LIKE_BY_LANGUAGE = {
    "proto": re.compile(_CLASS_LIKE_FORM.format(words="message|service|enum|oneof|extend"), re.MULTILINE)
}
_FUNCTION_NAME = re.compile(
    r"\b(?:def|func|function|fn|fun|sub|procedure)[ \t]+(?:\([^)]*\)[ \t]*)?([A-Za-z_$][\w$]*(?:[.:][A-Za-z_$][\w$]*)*)"
    r"|\b(?:table|view|index|trigger|procedure)[ \t]+(?:if[ \t]+not[ \t]+exists[ \t]+)?([\w.\"`]+)"
    # a call-like line names a definition only from a whole word: without (?<![\w$]) ``if (`` gave ``f``
    r"|(?<![\w$])(?!(?:if|for|while|switch|catch|return|new|else|function)\b)([A-Za-z_$][\w$]*)"
    r"[ \t]*\([^;{}]*\)[ \t]*(?:->[^{]*|:[^{=]*|throws[^{]*|const[ \t]*)?\{?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_SHELL_FUNCTION = r"|^[ \t]*[A-Za-z_][\w-]*[ \t]*\(\)[ \t]*\{"
#: a method or function signature line ending in ``{`` (``method1(b) {``, ``public int size() {``)
_SIGNATURE = (
    r"|^[ \t]*(?!(?:if|for|while|switch|catch|else|do|try|return|new)\b)(?:[\w<>\[\],.*&?@:]+[ \t]+)*"
    r"[A-Za-z_$][\w$]*[ \t]*(?:<[^>\n]*>)?\([^;\n]*\)[^;{\n]*\{[ \t]*$"
)
_BRACE_LANGUAGES = frozenset(
    {"js", "ts", "go", "java", "rust", "c", "cpp", "csharp", "php", "kotlin", "swift", "scala"}
)


def definition_keywords(language: str) -> tuple[str, ...]:
    """The words that start a definition line in ``language`` (empty for unknown languages)."""
    if language in _OWN_KEYWORDS:
        return _OWN_KEYWORDS[language]
    name = _LANGCHAIN_NAMES.get(language)
    if name is None:
        return ()
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    separators = RecursiveCharacterTextSplitter.get_separators_for_language(Language[name])
    words = [s.strip() for s in separators if s.startswith("\n") and s.strip()]
    return tuple(w for w in words if w not in _CONTROL)


def _definition_pattern(language: str) -> re.Pattern[str] | None:
    words = definition_keywords(language)
    if not words:
        return None
    flags = re.MULTILINE | (re.IGNORECASE if language == "sql" else 0)
    extra = _SHELL_FUNCTION if language == "shell" else _SIGNATURE if language in _BRACE_LANGUAGES else ""
    return re.compile(r"^[ \t]*(?:" + "|".join(re.escape(w) for w in words) + r")\b" + extra, flags)


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
        self.module = PurePath(source).stem if source else ""

    def split(self, text: str) -> ChunkedDocument:
        """Chunk ``text`` by definitions with exact offsets (see the module doc)."""
        if not text.strip():
            return ChunkedDocument([], {})
        definitions = None
        if self.language == "python" and len(text) <= MAX_PARSED_CHARS:
            definitions = python_definitions(text)
        if definitions is None:
            units = self._generic_units(text)
        else:
            units = []
            self._walk(text, definitions, (0, len(text)), (), units, inside=False)
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
    ) -> None:
        """Chunks of ``span`` holding ``definitions``: each whole where it fits (from its lead, else from its own
        start), else its children walked, else split; the code between them as ``_plain``. ``inside`` a
        definition (a class), short code before a child (the class line, a docstring, short attributes) goes
        with it, and short code after the last one (a closing brace) too, so no tiny chunk stands alone."""
        cursor, end = span
        last: int | None = None  # the unit of the last definition, when it is whole
        for node in definitions:
            joined = [cursor] if inside and self._short(text, cursor, node.lead) else []
            candidates = [*joined, max(node.lead, cursor), max(node.start, cursor)]
            begin = next((c for c in candidates if self._fits(text, c, node.end)), candidates[0])
            self._plain(text, cursor, begin, names, units)
            path = (*names, *node.names)
            last = None
            if self._fits(text, begin, node.end):
                units.append(((begin, node.end), path))
                last = len(units) - 1
            elif node.children:
                self._walk(text, node.children, (begin, node.end), path, units, inside=True)
            else:
                self._plain(text, begin, node.end, path, units)
            cursor = max(cursor, node.end)
        if inside and last is not None and self._short(text, cursor, end) and self._fits(text, units[last][0][0], end):
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

    # -- other languages -----------------------------------------------------------------------------

    def _generic_units(self, text: str) -> list[tuple[Span, tuple[str, ...]]]:
        pattern = _definition_pattern(self.language)
        cuts = sorted({0, *(m.start() for m in pattern.finditer(text))} if pattern else {0})
        pieces: list[Piece] = []
        for start, end in zip(cuts, [*cuts[1:], len(text)], strict=True):
            if end - start <= self.chunk_size:
                pieces.append((start, end, end - start))
            else:
                pieces.extend(
                    recursive_pieces(text, start, end, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap)
                )
        class_like = _CLASS_LIKE_BY_LANGUAGE.get(self.language, _CLASS_LIKE)
        classes = [(m.start(), len(m[1].expandtabs(4)), m[2]) for m in class_like.finditer(text)]
        class_starts = [c[0] for c in classes]
        units: list[tuple[Span, tuple[str, ...]]] = []
        for start, end in merge_pieces(pieces, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap):
            units.append(((start, end), self._names(text, start, end, class_like, classes, class_starts)))
        return units

    @staticmethod
    def _names(
        text: str,
        start: int,
        end: int,
        class_like: re.Pattern[str],
        classes: list[tuple[int, int, str]],
        class_starts: list[int],
    ) -> tuple[str, ...]:
        """Enclosing class (nearest earlier less-indented declaration) and the first definition in the span."""
        body = text[start:end]
        stripped = body.lstrip()
        first = start + len(body) - len(stripped)
        indent = first - (text.rfind("\n", 0, first) + 1)
        names: list[str] = []
        i = bisect_right(class_starts, first) - 1
        while i >= 0:
            if classes[i][1] < indent:
                names.append(classes[i][2])
                break
            i -= 1
        own = class_like.match(text, text.rfind("\n", 0, first) + 1)
        if own is not None and own.start(2) < end:
            names.append(own[2])
        else:
            match = _FUNCTION_NAME.search("\n".join(stripped.split("\n", 3)[:3]))
            if match is not None:
                names.append(next(g for g in match.groups() if g).strip('"`'))
        return tuple(dict.fromkeys(names))
