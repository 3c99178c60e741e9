"""What one hybrid search asks for and gets: the request, its validated filters, the rows it returns,
and the SQL conditions the filters become (every value a bound parameter)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, String, bindparam, cast, func, literal, or_, select
from sqlalchemy.dialects.postgresql import JSONB, REGCONFIG

from rag_service.config import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    DEFAULT_BM25_MAX_POSTINGS,
    DEFAULT_CANDIDATE_K,
    DEFAULT_EF_SEARCH,
    DEFAULT_EXACT_SEARCH_BELOW,
    DEFAULT_FTS_CONFIG,
    DEFAULT_FUSION_METHOD,
    DEFAULT_KEYWORD_SCORER,
    DEFAULT_RRF_K,
)
from rag_service.db.models import Document, DocumentChunk
from rag_service.db.source_match import key_spellings
from rag_service.errors import UnknownFilterError, did_you_mean
from rag_service.keyword_text import keyword_text
from rag_service.knobs import MAX_EF_SEARCH

#: up to this many chunks in a collection, the vector arm searches with ``RAG_HNSW_EF_SEARCH`` as set
EF_SEARCH_REFERENCE_CHUNKS = 100_000
#: above it, ef_search grows by ``EF_SEARCH_PER_DECADE`` times the setting per tenfold of chunks: the
#: candidate list a fixed recall needs grows with the graph. On realistic vectors, with the graph built
#: with ef_construction 128 (migration 0012), recall@20 was 0.95-0.97 at 100k with ef 100; at 300k 0.946 with
#: ef 269, 0.951 with 320 and 0.963 with 400; at 1M five builds gave 0.93 / 0.94 / 0.97 with ef 400,
#: 0.96 / 0.97 / 0.99 / 0.957 / 0.946 with ef 800 and 0.965 with ef 1000 on the build of 0.946 (docs/benchmarks.md,
#: "Session 13", "Session 18", "Session 23"). Linear in the log of the size (concave, as the measurements are):
#: 300k gets 434, 1M 800. Counted strictly (ids), ef 800 left one 1M build of five under 0.95; with ties among
#: the corpus's identical chunks counted (ann-benchmarks' rule), every 1M build measured at 800 held 0.958-0.969
#: (three in "Session 25", one in "Session 27"), where ef 1000 (9 per decade, until session 27) cost the vector
#: arm ~2-3 ms at p95 and missed its 15 ms in every run; 800 met it in 4 of 9 runs on this machine (14-21 ms).
EF_SEARCH_PER_DECADE = 7.0


def ef_search_for(chunks: int, *, base: int, depth: int) -> int:
    """``hnsw.ef_search`` for a collection of ``chunks`` chunks: ``base`` (``RAG_HNSW_EF_SEARCH``) up to
    ``EF_SEARCH_REFERENCE_CHUNKS``, then grown with the size; never below ``depth`` (the arm's candidates)
    nor above pgvector's limit."""
    decades = math.log10(max(1.0, chunks / EF_SEARCH_REFERENCE_CHUNKS))
    return min(MAX_EF_SEARCH, max(depth, round(base * (1.0 + EF_SEARCH_PER_DECADE * decades))))


#: the filter keys ``retrieve(filters=...)`` accepts, and the value each needs
FILTER_KEYS: Mapping[str, str] = {
    "source": "a source path (exact match)",
    "source_prefix": "a source path prefix, e.g. 'docs/'",
    "headers": "a dict of header levels, e.g. {'h1': 'Guide'} (containment)",
    "metadata": "a dict the document metadata must contain",
    "document_id": "a document id (int)",
    "chunk_type": "'child' (a section's piece; 'parent' once expanded to its section, also accepted) or 'text'",
    "keywords": "a word or a list of words that must all be among the chunk's metadata.keywords (stemmed match)",
}


#: the stored ``chunk_type`` a filter value selects: a result expanded to its section shows "parent", and a filter
#: on what a result shows must find it (it is one of a section's children)
CHUNK_TYPE_FILTERS: Mapping[str, str] = {"child": "child", "parent": "child", "text": "text"}
#: the header levels chunks are stored with (every strategy's header path)
HEADER_FILTER_KEYS = frozenset(f"h{level}" for level in range(1, 7))

#: the largest id a ``documents.id`` (bigint) can hold
MAX_DOCUMENT_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ChunkFilters:
    """Validated filters; every value becomes a bound parameter."""

    source: str | None = None
    source_prefix: str | None = None
    headers: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    document_id: int | None = None
    chunk_type: str | None = None
    keywords: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, filters: Mapping[str, Any] | None) -> ChunkFilters:
        """Check keys and value types; UnknownFilterError names the key and lists the valid ones."""
        if not filters:
            return cls()
        if not isinstance(filters, Mapping):  # a string would be read as its letters: "unknown filter key(s) 'j', 'n'"
            raise UnknownFilterError(
                f"filters must be a mapping of filter keys to values, e.g. {{'source_prefix': 'docs/'}} (JSON on the "
                f"command line), not {filters!r}"
            )
        unknown = sorted(set(filters) - set(FILTER_KEYS))
        if unknown:
            hint = did_you_mean(str(unknown[0]), FILTER_KEYS) if len(unknown) == 1 else ""
            raise UnknownFilterError(
                f"unknown filter key(s) {', '.join(map(repr, unknown))}; {hint}valid keys: {', '.join(FILTER_KEYS)}"
            )
        for key in ("source", "source_prefix", "chunk_type"):
            if key in filters and not isinstance(filters[key], str):
                raise UnknownFilterError(f"filter {key!r} must be {FILTER_KEYS[key]}, not {filters[key]!r}")
        for key in ("headers", "metadata"):
            if key in filters and not isinstance(filters[key], dict):
                raise UnknownFilterError(f"filter {key!r} must be {FILTER_KEYS[key]}, not {filters[key]!r}")
        headers = filters.get("headers")
        if headers is not None and not all(isinstance(v, str) for v in headers.values()):
            raise UnknownFilterError(f"filter 'headers' values must be strings: {headers!r}")
        if headers is not None and (levels := sorted(set(headers) - HEADER_FILTER_KEYS)):
            raise UnknownFilterError(
                f"filter 'headers' key(s) {', '.join(map(repr, levels))} name no header level: use h1 ... h6"
            )
        kind = filters.get("chunk_type")
        if kind is not None and kind not in CHUNK_TYPE_FILTERS:
            hint = did_you_mean(kind, CHUNK_TYPE_FILTERS)
            raise UnknownFilterError(
                f"filter 'chunk_type' {kind!r} is no chunk type; {hint}use {FILTER_KEYS['chunk_type']}"
            )
        doc_id = filters.get("document_id")
        if isinstance(doc_id, numbers.Integral) and not isinstance(doc_id, bool):
            doc_id = int(doc_id)  # np.int64 from a dataframe: the rule of the int knobs (knobs.Knob.plain)
        if doc_id is not None and (
            isinstance(doc_id, bool) or not isinstance(doc_id, int) or not 1 <= doc_id <= MAX_DOCUMENT_ID
        ):
            shown = repr(doc_id)[:40]
            raise UnknownFilterError(
                f"filter 'document_id' ({shown}) must be a document id, a whole number 1..{MAX_DOCUMENT_ID}"
            )
        values = {k: filters[k] for k in FILTER_KEYS if k in filters}
        if doc_id is not None:
            values["document_id"] = doc_id
        if kind is not None:
            values["chunk_type"] = CHUNK_TYPE_FILTERS[kind]
        if "keywords" in values:
            values["keywords"] = _keyword_filter(values["keywords"])
        return cls(**values)


def _keyword_filter(value: Any) -> tuple[str, ...]:
    words = [value] if isinstance(value, str) else value
    if not isinstance(words, list | tuple) or not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise UnknownFilterError(f"filter 'keywords' must be {FILTER_KEYS['keywords']}, not {value!r}")
    return tuple(words)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """Everything one hybrid search needs."""

    collection: str
    query_vector: np.ndarray[Any, Any] | None
    any_terms: str
    required_terms: str
    vector_weight: float
    keyword_weight: float
    # defaults are the service's own (rag_service.config); the Retriever passes the preset's and settings' values
    rrf_k: int = DEFAULT_RRF_K
    fusion_method: str = DEFAULT_FUSION_METHOD
    candidate_k: int = DEFAULT_CANDIDATE_K
    limit: int = DEFAULT_CANDIDATE_K
    fts_config: str = DEFAULT_FTS_CONFIG
    ef_search: int = DEFAULT_EF_SEARCH
    #: a collection of at most this many chunks is searched exactly (0: always through the HNSW index)
    exact_search_below: int = DEFAULT_EXACT_SEARCH_BELOW
    filters: ChunkFilters = field(default_factory=ChunkFilters)
    keyword_scorer: str = DEFAULT_KEYWORD_SCORER
    bm25_text: str = ""
    bm25_k1: float = DEFAULT_BM25_K1
    bm25_b: float = DEFAULT_BM25_B
    #: 0: every posting of the query's lexemes is scored (exact); N: at most N per query, highest impact first
    bm25_max_postings: int = DEFAULT_BM25_MAX_POSTINGS
    #: each fused candidate also gets its context's BM25 (``SearchHit.context_score``; ``db.contexts``)
    context_bm25: bool = False
    #: each fused candidate also gets its term proximity (``SearchHit.proximity_score``; ``db.proximity``)
    proximity: bool = False
    #: each fused candidate also gets its context's similarity (``SearchHit.context_similarity``; ``db.context_vector``)
    context_vector: bool = False
    #: the exclusions of ``required_terms`` as one OR query (``a or "b c"``), set when they are all of it: the
    #: BM25 arm then drops the chunks matching it rather than scoring every other chunk as passing a filter
    excluded_terms: str = ""
    #: the collection has ready packed postings (``db.packed_postings``): an unfiltered BM25 arm is scored exactly
    #: by the ``rag_bm25`` extension
    packed_postings: bool = False
    #: run the two arms at once on two connections where they can (``db.parallel_search``): large collections
    parallel_arms: bool = False

    @property
    def runs_context(self) -> bool:
        """The context BM25 is computed when asked for and the BM25 keyword arm runs (it shares its lexemes)."""
        return self.context_bm25 and self.runs_keyword and self.keyword_scorer == "bm25"

    @property
    def runs_proximity(self) -> bool:
        """Term proximity is computed when asked for and the BM25 keyword arm runs (it shares its lexemes)."""
        return self.proximity and self.runs_keyword and self.keyword_scorer == "bm25"

    @property
    def runs_context_vector(self) -> bool:
        """The context similarity is computed when asked for and both arms run, as the context BM25 and proximity
        (with the vector arm alone it lowered anthropic-docs-qa by 0.004: docs/benchmarks.md "Session 29")."""
        return self.context_vector and self.runs_vector and self.runs_keyword

    @property
    def runs_vector(self) -> bool:
        """The vector arm runs when it has weight and a query vector."""
        return self.vector_weight > 0 and self.query_vector is not None

    @property
    def runs_keyword(self) -> bool:
        """The keyword arm runs when it has weight and something to match (BM25: something to score)."""
        if self.keyword_weight <= 0:
            return False
        if self.keyword_scorer == "bm25":
            return bool(self.bm25_text.strip())
        return bool(self.any_terms.strip() or self.required_terms.strip())


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One fused candidate with the chunk's stored fields."""

    chunk_id: int
    document_id: int
    source: str
    title: str
    content: str
    headers: dict[str, str]
    header_path: str
    start_char: int
    end_char: int
    chunk_type: str
    content_hash: str
    parent_content: str | None
    parent_start: int | None
    parent_end: int | None
    #: the chunk's ``metadata`` (``keywords``, PDF pages) and its document's ``metadata.summary``
    metadata: dict[str, Any]
    summary: str
    embedding: np.ndarray[Any, Any]
    vector_rank: int | None
    keyword_rank: int | None
    vector_score: float | None
    keyword_score: float | None
    fused_score: float
    #: the BM25 of the chunk's context, its section or document (None: not asked for, or no query word in it)
    context_score: float | None = None
    #: how close together the query's words stand in the chunk (None: not asked for; ``db.proximity``)
    proximity_score: float | None = None
    #: the query's cosine with the mean vector of the chunk's context (None: not asked for, or no stored context)
    context_similarity: float | None = None
    #: its document's chunker fingerprint (``code:...`` for code: ``retrieve.definitions``)
    chunker: str = ""


def with_query_scores(hit: SearchHit, asked: SearchHit | None) -> SearchHit:
    """``hit`` with the context scores ``asked`` (the same chunk found by the user's own query, not a variant
    of it) has, so they compare across the merged variants; a chunk that query did not find has none."""
    return replace(
        hit,
        context_score=None if asked is None else asked.context_score,
        proximity_score=None if asked is None else asked.proximity_score,
        context_similarity=None if asked is None else asked.context_similarity,
    )


def chunk_conditions(request: SearchRequest, *, collection: bool = True) -> list[ColumnElement[bool]]:
    """The filters as SQL conditions on ``document_chunks`` (and the collection, unless told not to)."""
    f = request.filters
    conds: list[ColumnElement[bool]] = []
    if collection:
        conds.append(DocumentChunk.collection == bindparam("collection", request.collection))
    if f.source is not None or f.source_prefix is not None or f.metadata is not None:
        docs = select(Document.id).where(Document.collection == bindparam("doc_collection", request.collection))
        if f.source is not None:  # the name typed in NFC matches a key stored in NFD (macOS): key_spellings
            docs = docs.where(Document.source.in_(bindparam("source", key_spellings(f.source), expanding=True)))
        if f.source_prefix is not None:
            prefixes = [Document.source.startswith(p, autoescape=True) for p in key_spellings(f.source_prefix)]
            docs = docs.where(or_(*prefixes))
        if f.metadata is not None:
            docs = docs.where(Document.meta.contains(f.metadata))
        conds.append(DocumentChunk.document_id.in_(docs.scalar_subquery()))
    if f.headers is not None:
        conds.append(DocumentChunk.headers.contains(f.headers))
    if f.document_id is not None:
        conds.append(DocumentChunk.document_id == bindparam("document_id", f.document_id))
    if f.chunk_type is not None:
        conds.append(DocumentChunk.chunk_type == bindparam("chunk_type", f.chunk_type))
    if f.keywords is not None:
        cfg = fts_config_expression(request)
        stored = func.jsonb_to_tsvector(cfg, DocumentChunk.meta["keywords"], literal(["string"], JSONB))
        for word in f.keywords:
            conds.append(
                stored.op("@@")(
                    func.plainto_tsquery(cfg, bindparam("keyword", keyword_text(word), type_=String, unique=True))
                )
            )
    return conds


def fts_config_expression(request: SearchRequest) -> ColumnElement[Any]:
    """The text-search configuration as a bound ``regconfig``."""
    return cast(bindparam("fts_config", request.fts_config, type_=String), REGCONFIG)
