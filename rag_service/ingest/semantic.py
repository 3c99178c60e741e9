"""The ``semantic`` strategy: break where the meaning changes between neighbouring sentences.

Sentences (``sentence.sentence_spans``) are embedded with the service's embedding model; a breakpoint
falls between two neighbours whose cosine distance is above the ``breakpoint_percentile`` of all
neighbour distances in the document (the method of LangChain's experimental ``SemanticChunker``,
which is not a dependency and returns no offsets). A group longer than ``chunk_size`` is cut further
into whole sentences (or recursive pieces for a sentence that is itself too long). Groups do not
overlap: a breakpoint is a change of topic.

It embeds every sentence once more than the other strategies embed chunks, so it costs several times
their ingestion time; ``auto`` never chooses it.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any, ClassVar

from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import TEXT, ChunkedDocument
from rag_service.ingest.garbage import empty_counts, filter_plain_spans
from rag_service.ingest.recursive import SizedChunker, recursive_pieces
from rag_service.ingest.sentence import sentence_spans
from rag_service.ingest.spans import Piece, Span, make_chunk, merge_pieces, trim_span
from rag_service.ingest.strategies import DEFAULT_MIN_CHUNK_CHARS

if TYPE_CHECKING:
    import numpy as np

    from rag_service.embed import Embedder

#: neighbour distances above this percentile of the document's distances are breakpoints
BREAKPOINT_PERCENTILE = 90.0


def breakpoints(vectors: np.ndarray[Any, Any], *, percentile: float = BREAKPOINT_PERCENTILE) -> list[int]:
    """Indices ``i`` such that a new group starts at sentence ``i`` (unit vectors, one row each)."""
    if len(vectors) < 2:
        return []
    import numpy as np

    distances = 1.0 - np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
    threshold = float(np.percentile(distances, percentile))
    return [i + 1 for i, d in enumerate(distances) if d > threshold]


class SemanticChunker(SizedChunker):
    """Chunker for the ``semantic`` strategy (``TEXT`` chunks); needs the embedding model."""

    strategy: ClassVar[str] = "semantic"

    def __init__(
        self,
        *,
        embedder: Embedder | None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
        percentile: float = BREAKPOINT_PERCENTILE,
    ) -> None:
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, min_chunk_chars=min_chunk_chars)
        if embedder is None:
            raise ChunkingError("the semantic strategy needs an embedding model; pass embedder=")
        if not 0.0 < percentile < 100.0:
            raise ChunkingError(f"percentile ({percentile}) must be between 0 and 100, e.g. 90")
        self.embedder = embedder
        self.percentile = percentile

    def split(self, text: str) -> ChunkedDocument:
        """Group sentences between breakpoints, cut groups to ``chunk_size``; exact offsets."""
        whole = trim_span(text, 0, len(text))
        if whole is None:
            return ChunkedDocument([], {})
        sentences = [s for s in sentence_spans(text, *whole) if text[s[0] : s[1]].strip()]
        vectors = self.embedder.embed_documents([text[s:e] for s, e in sentences])
        import numpy as np

        starts = [0, *breakpoints(np.asarray(vectors), percentile=self.percentile), len(sentences)]
        spans: list[Span] = []
        for first, stop in pairwise(starts):
            pieces: list[Piece] = []
            for start, end in sentences[first:stop]:
                if end - start <= self.chunk_size:
                    pieces.append((start, end, end - start))
                else:
                    pieces.extend(recursive_pieces(text, start, end, chunk_size=self.chunk_size, chunk_overlap=0))
            for s, e in merge_pieces(pieces, chunk_size=self.chunk_size, chunk_overlap=0):
                span = trim_span(text, s, e)
                if span is not None:
                    spans.append(span)
        counts = empty_counts()
        kept = filter_plain_spans(text, spans, min_chunk_chars=self.min_chunk_chars, counts=counts)
        return ChunkedDocument([make_chunk(text, s, index=i, chunk_type=TEXT) for i, s in enumerate(kept)], counts)
