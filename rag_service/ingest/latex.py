"""The ``latex`` strategy: sectioning commands as headers; math environments never split.

``\\part``, ``\\chapter``, ``\\section``, ``\\subsection``, ``\\subsubsection`` and ``\\paragraph``
(starred or not) at the start of a line open sections; the levels present are numbered from ``h1``
down, so a paper's ``\\section`` is ``h1``; header text is plain words (``plain_latex``: no ``\\label{}``, no
``\\textit`` around a word). Each section is split by the recursive splitter, then
every run of pieces that overlaps a math environment (``equation``, ``align``, ``gather``,
``multline``, ``eqnarray``, ``displaymath``, ``math`` and their starred forms, ``\\[ \\]``, ``$$ $$``)
is joined into one piece, so a chunk boundary never falls inside one (a math environment longer than
``chunk_size`` is a chunk of its own).

LangChain's LaTeX separators are not used: in ``langchain-text-splitters`` 1.x they mix
regex-escaped entries (``"\\n\\\\\\\\section{"``) with literal ones (``"$$"``), so they match
correctly neither as literals nor as patterns, and they know nothing of math environments.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import ClassVar

from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.garbage import DocumentLines, empty_counts, filter_spans
from rag_service.ingest.recursive import SizedChunker, recursive_pieces
from rag_service.ingest.spans import Piece, Span, make_chunk, merge_pieces, trim_span

_COMMANDS = ("part", "chapter", "section", "subsection", "subsubsection", "paragraph")
_SECTION = re.compile(r"^[ \t]*\\(" + "|".join(_COMMANDS) + r")\*?[ \t]*(?:\[[^\]\n]*\])?[ \t]*\{", re.MULTILINE)
_MATH_ENVS = "equation|align|alignat|flalign|gather|multline|eqnarray|displaymath|math"
#: what opens math (``\\begin{equation}``, ``\\[``, ``$$``), and ``\\\\`` taken as one token: the ``[`` of a row break
#: ``\\\\[2pt]`` opens nothing (it used to open display math up to the file's next ``\\]``)
_MATH_OPEN = re.compile(r"\\\\|\\begin\{(" + _MATH_ENVS + r")(\*?)\}|\\\[|\$\$")

#: a title or section name is at most this long (an unclosed brace made the rest of the document one)
MAX_TITLE_CHARS = 2_000
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)
_TITLE = re.compile(r"\\title\s*(?:\[[^\]]*\])?\s*\{")
#: a comment: ``%`` not escaped (preceded by an even number of backslashes) to the end of its line
_COMMENT = re.compile(r"(?<!\\)((?:\\\\)*)%[^\n]*")
#: a command whose argument is not text (group 1), or a text-formatting one whose argument is the text
_FORMATTING = re.compile(
    r"\\(?:(label|index|thanks|footnote|footnotemark|ref|cite)|emph|underline|mbox|hbox"
    r"|text(?:it|bf|tt|sc|sf|rm|up|sl|md|normal)?|math(?:rm|bf|it|sf|tt))\*?[ \t]*(?:\[[^\]]*\])?[ \t]*\{"
)
_SPACING = re.compile(r"\\\\(?:\[[^\]]*\])?|(?<!\\)~")
_ESCAPED = re.compile(r"\\([&%$#_{}])")


def math_spans(text: str) -> list[Span]:
    """Spans of the math environments of ``text``, in order, not overlapping: each opener to its first closer.

    Linear: a closer not found after one opener is not looked for again (a regex with ``.*?`` scanned from every
    unclosed opener to the end of the text: 532 KB of ``\\\\[2pt]`` rows took 75 s)."""
    spans: list[Span] = []
    missing: set[str] = set()
    pos = 0
    while (opener := _MATH_OPEN.search(text, pos)) is not None:
        pos = opener.end()
        if opener[0] == "\\\\":
            continue
        closer = "\\]" if opener[0] == "\\[" else "$$" if opener[0] == "$$" else f"\\end{{{opener[1]}{opener[2]}}}"
        if closer in missing:
            continue
        found = text.find(closer, pos)
        if found < 0:
            missing.add(closer)
            continue
        pos = found + len(closer)
        spans.append((opener.start(), pos))
    return spans


def _title_argument(text: str, open_brace: int, stop: int) -> str:
    """The braced argument of a title or section name at ``open_brace``; ``""`` when it is not closed before ``stop``,
    a blank line or ``MAX_TITLE_CHARS`` (LaTeX ends it at a paragraph; the rest of a file is no title)."""
    stop = min(stop, open_brace + MAX_TITLE_CHARS)
    if (blank := _BLANK_LINE.search(text, open_brace, stop)) is not None:
        stop = blank.start()
    close = _brace_pairs(text, open_brace, stop).get(open_brace)
    return "" if close is None else text[open_brace + 1 : close]


def _brace_pairs(text: str, start: int = 0, stop: int | None = None) -> dict[int, int]:
    """Where each brace opened in ``text[start:stop]`` closes, for those that close there (a backslash escapes the
    next character)."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    for token in _BRACE_TOKEN.finditer(text, start, len(text) if stop is None else stop):
        if token[0] == "{":
            opened.append(token.start())
        elif token[0] == "}" and opened:
            pairs[opened.pop()] = token.start()
    return pairs


def plain_latex(text: str) -> str:
    """``text`` (a title, a section name) as plain words: ``\\label{}``, ``\\index{}``, ``\\thanks{}`` and
    ``\\footnote{}`` dropped, ``\\emph{}``, ``\\textit{}`` and the other text-formatting commands unwrapped,
    ``\\\\`` and ``~`` read as spaces, escaped specials (``\\&``) unescaped; other commands are kept.

    One pass, nested commands in the arguments unwrapped on the way (it searched again from the start and copied the
    text at each command: quadratic)."""
    pairs = _brace_pairs(text)
    kept: list[str] = []
    closing: list[int] = []  # the closing braces of the arguments being unwrapped, innermost last
    pos = 0
    while True:
        bound = closing[-1] if closing else len(text)
        found = _FORMATTING.search(text, pos, bound)
        if found is None:
            kept.append(text[pos:bound])
            if not closing:
                break
            pos = closing.pop() + 1
            continue
        kept.append(text[pos : found.start()])
        close = pairs.get(found.end() - 1)
        if found[1]:  # not text: dropped (to the end when not closed)
            pos = bound if close is None else close + 1
        else:
            pos = found.end()
            if close is not None:
                closing.append(close)
    text = _SPACING.sub(" ", "".join(kept))
    return " ".join(_ESCAPED.sub(r"\1", text).split())


def without_comments(text: str) -> str:
    """``text`` with every ``%`` comment removed (an escaped ``\\%`` is no comment)."""
    return _COMMENT.sub(r"\1", text)


def latex_title(text: str) -> str:
    """The ``\\title{...}`` of a LaTeX document outside comments, as plain words (``plain_latex``), or ``""``."""
    text = without_comments(text)
    found = _TITLE.search(text)
    return plain_latex(_title_argument(text, found.end() - 1, len(text))) if found else ""


def latex_sections(text: str) -> list[tuple[int, int, dict[str, str]]]:
    """``(start, end, headers)`` of the preamble-and-body text before the first section and each section."""
    commands = list(_SECTION.finditer(text))
    stops = [m.start() for m in commands[1:]] + [len(text)]  # a name ends before the next section: linear
    found = [
        (m.start(), _COMMANDS.index(m[1]), plain_latex(without_comments(_title_argument(text, m.end() - 1, stop))))
        for m, stop in zip(commands, stops, strict=False)
    ]
    levels = sorted({level for _, level, _ in found})
    sections: list[tuple[int, int, dict[str, str]]] = []
    first = found[0][0] if found else len(text)
    if first > 0:
        sections.append((0, first, {}))
    stack: list[tuple[int, str]] = []
    for i, (start, level, title) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(text)
        rank = levels.index(level) + 1
        stack = [(r, t) for r, t in stack if r < rank] + [(rank, title)]
        sections.append((start, end, {f"h{r}": t for r, t in stack if r <= 6}))
    return sections


def join_protected(pieces: list[Piece], protected: list[Span]) -> list[Piece]:
    """Join each run of contiguous pieces that shares characters with one protected span."""
    if not protected:
        return pieces
    starts = [s for s, _ in protected]
    out: list[Piece] = []
    for start, end, size in pieces:
        if out:
            # the piece joins the previous one if a protected span covers the boundary between them
            i = bisect_left(starts, start) - 1
            if i >= 0 and protected[i][0] < start < protected[i][1]:
                previous = out.pop()
                out.append((previous[0], end, previous[2] + size))
                continue
        out.append((start, end, size))
    return out


class LatexChunker(SizedChunker):
    """Chunker for the ``latex`` strategy (``TEXT`` chunks with section headers)."""

    strategy: ClassVar[str] = "latex"

    def split(self, text: str) -> ChunkedDocument:
        """Split each section recursively, never inside math; exact offsets; drop garbage pieces."""
        if not text.strip():
            return ChunkedDocument([], {})
        protected = math_spans(text)
        lines = DocumentLines(text)
        counts = empty_counts()
        chunks: list[TextChunk] = []
        for start, end, headers in latex_sections(text):
            section = trim_span(text, start, end)
            if section is None:
                continue
            pieces = recursive_pieces(
                text, *section, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap, length=self.length
            )
            merged = merge_pieces(
                join_protected(pieces, protected), chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap
            )
            spans = [span for s, e in merged if (span := trim_span(text, s, e)) is not None]
            for span in filter_spans(lines, spans, min_chunk_chars=self.min_chunk_chars, counts=counts):
                chunks.append(make_chunk(text, span, index=len(chunks), chunk_type=TEXT, headers=headers))
        return ChunkedDocument(chunks, counts)
