"""Code blocks in the LLM context (``format.py``): a code result's text fenced with its language and cited by its
lines (``src/app.py:L120-145``), and a prose passage's open fence closed.

A code or configuration file (``languages.fence_language``) is shown in a fence of its language, one backtick
longer than any fence inside it, so nothing in the code ends it early; its citation names the lines the shown text
spans, where the chunk's lines are known. Shown text drops a chunk's leading blank lines and trailing whitespace; code
keeps its first line's indentation (a chunk starting inside a method stays aligned), prose is stripped.
"""

from __future__ import annotations

import re

from rag_service.languages import fence_language, markup_of
from rag_service.lines import lines_before, span_end_line
from rag_service.result import RetrievedChunk

#: a fenced code block's fence line (CommonMark: up to 3 spaces, then 3+ backticks or tildes)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.MULTILINE)


def clean(text: str) -> str:
    """``text`` as valid UTF-8 (lone surrogates replaced)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


def closed_fences(body: str) -> str:
    """``body`` with the code block it leaves open closed on a line of its own. A passage cut out of a document (a
    chunk, a window, the budget's cut) can open a fence it does not close; the section, citation and marker lines
    after it were then read as code."""
    opened: str | None = None
    for fence, rest in FENCE.findall(body):
        if opened is None:
            opened = fence
        elif fence[0] == opened[0] and len(fence) >= len(opened) and not rest.strip():
            opened = None
    return body if opened is None else f"{body}\n{opened}"


def fenced(body: str, language: str) -> str:
    """``body`` in a backtick fence of ``language``, longer than any backtick fence line inside it."""
    inner = max((len(f) for f, _ in FENCE.findall(body) if f[0] == "`"), default=2)
    ticks = "`" * max(3, inner + 1)
    return f"{ticks}{language}\n{body}\n{ticks}"


def shown_start(chunk: RetrievedChunk) -> int:
    """Where the shown text starts in ``chunk.content``: its first non-blank character, or for code the start of
    that character's line (its indentation kept)."""
    first = len(chunk.content) - len(chunk.content.lstrip())
    return first if fence_language(chunk.source) is None else chunk.content.rfind("\n", 0, first) + 1


def shown_text(chunk: RetrievedChunk) -> str:
    """The chunk's text as its block shows it, before any fence: valid UTF-8 (as long as ``content``), from
    ``shown_start``, trailing whitespace dropped."""
    return clean(chunk.content)[shown_start(chunk) :].rstrip()


def shown_body(chunk: RetrievedChunk) -> str:
    """The text a chunk's block shows: ``shown_text``, code fenced with its language, prose's fences closed."""
    body = shown_text(chunk)
    language = fence_language(chunk.source)
    return closes_fences(chunk, body) if language is None else fenced(body, language)


def closes_fences(chunk: RetrievedChunk, body: str) -> str:
    """``closed_fences(body)`` for a markdown-like source; a reStructuredText or AsciiDoc one's as it is: a ``~~~~``
    title underline read as an open fence got a stray closing line (audit 59b)."""
    return closed_fences(body) if markup_of(chunk.source) is None else body


def opener_chars(chunk: RetrievedChunk) -> int:
    """Characters ``shown_body`` puts before the chunk's text (its fence line), 0 for prose."""
    return len(shown_body(chunk).partition("\n")[0]) + 1 if fence_language(chunk.source) else 0


def shown_lines(chunk: RetrievedChunk) -> tuple[int, int] | None:
    """First and last line of the chunk's text as shown, None when its lines are unknown."""
    if chunk.start_line is None:
        return None
    start = shown_start(chunk)
    first = chunk.start_line + lines_before(chunk.content, start)
    return first, span_end_line(first, chunk.content[start:].rstrip())


def pages_cited(chunk: RetrievedChunk) -> str | None:
    """``p. 3`` / ``pp. 3-4`` for a PDF's chunk, ``slide 3`` / ``slides 2-3`` for a deck's (its stored
    ``page_start``/``page_end``), else None: two slides of one title were told apart only in the JSON (audit 59b)."""
    first, last = chunk.metadata.get("page_start"), chunk.metadata.get("page_end")
    if not isinstance(first, int) or not isinstance(last, int):
        return None
    slides = chunk.source.lower().endswith(".pptx")
    if first == last:
        return f"slide {first}" if slides else f"p. {first}"
    return f"slides {first}-{last}" if slides else f"pp. {first}-{last}"


def citation(chunk: RetrievedChunk) -> str | None:
    """``path:L120-145`` (``path:L12`` for one line, ``path`` when the lines are unknown) for a code result, None
    for prose."""
    if fence_language(chunk.source) is None:
        return None
    path = " ".join(clean(chunk.source).split())
    lines = shown_lines(chunk)
    if lines is None:
        return path
    return f"{path}:L{lines[0]}" if lines[0] == lines[1] else f"{path}:L{lines[0]}-{lines[1]}"
