"""The peers' chunks of a documentation set: LangChain header split, then recursive 500/100, with file offsets.

``MarkdownHeaderTextSplitter`` (h1-h4) drops the header lines, strips every line and joins the lines
of a section with ``"  \\n"`` or ``"\\n"``, so a chunk's text is rarely a verbatim slice of the file.
Its start offset is found verbatim if it can be, else by matching with all whitespace removed from
both the file and the chunk (tabs inside log lines get lost too): first from a cursor that moves
with the previous chunk (chunks come in file order), then from the start of the file. Chunks that
still cannot be found are counted and left out of the corpus (their section is unknown).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

HEADERS = (("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4"))
CHUNK_SIZE = 500
CHUNK_OVERLAP = 100
MIN_CHARS = 50
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class DocChunk:
    """One peer chunk: its ``docs/``-relative file, start offset in the file's text, and text."""

    file: str
    start: int
    text: str


@dataclass(slots=True)
class ChunkStats:
    """How the chunks were located: verbatim, after collapsing whitespace, from the start, or not at all."""

    files: int = 0
    chunks: int = 0
    dropped_short: int = 0
    verbatim: int = 0
    collapsed: int = 0
    from_start: int = 0
    unlocated: int = 0
    unlocated_examples: list[str] = field(default_factory=list)


class _Collapsed:
    """A text without its whitespace, and each remaining character's offset in the original."""

    __slots__ = ("offsets", "text")

    def __init__(self, original: str) -> None:
        self.offsets = [i for i, char in enumerate(original) if not char.isspace()]
        self.text = "".join(original[i] for i in self.offsets)


def collapse(text: str) -> str:
    """``text`` without whitespace."""
    return _WHITESPACE.sub("", text)


def locate(text: str, chunk: str, cursor: int, collapsed: _Collapsed) -> tuple[int, str]:
    """Start of ``chunk`` in ``text`` and how it was found (``verbatim``, ``collapsed``, ``from_start``, ``unlocated``).

    ``cursor`` is an offset in ``text``; the search starts there and falls back to the whole text.
    """
    position = text.find(chunk, cursor)
    if position >= 0:
        return position, "verbatim"
    needle = collapse(chunk)
    collapsed_cursor = _collapsed_index(collapsed, cursor)
    position = collapsed.text.find(needle, collapsed_cursor)
    if position >= 0:
        return collapsed.offsets[position], "collapsed"
    position = collapsed.text.find(needle)
    if position >= 0:
        return collapsed.offsets[position], "from_start"
    return -1, "unlocated"


def _collapsed_index(collapsed: _Collapsed, offset: int) -> int:
    """The first collapsed position whose original offset is ``>= offset``."""
    return bisect_left(collapsed.offsets, offset)


def header_chunks(texts: Mapping[str, str]) -> tuple[list[DocChunk], ChunkStats]:
    """The peers' chunks of every file (name -> text), in file order, each with its start offset."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    header_splitter = MarkdownHeaderTextSplitter(list(HEADERS))
    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    stats = ChunkStats()
    chunks: list[DocChunk] = []
    for name, text in texts.items():
        stats.files += 1
        collapsed = _Collapsed(text)
        cursor = 0
        for piece in splitter.split_documents(header_splitter.split_text(text)):
            content = piece.page_content
            if len(content) < MIN_CHARS:
                stats.dropped_short += 1
                continue
            start, how = locate(text, content, cursor, collapsed)
            setattr(stats, how, getattr(stats, how) + 1)
            if start < 0:
                if len(stats.unlocated_examples) < 5:
                    stats.unlocated_examples.append(f"{name}: {content[:80]!r}")
                continue
            cursor = start + 1
            chunks.append(DocChunk(name, start, content))
    stats.chunks = len(chunks)
    return chunks, stats


def read_texts(files: Mapping[str, Path]) -> dict[str, str]:
    """Each file's text as the evaluation reads it (UTF-8, newlines as stored)."""
    return {name: path.read_text(encoding="utf-8") for name, path in files.items()}
