"""The values ``retrieve`` returns: chunks with their scores, sources, metrics and the whole result.

Every record has a JSON-ready ``to_dict`` (``ChunkScores.as_dict``) with a stable key order, so
``json.dumps(result.to_dict())`` is the CLI's ``--json`` output and a stable artefact for tests.
Embeddings travel on chunks for MMR but never appear in ``to_dict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_service.lines import END_LINE, START_LINE

#: ``RetrievalMetrics.reranker`` when no reranker ran
NO_RERANKER = "none"


@dataclass(slots=True)
class ChunkScores:
    """Per-stage scores of one chunk; ``None`` where the stage did not score it.

    ``vector`` is the cosine similarity, ``keyword`` the full-text rank, ``fused`` the hybrid fusion
    score (RRF or linear), ``rerank`` the reranker's score and ``llm`` the LLM's relevance rating (0..1).
    """

    vector: float | None = None
    keyword: float | None = None
    fused: float | None = None
    rerank: float | None = None
    llm: float | None = None
    #: the graph walk's score scaled to 0..1 (``graph_weight`` > 0 only)
    graph: float | None = None
    #: the chunk's own calibrated relevance from its similarity to the query (``retrieve/relevance.py``)
    calibrated: float | None = None
    #: the BM25 of the chunk's context, its section or document (``retrieve/context.py``)
    context: float | None = None
    #: how close together the query's words stand in the chunk (a section: its best child's; ``db.proximity``)
    proximity: float | None = None
    #: the query's cosine with the mean vector of the chunk's context, its section or document (``db.context_vector``)
    context_similarity: float | None = None

    def as_dict(self) -> dict[str, float]:
        """The scores that are set, in the order vector, keyword, fused, context, proximity, context_similarity,
        graph, rerank, llm, calibrated."""
        pairs = (
            ("vector", self.vector),
            ("keyword", self.keyword),
            ("fused", self.fused),
            ("context", self.context),
            ("proximity", self.proximity),
            ("context_similarity", self.context_similarity),
            ("graph", self.graph),
            ("rerank", self.rerank),
            ("llm", self.llm),
            ("calibrated", self.calibrated),
        )
        return {name: float(value) for name, value in pairs if value is not None}


@dataclass(slots=True)
class RetrievedChunk:
    """One retrieved chunk with where it comes from and how it scored.

    ``start_char``/``end_char`` are offsets into the source document's text (a parent's span when the
    result was expanded to its parent); ``match_start``/``match_end`` are the span of the child chunk
    that matched (equal to ``start_char``/``end_char`` when not expanded; -1 when unset, then
    ``__post_init__`` copies ``start_char``/``end_char``). ``relevance_score`` is in 0..1 (the final
    stage's score, normalised). ``embedding`` is kept for MMR only: it is excluded from
    ``to_dict``, ``repr`` and equality, as is ``parent`` (the enclosing section, used to return parents).
    """

    chunk_id: int
    document_id: int
    source: str
    content: str
    headers: dict[str, str]
    header_path: str
    start_char: int
    end_char: int
    relevance_score: float
    scores: ChunkScores
    collection: str
    chunk_type: str
    title: str = ""
    content_hash: str = ""
    embedding: npt.NDArray[np.floating[Any]] | None = field(default=None, repr=False, compare=False)
    is_parent: bool = False
    #: ``(parent_content, parent_start, parent_end)`` of a markdown child, for parent expansion
    parent: tuple[str, int, int] | None = field(default=None, repr=False, compare=False)
    match_start: int = -1
    match_end: int = -1
    #: the chunk's stored metadata: ``keywords`` (its most distinctive terms), ``page_start``/``page_end``
    metadata: dict[str, Any] = field(default_factory=dict)
    #: its document's ``metadata.summary`` ("" when none)
    summary: str = ""
    #: 1-based first and last line (inclusive) of ``start_char``/``end_char`` and of ``match_start``/``match_end``
    #: in the source document's text; None (unknown) for chunks stored before lines were (``rag_service.lines``)
    #: and for documents whose text was extracted (PDF, Word, HTML, notebooks). Taken out of the stored metadata.
    start_line: int | None = None
    end_line: int | None = None
    match_start_line: int | None = None
    match_end_line: int | None = None
    #: its document's chunker fingerprint (``code:...``: ``retrieve.definitions``); not part of ``to_dict``
    chunker: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        unset = self.match_start < 0 or self.match_end < 0
        if unset:
            self.match_start, self.match_end = self.start_char, self.end_char
        if START_LINE in self.metadata or END_LINE in self.metadata:  # stored at ingest: the chunk's own span
            lines = self.metadata
            self.metadata = {k: v for k, v in lines.items() if k not in (START_LINE, END_LINE)}
            if self.start_line is None:
                self.start_line, self.end_line = lines.get(START_LINE), lines.get(END_LINE)
        whole = (self.match_start, self.match_end) == (self.start_char, self.end_char)
        if self.match_start_line is None and (unset or whole):
            self.match_start_line, self.match_end_line = self.start_line, self.end_line

    def to_dict(self, *, summary: bool = True) -> dict[str, Any]:
        """JSON-ready dict in a fixed key order; without the embedding (and without ``summary`` when False)."""
        data = {
            "chunk_id": int(self.chunk_id),
            "document_id": int(self.document_id),
            "collection": self.collection,
            "source": self.source,
            "title": self.title,
            "chunk_type": self.chunk_type,
            "is_parent": self.is_parent,
            "header_path": self.header_path,
            "headers": dict(self.headers),
            "start_char": int(self.start_char),
            "end_char": int(self.end_char),
            "match_start": int(self.match_start),
            "match_end": int(self.match_end),
            "start_line": self.start_line,
            "end_line": self.end_line,
            "match_start_line": self.match_start_line,
            "match_end_line": self.match_end_line,
            "relevance_score": float(self.relevance_score),
            "scores": self.scores.as_dict(),
            "content_hash": self.content_hash,
            "metadata": dict(self.metadata),
            "summary": self.summary,
            "content": self.content,
        }
        if not summary:
            del data["summary"]
        return data


@dataclass(slots=True)
class RetrievalMetrics:
    """Timings (milliseconds) and counts of one ``retrieve`` call.

    ``reranker`` names what actually ran (``"none"``, ``"cross-encoder:<model>"``,
    ``"flashrank:<model>"``). ``degraded`` lists stages that could not run as configured, each as
    ``"<stage>: <reason>"``; it is empty when every stage ran. ``total_candidates`` counts what the reranker (or
    the order of the fusion) ranks, the graph walk's ``graph_added`` included, so ``after_rerank`` never exceeds it.
    """

    embedding_time_ms: float = 0.0
    retrieval_time_ms: float = 0.0
    rerank_time_ms: float = 0.0
    total_time_ms: float = 0.0
    total_candidates: int = 0
    after_rerank: int = 0
    reranker: str = NO_RERANKER
    degraded: list[str] = field(default_factory=list)
    expansion_time_ms: float = 0.0
    mmr_time_ms: float = 0.0
    parents_time_ms: float = 0.0
    format_time_ms: float = 0.0
    query_variants: int = 1
    #: where the search read ran: ``primary`` or ``replica N`` (``RAG_READ_DATABASE_URL``, from 1)
    read_from: str = "primary"
    #: time of the LLM rerank call (``RAG_LLM_RERANK``), 0 when it did not run
    llm_time_ms: float = 0.0
    #: the graph walk (``graph_weight`` > 0): its time, and how many of the candidates it brought in
    graph_time_ms: float = 0.0
    graph_added: int = 0
    #: results dropped by the preset's ``min_relevance`` (all of them when the first is below it, else those
    #: below 0.4 of it, ``retrieve/relevance.py``); with no chunk left, the
    #: formatted context is the one line "no relevant passages for ..."
    filtered_below_relevance: int = 0
    #: what ``relevance_score`` is: ``calibrated`` (from the embedding model's similarities,
    #: ``retrieve/relevance.py``), ``reranker`` (the cross-encoder's or the LLM's), or ``uncalibrated``
    #: (the rank-normalised fused score of a model without a calibration; ``min_relevance`` not applied)
    relevance: str = "uncalibrated"
    #: the knobs the call ran with: its preset's values with the call's overrides (``{}`` before the preset was read)
    settings: dict[str, Any] = field(default_factory=dict)

    def degrade(self, stage: str, reason: str) -> None:
        """Record that ``stage`` did not run as configured, and why (one line)."""
        self.degraded.append(f"{stage}: {' '.join(reason.split())}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in a fixed key order."""
        return {
            "embedding_time_ms": float(self.embedding_time_ms),
            "retrieval_time_ms": float(self.retrieval_time_ms),
            "rerank_time_ms": float(self.rerank_time_ms),
            "expansion_time_ms": float(self.expansion_time_ms),
            "mmr_time_ms": float(self.mmr_time_ms),
            "parents_time_ms": float(self.parents_time_ms),
            "format_time_ms": float(self.format_time_ms),
            "llm_time_ms": float(self.llm_time_ms),
            "graph_time_ms": float(self.graph_time_ms),
            "total_time_ms": float(self.total_time_ms),
            "total_candidates": int(self.total_candidates),
            "after_rerank": int(self.after_rerank),
            "query_variants": int(self.query_variants),
            "graph_added": int(self.graph_added),
            "filtered_below_relevance": int(self.filtered_below_relevance),
            "relevance": self.relevance,
            "reranker": self.reranker,
            "read_from": self.read_from,
            "degraded": list(self.degraded),
            "settings": dict(self.settings),
        }


@dataclass(slots=True)
class Source:
    """One cited source: ``[number]`` in the formatted context refers to it."""

    number: int
    source: str
    title: str
    chunk_ids: list[int]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in a fixed key order."""
        return {
            "number": int(self.number),
            "source": self.source,
            "title": self.title,
            "chunk_ids": [int(i) for i in self.chunk_ids],
        }


@dataclass(slots=True)
class RAGResult:
    """What ``retrieve`` returns: the chunks, the LLM-ready context, its sources and the metrics."""

    chunks: list[RetrievedChunk]
    formatted_context: str
    total_tokens: int
    sources: list[Source]
    query: str
    context_type: str
    metrics: RetrievalMetrics

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in a fixed key order (``json.dumps`` works on it as is).

        A document's summary is given once, in ``documents`` (one entry per document of the chunks, in
        the chunks' order: ``document_id``, ``source``, ``title``, ``summary``), not on each of its chunks.
        """
        return {
            "query": self.query,
            "context_type": self.context_type,
            "total_tokens": int(self.total_tokens),
            "chunks": [chunk.to_dict(summary=False) for chunk in self.chunks],
            "documents": self.documents(),
            "sources": [source.to_dict() for source in self.sources],
            "formatted_context": self.formatted_context,
            "metrics": self.metrics.to_dict(),
        }

    def documents(self) -> list[dict[str, Any]]:
        """Each document of the chunks once, in their order: ``document_id``, ``source``, ``title``, ``summary``."""
        seen: dict[tuple[str, int], dict[str, Any]] = {}
        for chunk in self.chunks:
            key = (chunk.collection, int(chunk.document_id))
            if key not in seen:
                seen[key] = {
                    "document_id": int(chunk.document_id),
                    "source": chunk.source,
                    "title": chunk.title,
                    "summary": chunk.summary,
                }
        return list(seen.values())
