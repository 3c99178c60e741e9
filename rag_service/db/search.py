"""Hybrid search in ONE statement: a vector arm and a keyword arm as CTEs, fused in SQL.

Built with SQLAlchemy Core: every value is a bound parameter, identifiers come from the models.

* vector arm: ``ORDER BY embedding <=> :q LIMIT :candidate_k`` through the HNSW index, with
  ``hnsw.ef_search`` and pgvector 0.8 iterative scans set for the transaction, so filtered queries
  still return ``candidate_k`` rows;
* keyword arm, ``bm25`` (default): Okapi BM25 over the trigger-maintained postings of the query's
  lexemes (``chunk_terms``), all of them or the best ``bm25_max_postings`` per lexeme; quoted
  phrases and ``-term`` filter through the stored tsvector;
* keyword arm, ``ts_rank_cd``: the stored tsvector matched with ``@@`` through its GIN index; the
  tsquery is ``websearch_to_tsquery(any-terms) && websearch_to_tsquery(required)`` (see
  ``rag_service.retrieve.query``), so a question is an OR of its words while quoted phrases and
  ``-term`` keep their websearch meaning, and no user string can cause a tsquery syntax error;
* fusion: weighted RRF ``vw/(rrf_k + rank_v) + kw/(rrf_k + rank_k)`` or linear fusion of min-max
  normalised arm scores — the same arithmetic as ``rag_service.retrieve.fusion``, same order.

An arm whose weight is 0 is not run at all. Statements without filters are built once per shape
and re-bound (``StatementCache``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
import psycopg.sql
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    Double,
    Select,
    String,
    bindparam,
    case,
    cast,
    func,
    literal,
    null,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import REGCONFIG
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter

from rag_service.config import SCHEMA_EMBEDDING_DIM
from rag_service.db.models import ChunkTerm, CollectionStats, Document, DocumentChunk, LexemeStats
from rag_service.errors import UnknownFilterError

#: the filter keys ``retrieve(filters=...)`` accepts, and the value each needs
FILTER_KEYS: Mapping[str, str] = {
    "source": "a source path (exact match)",
    "source_prefix": "a source path prefix, e.g. 'docs/'",
    "headers": "a dict of header levels, e.g. {'h1': 'Guide'} (containment)",
    "metadata": "a dict the document metadata must contain",
    "document_id": "a document id (int)",
    "chunk_type": "'child' or 'text'",
}


@dataclass(frozen=True, slots=True)
class ChunkFilters:
    """Validated filters; every value becomes a bound parameter."""

    source: str | None = None
    source_prefix: str | None = None
    headers: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    document_id: int | None = None
    chunk_type: str | None = None

    @classmethod
    def parse(cls, filters: Mapping[str, Any] | None) -> ChunkFilters:
        """Check keys and value types; UnknownFilterError names the key and lists the valid ones."""
        if not filters:
            return cls()
        unknown = sorted(set(filters) - set(FILTER_KEYS))
        if unknown:
            raise UnknownFilterError(
                f"unknown filter key(s) {', '.join(map(repr, unknown))}; valid keys: {', '.join(FILTER_KEYS)}"
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
        doc_id = filters.get("document_id")
        if doc_id is not None and (isinstance(doc_id, bool) or not isinstance(doc_id, int)):
            raise UnknownFilterError(f"filter 'document_id' must be an int, not {doc_id!r}")
        return cls(**{k: filters[k] for k in FILTER_KEYS if k in filters})


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """Everything one hybrid search needs."""

    collection: str
    query_vector: np.ndarray[Any, Any] | None
    any_terms: str
    required_terms: str
    vector_weight: float
    keyword_weight: float
    rrf_k: int = 60
    fusion_method: str = "rrf"
    candidate_k: int = 20
    limit: int = 20
    fts_config: str = "english"
    ef_search: int = 100
    filters: ChunkFilters = field(default_factory=ChunkFilters)
    keyword_scorer: str = "bm25"
    bm25_text: str = ""
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    #: 0: every posting of the query's lexemes is scored (exact); N: at most N per lexeme, highest impact first
    bm25_max_postings: int = 0

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
    embedding: np.ndarray[Any, Any]
    vector_rank: int | None
    keyword_rank: int | None
    vector_score: float | None
    keyword_score: float | None
    fused_score: float


def _conditions(request: SearchRequest, *, collection: bool = True) -> list[ColumnElement[bool]]:
    f = request.filters
    conds: list[ColumnElement[bool]] = []
    if collection:
        conds.append(DocumentChunk.collection == bindparam("collection", request.collection))
    if f.source is not None or f.source_prefix is not None or f.metadata is not None:
        docs = select(Document.id).where(Document.collection == bindparam("doc_collection", request.collection))
        if f.source is not None:
            docs = docs.where(Document.source == bindparam("source", f.source))
        if f.source_prefix is not None:
            docs = docs.where(Document.source.startswith(f.source_prefix, autoescape=True))
        if f.metadata is not None:
            docs = docs.where(Document.meta.contains(f.metadata))
        conds.append(DocumentChunk.document_id.in_(docs.scalar_subquery()))
    if f.headers is not None:
        conds.append(DocumentChunk.headers.contains(f.headers))
    if f.document_id is not None:
        conds.append(DocumentChunk.document_id == bindparam("document_id", f.document_id))
    if f.chunk_type is not None:
        conds.append(DocumentChunk.chunk_type == bindparam("chunk_type", f.chunk_type))
    return conds


def _empty_arm(name: str) -> CTE:
    return (
        select(
            cast(null(), BigInteger).label("id"),
            cast(null(), BigInteger).label("rank"),
            cast(null(), Double).label("score"),
            cast(null(), Double).label("norm"),
        )
        .where(literal(False))
        .cte(name)
    )


def _normalised(score: ColumnElement[float]) -> ColumnElement[float]:
    lo, hi = func.min(score).over(), func.max(score).over()
    return case((hi == lo, literal(1.0, Double)), else_=(score - lo) / (hi - lo))


def _vector_arm(request: SearchRequest) -> CTE:
    if not request.runs_vector:
        return _empty_arm("vector_arm")
    qvec = bindparam("query_vector", request.query_vector, type_=Vector(SCHEMA_EMBEDDING_DIM))
    distance = DocumentChunk.embedding.cosine_distance(qvec)
    nearest = (
        select(DocumentChunk.id.label("id"), distance.label("distance"))
        .where(*_conditions(request))
        .order_by(distance)
        .limit(bindparam("candidate_k", request.candidate_k))
        .subquery("nearest")
    )
    similarity = cast(1.0 - nearest.c.distance, Double)
    return select(
        nearest.c.id,
        func.row_number().over(order_by=(nearest.c.distance, nearest.c.id)).label("rank"),
        similarity.label("score"),
        _normalised(similarity).label("norm"),
    ).cte("vector_arm")


def tsquery_expression(request: SearchRequest) -> ColumnElement[Any]:
    """``websearch(any) && websearch(required)``; Postgres' ``&&`` returns the other side when one is empty."""
    cfg = _fts_config(request)
    any_q = func.websearch_to_tsquery(cfg, bindparam("any_terms", request.any_terms, type_=String))
    req_q = func.websearch_to_tsquery(cfg, bindparam("required_terms", request.required_terms, type_=String))
    return any_q.op("&&")(req_q)


def _fts_config(request: SearchRequest) -> ColumnElement[Any]:
    return cast(bindparam("fts_config", request.fts_config, type_=String), REGCONFIG)


#: an integer column of ``chunk_terms`` or of an alias of it
_IntColumn = ColumnElement[Any] | InstrumentedAttribute[int]


def _bm25_terms(request: SearchRequest) -> CTE:
    """The query's lexemes with their per-term constants, computed once (MATERIALIZED keeps ln() and the
    divisions out of the per-posting work): ``weight = idf * (k1 + 1)``, and a posting's score is
    ``weight * tf / (tf + base + slope * len)``.

    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` (Lucene's, never negative); ``N``, ``df`` and
    ``avglen`` are the trigger-maintained statistics of the collection.

    With a posting budget, ``unread_expected`` estimates what a chunk not among a lexeme's best
    postings gets from that lexeme (see ``_bm25_bounded_matches``).
    """
    cfg = _fts_config(request)
    lexemes = func.tsvector_to_array(func.to_tsvector(cfg, bindparam("bm25_text", request.bm25_text, type_=String)))
    k1 = bindparam("bm25_k1", float(request.bm25_k1), type_=Double)
    b = bindparam("bm25_b", float(request.bm25_b), type_=Double)
    n = cast(CollectionStats.chunk_count, Double)
    df = cast(LexemeStats.doc_freq, Double)
    weight = func.ln(1.0 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1.0)
    slope = k1 * b / (cast(CollectionStats.total_length, Double) / n)
    columns = [
        LexemeStats.lexeme.label("lexeme"),
        weight.label("weight"),
        (k1 * (1.0 - b)).label("base"),
        slope.label("slope"),
    ]
    if request.bm25_max_postings > 0:
        # the expected score of an unread posting: the chance that a chunk not among the lexeme's
        # best postings holds it, times the score of one occurrence in a chunk of average length (idf)
        budget = cast(bindparam("bm25_max_postings", request.bm25_max_postings, type_=BigInteger), Double)
        unread_share = (df - budget) / func.greatest(n - budget, 1.0)
        expected = case((df > budget, unread_share * weight / (k1 + 1.0)), else_=0.0)
        columns += [expected.label("unread_expected"), (df > budget).label("truncated")]
    return (
        select(*columns)
        .select_from(LexemeStats)
        .join(CollectionStats, CollectionStats.collection == LexemeStats.collection)
        .where(
            LexemeStats.collection == bindparam("bm25_collection", request.collection),
            LexemeStats.lexeme == func.any(lexemes),
        )
        .cte("bm25_terms")
        .prefix_with("MATERIALIZED")
    )


def _impact_order(doc_len: _IntColumn, tf: _IntColumn) -> ColumnElement[Any]:
    """``len / tf``: the key of ``ix_chunk_terms_impact``; the lower, the higher a posting's BM25 score."""
    return cast(doc_len, Double) / cast(tf, Double)


def _posting_score(terms: CTE, tf: _IntColumn, doc_len: _IntColumn) -> ColumnElement[Any]:
    tf_ = cast(tf, Double)
    return terms.c.weight * tf_ / (tf_ + terms.c.base + terms.c.slope * doc_len)


def _bm25_matches(request: SearchRequest) -> Select[Any]:
    """Okapi BM25 over the postings of the query's lexemes, best ``candidate_k`` chunks.

    With ``bm25_max_postings`` 0, or with filters beyond the collection, every posting is read and
    summed per chunk (exact); otherwise ``_bm25_bounded_matches``.
    """
    extra = _extra_conditions(request)
    if request.bm25_max_postings > 0 and not extra:
        return _bm25_bounded_matches(request)
    terms = _bm25_terms(request)
    score = func.sum(_posting_score(terms, ChunkTerm.tf, ChunkTerm.doc_len))
    query: Select[Any] = (
        select(ChunkTerm.chunk_id.label("id"), score.label("score"))  # type: ignore[assignment]
        .select_from(ChunkTerm)
        .join(terms, ChunkTerm.lexeme == terms.c.lexeme)
        .where(ChunkTerm.collection == bindparam("collection", request.collection))
    )
    if extra:  # only then is the chunk row needed
        query = query.join(DocumentChunk, DocumentChunk.id == ChunkTerm.chunk_id).where(*extra)
    return (
        query.group_by(ChunkTerm.chunk_id)
        .order_by(score.desc(), ChunkTerm.chunk_id)
        .limit(bindparam("candidate_k_kw", request.candidate_k))
    )


def _extra_conditions(request: SearchRequest) -> list[ColumnElement[bool]]:
    extra = _conditions(request, collection=False)
    if request.required_terms.strip():
        required = func.websearch_to_tsquery(
            _fts_config(request), bindparam("required_terms", request.required_terms, type_=String)
        )
        extra.append(DocumentChunk.content_tsv.op("@@")(required))
    return extra


#: chunks whose score is completed per returned candidate in the bounded BM25 arm
BOUNDED_COMPLETIONS_PER_CANDIDATE = 5


def _bm25_bounded_matches(request: SearchRequest) -> Select[Any]:
    """BM25 that reads at most ``bm25_max_postings`` postings per lexeme: bounded work on any corpus.

    Per lexeme the highest-impact postings come first (``ix_chunk_terms_impact``, ordered by
    ``len / tf``). The chunks seen are ordered by an estimate of their score: what was read, plus for
    each lexeme not read for them the chance that they hold it anyway times its idf (the expected
    score of an unread posting). The best ``BOUNDED_COMPLETIONS_PER_CANDIDATE * candidate_k`` get
    their full score: what was read of the lexemes read whole, plus the truncated lexemes' postings
    from the primary key (chunk, lexeme); the top ``candidate_k`` are returned.
    Every returned score is the chunk's exact BM25 score; when every lexeme has at most the budget of
    postings, so is the ranking (identical to the exact path). Above it, a chunk can be missed (none
    of its postings read, or its estimate below those completed): the measured trade-off is in
    ``docs/benchmarks.md``.
    """
    terms = _bm25_terms(request)
    budget = bindparam("bm25_max_postings", request.bm25_max_postings, type_=BigInteger)
    top = (
        select(ChunkTerm.chunk_id, ChunkTerm.tf, ChunkTerm.doc_len)
        .where(
            ChunkTerm.collection == bindparam("collection", request.collection),
            ChunkTerm.lexeme == terms.c.lexeme,
        )
        .order_by(_impact_order(ChunkTerm.doc_len, ChunkTerm.tf))
        .limit(budget)
        .lateral("top_postings")
    )
    read = _posting_score(terms, top.c.tf, top.c.doc_len)
    # read score + the expected score of the lexemes not read for the chunk (their sum minus those read)
    estimate = func.sum(read) - func.sum(terms.c.unread_expected)
    # lexemes read whole contribute exactly what was read; only truncated ones need a lookup
    settled = func.coalesce(func.sum(read).filter(~terms.c.truncated), 0.0)
    completions = request.candidate_k * BOUNDED_COMPLETIONS_PER_CANDIDATE
    seen = (
        select(top.c.chunk_id.label("id"), settled.label("settled"))
        .select_from(terms.join(top, literal(True)))
        .group_by(top.c.chunk_id)
        .order_by(estimate.desc(), top.c.chunk_id)
        .limit(bindparam("bm25_completions", completions, type_=BigInteger))
        .subquery("bm25_seen")
    )
    posting = ChunkTerm.__table__.alias("posting")
    truncated_score = (
        select(func.sum(_posting_score(terms, posting.c.tf, posting.c.doc_len)))
        .select_from(terms.join(posting, posting.c.lexeme == terms.c.lexeme))
        .where(terms.c.truncated, posting.c.chunk_id == seen.c.id)
        .scalar_subquery()
    )
    full_score = seen.c.settled + func.coalesce(truncated_score, 0.0)
    scored = select(seen.c.id, cast(full_score, Double).label("score")).subquery("bm25_scored")
    return (
        select(scored.c.id, scored.c.score)
        .order_by(scored.c.score.desc(), scored.c.id)
        .limit(bindparam("candidate_k_kw", request.candidate_k))
    )


def _ts_rank_matches(request: SearchRequest) -> Select[Any]:
    tsq = tsquery_expression(request)  # inline: the planner sees it as a stable expression for the GIN index
    rank = cast(func.ts_rank_cd(DocumentChunk.content_tsv, tsq), Double)
    return (
        select(DocumentChunk.id.label("id"), rank.label("score"))
        .where(DocumentChunk.content_tsv.op("@@")(tsq), *_conditions(request))
        .order_by(rank.desc(), DocumentChunk.id)
        .limit(bindparam("candidate_k_kw", request.candidate_k))
    )


def _keyword_arm(request: SearchRequest) -> CTE:
    if not request.runs_keyword:
        return _empty_arm("keyword_arm")
    if request.keyword_scorer == "bm25":
        matched = _bm25_matches(request).subquery("matched")
    else:
        matched = _ts_rank_matches(request).subquery("matched")
    return select(
        matched.c.id,
        func.row_number().over(order_by=(matched.c.score.desc(), matched.c.id)).label("rank"),
        matched.c.score,
        _normalised(matched.c.score).label("norm"),
    ).cte("keyword_arm")


def build_search(request: SearchRequest) -> Select[Any]:
    """The single hybrid statement (exposed for EXPLAIN in tests and benchmarks)."""
    v, k = _vector_arm(request), _keyword_arm(request)
    vw = bindparam("vector_weight", float(request.vector_weight), type_=Double)
    kw = bindparam("keyword_weight", float(request.keyword_weight), type_=Double)
    if request.fusion_method == "linear":
        v_term: ColumnElement[Any] = vw * v.c.norm
        k_term: ColumnElement[Any] = kw * k.c.norm
    else:
        rrf_k = bindparam("rrf_k", int(request.rrf_k), type_=BigInteger)
        v_term = vw / cast(rrf_k + v.c.rank, Double)
        k_term = kw / cast(rrf_k + k.c.rank, Double)
    fused = (
        select(
            func.coalesce(v.c.id, k.c.id).label("id"),
            v.c.rank.label("vector_rank"),
            k.c.rank.label("keyword_rank"),
            v.c.score.label("vector_score"),
            k.c.score.label("keyword_score"),
            (func.coalesce(v_term, literal(0.0, Double)) + func.coalesce(k_term, literal(0.0, Double))).label(
                "fused_score"
            ),
            func.least(v.c.rank, k.c.rank).label("best_rank"),
        )
        .select_from(v.join(k, v.c.id == k.c.id, full=True))
        .cte("fused")
    )
    c, d = DocumentChunk, Document
    return (
        select(
            fused.c.id,
            c.document_id,
            d.source,
            d.title,
            c.content,
            c.headers,
            c.header_path,
            c.start_char,
            c.end_char,
            c.chunk_type,
            c.content_hash,
            c.parent_content,
            c.parent_start,
            c.parent_end,
            func.vector_send(c.embedding).label("embedding_bytes"),
            fused.c.vector_rank,
            fused.c.keyword_rank,
            fused.c.vector_score,
            fused.c.keyword_score,
            fused.c.fused_score,
        )
        .select_from(fused.join(c, c.id == fused.c.id).join(d, d.id == c.document_id))
        .order_by(fused.c.fused_score.desc(), fused.c.best_rank, fused.c.id)
        .limit(bindparam("limit", request.limit))
    )


def cast_connection(raw: object) -> psycopg.Connection[Any]:
    """The psycopg connection under a SQLAlchemy connection (psycopg is the only driver we use)."""
    if not isinstance(raw, psycopg.Connection):
        raise TypeError(f"expected a psycopg connection, got {type(raw).__name__}")
    return raw


def explain(session: Session, request: SearchRequest) -> str:
    """``EXPLAIN`` of the hybrid statement with these parameters (for tests and benchmarks)."""
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    compiled = build_search(request).compile(session.get_bind())
    params = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in compiled.params.items()}
    raw = cast_connection(session.connection().connection.dbapi_connection)
    register_vector(raw)
    if request.runs_vector:
        configure_vector_scan(session, ef_search=request.ef_search)
    statement = psycopg.sql.SQL("EXPLAIN {}").format(psycopg.sql.SQL(str(compiled)))  # bound parameters only
    with raw.cursor() as cursor:
        cursor.execute(statement, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def configure_vector_scan(session: Session, *, ef_search: int) -> None:
    """Make the connection's HNSW settings fit ``ef_search``; free when they already do.

    Connections start with ``RAG_HNSW_EF_SEARCH`` and iterative scans (see ``db.engine``), so the
    usual search is one round trip; a request with another ``ef_search`` changes the session value.
    """
    info = session.connection().info
    if info.get("hnsw_ef_search") == ef_search:
        return
    session.execute(
        text(
            "SELECT set_config('hnsw.ef_search', :ef, false), set_config('hnsw.iterative_scan', 'relaxed_order', false)"
        ),
        {"ef": str(int(ef_search))},
    )
    info["hnsw_ef_search"] = ef_search


def vector_from_send(data: bytes) -> np.ndarray[Any, Any]:
    """A vector from pgvector's binary form (``vector_send``: int16 dim, int16 unused, big-endian float4s).

    Much cheaper for both sides than the text form: no float formatting in the server, no parsing here.
    """
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


def search_parameters(request: SearchRequest) -> dict[str, Any]:
    """Every named parameter of the hybrid statement without filters, from ``request``."""
    return {
        "collection": request.collection,
        "query_vector": request.query_vector,
        "candidate_k": request.candidate_k,
        "candidate_k_kw": request.candidate_k,
        "any_terms": request.any_terms,
        "required_terms": request.required_terms,
        "fts_config": request.fts_config,
        "bm25_text": request.bm25_text,
        "bm25_k1": float(request.bm25_k1),
        "bm25_b": float(request.bm25_b),
        "bm25_collection": request.collection,
        "bm25_max_postings": request.bm25_max_postings,
        "bm25_completions": request.candidate_k * BOUNDED_COMPLETIONS_PER_CANDIDATE,
        "vector_weight": float(request.vector_weight),
        "keyword_weight": float(request.keyword_weight),
        "rrf_k": int(request.rrf_k),
        "limit": request.limit,
    }


class StatementCache:
    """Built hybrid statements by shape, so a call binds new values instead of rebuilding (~3 ms).

    The shape is everything that changes the SQL text; requests with filters are built each time
    (their values sit in anonymous parameters). A statement is cached only if every named parameter
    it has is one ``search_parameters`` supplies, so no value of an earlier request can leak.
    """

    def __init__(self) -> None:
        self._statements: dict[tuple[Any, ...], Select[Any]] = {}

    @staticmethod
    def shape(request: SearchRequest) -> tuple[Any, ...] | None:
        """The cache key, or None when the request's statement must be built fresh."""
        if request.filters != ChunkFilters():
            return None
        return (
            request.runs_vector,
            request.runs_keyword,
            request.keyword_scorer,
            request.fusion_method,
            request.bm25_max_postings > 0,
            bool(request.required_terms.strip()),
        )

    def statement(self, request: SearchRequest) -> tuple[Select[Any], dict[str, Any] | None]:
        """The statement for ``request`` and the parameters to execute it with (None: as built)."""
        key = self.shape(request)
        if key is None:
            return build_search(request), None
        cached = self._statements.get(key)
        if cached is None:
            cached = build_search(request)
            named = {b.key for b in visitors.iterate(cached) if isinstance(b, BindParameter) and not b.unique}
            missing = named - set(search_parameters(request))
            if missing:
                raise RuntimeError(f"hybrid statement parameters without a value source: {sorted(missing)}")
            self._statements[key] = cached
        return cached, search_parameters(request)


_STATEMENTS = StatementCache()


def hybrid_search(session: Session, request: SearchRequest) -> list[SearchHit]:
    """Run the fused search; one round trip after the per-transaction settings."""
    if not (request.runs_vector or request.runs_keyword):
        return []
    if request.runs_vector:
        configure_vector_scan(session, ef_search=request.ef_search)
    statement, parameters = _STATEMENTS.statement(request)
    rows = session.execute(statement, parameters).all()
    return [
        SearchHit(
            chunk_id=row.id,
            document_id=row.document_id,
            source=row.source,
            title=row.title,
            content=row.content,
            headers=row.headers or {},
            header_path=row.header_path,
            start_char=row.start_char,
            end_char=row.end_char,
            chunk_type=row.chunk_type,
            content_hash=row.content_hash,
            parent_content=row.parent_content,
            parent_start=row.parent_start,
            parent_end=row.parent_end,
            embedding=vector_from_send(row.embedding_bytes),
            vector_rank=row.vector_rank,
            keyword_rank=row.keyword_rank,
            vector_score=row.vector_score,
            keyword_score=row.keyword_score,
            fused_score=float(row.fused_score),
        )
        for row in rows
    ]
