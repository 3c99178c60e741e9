"""Hybrid search in ONE statement: a vector arm and a keyword arm as CTEs, fused in SQL.

Built with SQLAlchemy Core: every value is a bound parameter, identifiers come from the models.

* vector arm: ``ORDER BY embedding <=> :q LIMIT :candidate_k`` through the HNSW index, with
  ``hnsw.ef_search`` and pgvector 0.8 iterative scans set for the transaction, so filtered queries
  still return ``candidate_k`` rows; a collection of at most ``exact_search_below`` chunks is
  searched exactly instead (every vector of it): in an index shared with many similar vectors of
  other collections, the filtered graph walk misses a small collection's nearest (issue 23);
* keyword arm, ``bm25`` (default): Okapi BM25 over the trigger-maintained postings of the query's
  lexemes (``chunk_terms``), all of them or at most ``bm25_max_postings`` per query, best first (see
  ``rag_service.db.bm25``); quoted phrases and ``-term`` filter through the stored tsvector;
* keyword arm, ``ts_rank_cd``: the stored tsvector matched with ``@@`` through its GIN index; the
  tsquery is ``websearch_to_tsquery(any-terms) && websearch_to_tsquery(required)`` (see
  ``rag_service.retrieve.query``), so a question is an OR of its words while quoted phrases and
  ``-term`` keep their websearch meaning, and no user string can cause a tsquery syntax error;
* fusion: weighted RRF ``vw/(rrf_k + rank_v) + kw/(rrf_k + rank_k)`` or linear fusion of min-max
  normalised arm scores — the same arithmetic as ``rag_service.retrieve.fusion``, same order;
* with ``context_bm25``, each fused row also gets the BM25 of its context (its section, or its document:
  ``rag_service.db.contexts``), which the retriever adds after fusion.

An arm whose weight is 0 is not run at all. Statements without filters are built once per shape
and re-bound (``StatementCache``). On a large collection ``rag_service.db.parallel_search`` runs the two
arms (``db.search_arms``) on two connections at once and fuses them with this same statement, its arms'
rows given (``build_search(..., arms_given=True)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import psycopg.sql
from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    Double,
    Select,
    bindparam,
    cast,
    func,
    literal,
    null,
    select,
)
from sqlalchemy.engine.interfaces import Compiled, Dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import BindParameter

from rag_service.db import bm25
from rag_service.db.context_vector import context_similarity
from rag_service.db.models import Document, DocumentChunk
from rag_service.db.proximity import proximity_score
from rag_service.db.search_arms import (
    GIVEN_ARM_PARAMETERS,
    arm_rows_statement,
    given_arm,
    keyword_arm,
    vector_arm,
)
from rag_service.db.search_request import (
    FILTER_KEYS,
    ChunkFilters,
    SearchHit,
    SearchRequest,
)
from rag_service.db.vector_type import vector_from_send
from rag_service.records import from_fields

__all__ = ["FILTER_KEYS", "ChunkFilters", "SearchHit", "SearchRequest", "build_search", "explain", "hybrid_search"]


def build_search(request: SearchRequest, *, arms_given: bool = False) -> Select[Any]:
    """The single hybrid statement (exposed for EXPLAIN in tests and benchmarks).

    ``arms_given``: the arms' rows are parameters (``search_arms.given_arm``), already run apart
    (``db.parallel_search``); the fusion and everything after it are the same statement.
    """
    if arms_given:
        v, k = given_arm("vector_arm"), given_arm("keyword_arm")
    else:
        v, k = vector_arm(request), keyword_arm(request)
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
    hit = _hit_of(fused, request)
    stats = bm25.context_stats(request) if request.runs_context or request.runs_proximity else None
    context = (
        bm25.context_score(stats, request, document_id=hit.c.document_id, parent_start=hit.c.parent_start)
        if stats is not None and request.runs_context
        else cast(null(), Double)
    )
    proximity = (
        proximity_score(stats, request, chunk_id=fused.c.id)
        if stats is not None and request.runs_proximity
        else cast(null(), Double)
    )
    similarity = context_similarity(request, hit) if request.runs_context_vector else cast(null(), Double)
    return (
        select(
            fused.c.id,
            *hit.c,
            fused.c.vector_rank,
            fused.c.keyword_rank,
            fused.c.vector_score,
            fused.c.keyword_score,
            fused.c.fused_score,
            context.label("context_score"),
            proximity.label("proximity_score"),
            similarity.label("context_similarity"),
        )
        .select_from(fused.join(hit, literal(True)))
        .order_by(fused.c.fused_score.desc(), fused.c.best_rank, fused.c.id)
        .limit(bindparam("limit", request.limit))
    )


def _hit_of(fused: CTE, request: SearchRequest) -> Any:
    """The chunk and document row of each fused candidate, looked up per candidate (``LATERAL``).

    The lookup is a primary-key probe by construction: a plain join lets the planner, when its
    statistics under-estimate the collection (a new one), drive a nested loop from the collection's
    chunks and re-run the arms per chunk (issue 23). ``collection =`` in both tables: the rows of
    one collection, a single shard on Citus.
    """
    c, d = DocumentChunk, Document
    collection: BindParameter[str] = bindparam("collection", request.collection)
    return (
        select(*hit_columns())
        .select_from(c)
        .join(d, (d.collection == c.collection) & (d.id == c.document_id))
        .where(c.collection == collection, d.collection == collection, c.id == fused.c.id)
        .lateral("hit")
    )


def cast_connection(raw: object) -> psycopg.Connection[Any]:
    """The psycopg connection under a SQLAlchemy connection (psycopg is the only driver we use)."""
    if not isinstance(raw, psycopg.Connection):
        raise TypeError(f"expected a psycopg connection, got {type(raw).__name__}")
    return raw


def explain(session: Session, request: SearchRequest, *, analyze: bool = False) -> str:
    """``EXPLAIN`` (with ``analyze``: ``EXPLAIN (ANALYZE, BUFFERS)``, which runs it) of the hybrid statement
    with these parameters, as ``hybrid_search`` runs it (for tests and benchmarks)."""
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    compiled = build_search(request).compile(session.get_bind(), compile_kwargs={"render_postcompile": True})
    params = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in compiled.params.items()}
    raw = cast_connection(session.connection().connection.dbapi_connection)
    register_vector(raw)
    if request.runs_vector:
        configure_vector_scan(session, ef_search=request.ef_search)
    command = "EXPLAIN (ANALYZE, BUFFERS) {}" if analyze else "EXPLAIN {}"
    statement = psycopg.sql.SQL(command).format(psycopg.sql.SQL(str(compiled)))  # bound parameters only
    with raw.cursor() as cursor:
        cursor.execute(statement, params)
        return "\n".join(row[0] for row in cursor.fetchall())


#: pgvector's HNSW settings of a search, for its transaction only (``SET LOCAL``). Citus sends
#: ``SET LOCAL`` (not ``set_config``) on to the shard with ``citus.propagate_set_commands = 'local'``;
#: without Citus that name is an inert placeholder setting. No parallel workers: the planner made the
#: exact branch (small collections) a parallel scan whose workers started even when its size check
#: skipped it, ~15 ms of every query on a large collection (hybrid p50 28 ms at 100k chunks).
_SCAN_SETTINGS = psycopg.sql.SQL(
    "SET LOCAL citus.propagate_set_commands = 'local'; SET LOCAL max_parallel_workers_per_gather = 0; "
    "SET LOCAL hnsw.ef_search = {}; SET LOCAL hnsw.iterative_scan = relaxed_order"
)
_SCAN_KEY = "rag_hnsw_scan"


def configure_vector_scan(session: Session, *, ef_search: int) -> None:
    """Set pgvector's HNSW settings for this transaction: ``ef_search`` and iterative scans.

    ``SET LOCAL`` ends with the transaction, so the settings hold behind transaction poolers
    (pgbouncer's transaction mode hands each transaction any server connection) and on Citus, and
    never reach the connection's next use. One round trip (three SETs in one simple-protocol
    message), made once per transaction and ``ef_search``.
    """
    transaction = session.get_transaction()
    done = session.info.get(_SCAN_KEY)
    if done is not None and done[0] is transaction and done[1] == ef_search:
        return
    raw = cast_connection(session.connection().connection.dbapi_connection)
    raw.execute(vector_scan_settings(ef_search))
    session.info[_SCAN_KEY] = (transaction, ef_search)


def vector_scan_settings(ef_search: int) -> psycopg.sql.Composed:
    """The ``SET LOCAL`` statements of ``configure_vector_scan`` (for a driver connection's own transaction)."""
    return _SCAN_SETTINGS.format(psycopg.sql.Literal(int(ef_search)))


def hit_columns() -> tuple[Any, ...]:
    """The chunk and document columns every ``SearchHit`` carries (``hit_from_row`` reads them back)."""
    c, d = DocumentChunk, Document
    return (
        c.document_id,
        d.source,
        d.title,
        d.chunker,
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
        c.meta.label("metadata"),
        func.coalesce(d.meta["summary"].astext, "").label("summary"),
        func.vector_send(c.embedding).label("embedding_bytes"),
    )


def hit_from_row(row: Any, **given: Any) -> SearchHit:
    """A ``SearchHit`` from a row holding the chunk id (``id``) and ``hit_columns()``; ``given`` adds scores."""
    return _hit(row._asdict(), **given)


def _hit(values: dict[str, Any], **given: Any) -> SearchHit:
    """``hit_from_row`` of a row's ``_asdict()`` (read once: a row's attributes cost ~0.4 us each)."""
    return from_fields(
        SearchHit,
        values,
        chunk_id=values["id"],
        headers=values["headers"] or {},
        metadata=values["metadata"] or {},
        embedding=vector_from_send(values["embedding_bytes"]),
        **given,
    )


def search_parameters(request: SearchRequest) -> dict[str, Any]:
    """Every named parameter of the hybrid statement without filters, from ``request``."""
    return {
        "collection": request.collection,
        "query_vector": request.query_vector,
        "candidate_k": request.candidate_k,
        "exact_search_below": request.exact_search_below,
        "candidate_k_kw": request.candidate_k,
        "any_terms": request.any_terms,
        "required_terms": request.required_terms,
        "excluded_terms": request.excluded_terms,
        "fts_config": request.fts_config,
        "bm25_text": request.bm25_text,
        "bm25_k1": float(request.bm25_k1),
        "bm25_b": float(request.bm25_b),
        "bm25_collection": request.collection,
        "bm25_max_postings": request.bm25_max_postings,
        "bm25_completions": bm25.completions(request),
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
        self._compiled: dict[tuple[Any, ...], Compiled] = {}

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
            bool(request.excluded_terms.strip()),
            request.runs_context,
            request.runs_proximity,
            request.runs_context_vector,
            request.packed_postings,
        )

    def statement(
        self, request: SearchRequest, *, arms_given: bool = False
    ) -> tuple[Select[Any], dict[str, Any] | None]:
        """The statement for ``request`` (``arms_given``: the arms' rows as parameters) and the parameters to
        execute it with (None: as built; with ``arms_given`` the caller adds the arms' rows)."""
        kind = "given" if arms_given else "one"
        return self._built(request, kind, lambda: build_search(request, arms_given=arms_given))

    def arm(self, request: SearchRequest, arm: str) -> tuple[Select[Any], dict[str, Any] | None]:
        """The rows of one arm (``vector_arm`` or ``keyword_arm``) of ``request`` alone, as ``statement``."""
        build = vector_arm if arm == "vector_arm" else keyword_arm
        return self._built(request, arm, lambda: arm_rows_statement(build(request)))

    def compiled_arm(self, request: SearchRequest, arm: str, dialect: Dialect) -> Compiled:
        """``arm(request, arm)`` compiled for ``dialect`` (~5 ms), once per shape: to run it on a driver connection.
        Only for requests with a shape (no filters)."""
        key = self.shape(request)
        if key is None:
            raise ValueError("a request with filters has no cached statements to compile")
        compiled_key = (arm, dialect.name, *key)
        compiled = self._compiled.get(compiled_key)
        if compiled is None:
            statement, _ = self.arm(request, arm)
            compiled = self._compiled[compiled_key] = statement.compile(dialect=dialect)
        return compiled

    def _built(
        self, request: SearchRequest, kind: str, build: Callable[[], Select[Any]]
    ) -> tuple[Select[Any], dict[str, Any] | None]:
        key = self.shape(request)
        if key is None:
            return build(), None
        cached = self._statements.get((kind, *key))
        if cached is None:
            cached = build()
            named = _named_parameters(cached)
            missing = named - set(search_parameters(request)) - (GIVEN_ARM_PARAMETERS if kind == "given" else set())
            if missing:
                raise RuntimeError(f"hybrid statement parameters without a value source: {sorted(missing)}")
            self._statements[(kind, *key)] = cached
        return cached, search_parameters(request)


def _named_parameters(statement: Select[Any]) -> set[str]:
    """The named bind parameters of ``statement``, each shared subtree walked once.

    ``visitors.iterate`` walks a CTE once per reference: ~50,000 visits and ~70 ms of a cold query.
    """
    names: set[str] = set()
    seen: set[int] = set()
    stack: list[Any] = [statement]
    while stack:
        element = stack.pop()
        if id(element) in seen:
            continue
        seen.add(id(element))
        if isinstance(element, BindParameter) and not element.unique:
            names.add(element.key)
        stack.extend(element.get_children())
    return names


#: the statements of this process, by shape
STATEMENTS = StatementCache()


def hybrid_search(session: Session, request: SearchRequest) -> list[SearchHit]:
    """Run the fused search; one round trip after the per-transaction settings."""
    if not (request.runs_vector or request.runs_keyword):
        return []
    if request.runs_vector:
        configure_vector_scan(session, ef_search=request.ef_search)
    statement, parameters = STATEMENTS.statement(request)
    rows = session.connection().execute(statement, parameters).all()  # Core: no ORM layer on the hot path
    return hits_from_rows(rows)


def hits_from_rows(rows: Sequence[Any]) -> list[SearchHit]:
    """The hits of the hybrid statement's rows, best first."""
    return [_scored_hit(row._asdict()) for row in rows]


#: the hybrid statement's scores that are NULL where not asked for
_OPTIONAL_SCORES = ("context_score", "proximity_score", "context_similarity")


def _scored_hit(values: dict[str, Any]) -> SearchHit:
    return _hit(
        values,
        fused_score=float(values["fused_score"]),
        **{name: None if values[name] is None else float(values[name]) for name in _OPTIONAL_SCORES},
    )
