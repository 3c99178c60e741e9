"""An indexer's chunking: the chunker of each strategy under its settings, checked once per strategy,
the fingerprint a document chunked so is stored with, and the split itself with its model time apart.

(``chunk.py`` holds the chunk records and the ``Chunker`` interface, ``chunkers.py`` builds one chunker.)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal

from rag_service.config import Settings
from rag_service.db.chunk_text import embedded_text
from rag_service.embed import Embedder
from rag_service.ingest.chunk import ChunkedDocument, TextChunk
from rag_service.ingest.chunkers import configured_sizes, make_chunker
from rag_service.ingest.filetypes import CONVERTED_SUFFIXES, PAGED_SUFFIXES
from rag_service.ingest.fingerprint import chunker_fingerprint, document_fingerprint
from rag_service.ingest.formats.pdftext import with_pages
from rag_service.ingest.window_fit import WHOLE_STRATEGIES, fit_to_window
from rag_service.lines import END_LINE, START_LINE, newline_offsets, span_lines
from rag_service.model_window import UNREADABLE_SHARE, ModelWindow, model_window

if TYPE_CHECKING:
    import numpy as np


class Chunking:
    """Chunks documents as ``settings`` say, with ``embedder`` for the ``semantic`` strategy."""

    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        self.settings = settings
        self.embedder = embedder
        self._fingerprints: dict[str, str] = {}  # per strategy: asked once per file, unchanged files too
        self._model_window: ModelWindow | Literal[False] | None = False  # False: not read yet

    def check(self, strategy: str) -> None:
        """Raise ChunkingError when ``strategy`` cannot chunk under these settings (checked once)."""
        self._chunker_fingerprint(strategy)

    def fingerprint(self, strategy: str, metadata: dict[str, Any]) -> str:
        """The fingerprint stored with a document chunked by ``strategy`` carrying ``metadata``."""
        return document_fingerprint(self._chunker_fingerprint(strategy), self.settings, metadata)

    def split(self, strategy: str, text: str, source: str, title: str = "") -> tuple[ChunkedDocument, float]:
        """The document's chunks, each within what the embedding model reads (``window_fit``; ``title`` is embedded
        before each), and the seconds the model spent inside chunking (``semantic`` only)."""
        model = _TimedEmbedder(self.embedder)
        size, overlap = self._sizes(strategy)
        chunker = make_chunker(
            strategy,
            chunk_size=size,
            chunk_overlap=overlap,
            source=source,
            embedder=model,
            table_rows=self.settings.table_rows,
        )
        chunked = chunker.split(text)
        window = self._window()
        if window is not None and chunked.chunks and strategy not in WHOLE_STRATEGIES:
            fit_to_window(text, chunked, window, lambda chunk: self._prefix(title, chunk))
        if window is not None and window.unknown is not None and not text.isascii():
            shares = window.unknown([chunk.content for chunk in chunked.chunks])
            chunked.unreadable = sum(share >= UNREADABLE_SHARE for share in shares)
        if PurePath(source).suffix.lower() in PAGED_SUFFIXES:
            chunked.chunks = with_pages(text, chunked.chunks)
        if PurePath(source).suffix.lower() not in CONVERTED_SUFFIXES:
            chunked.chunks = with_lines(text, chunked.chunks)
        return chunked, model.seconds

    def _window(self) -> ModelWindow | None:
        """The embedding model's window, read once (None: the model has none, e.g. the tests' hashing one)."""
        if self._model_window is False:
            self._model_window = model_window(self.embedder)
        return self._model_window

    def _prefix(self, title: str, chunk: TextChunk) -> str:
        """What is embedded before ``chunk``'s text (``db.chunk_text.embedded_text``)."""
        if not self.settings.embed_headers:
            return ""
        return embedded_text(title, chunk.header_path, "", chunk.lead)

    def _sizes(self, strategy: str) -> tuple[int | None, int | None]:
        return configured_sizes(
            strategy, chunk_size=self.settings.chunk_size, chunk_overlap=self.settings.chunk_overlap
        )

    def _chunker_fingerprint(self, strategy: str) -> str:
        if strategy not in self._fingerprints:
            size, overlap = self._sizes(strategy)
            make_chunker(strategy, chunk_size=size, chunk_overlap=overlap, embedder=self.embedder)  # validates
            self._fingerprints[strategy] = chunker_fingerprint(strategy, chunk_size=size, chunk_overlap=overlap)
        return self._fingerprints[strategy]


def with_lines(text: str, chunks: list[TextChunk]) -> list[TextChunk]:
    """``chunks`` with their first and last line in ``text`` (``lines.START_LINE``/``END_LINE``) in their metadata:
    one pass over the text, then a bisection per chunk, so retrieval reads them and never counts."""
    newlines = newline_offsets(text)
    out: list[TextChunk] = []
    for chunk in chunks:
        first, last = span_lines(newlines, chunk.start_char, chunk.end_char)
        out.append(dataclasses.replace(chunk, metadata={**chunk.metadata, START_LINE: first, END_LINE: last}))
    return out


class _TimedEmbedder:
    """The embedder as a chunker sees it, timed: the ``semantic`` strategy's sentence vectors are model
    time, so the report counts them as embedding, and chunking stays the splitting itself."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.model_id = inner.model_id
        self.dim = inner.dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started

    def embed_query(self, text: str) -> np.ndarray[Any, Any]:
        return self.inner.embed_query(text)
