"""The two arms of the hybrid statement (``rag_service.db.search``), each a CTE of (id, rank, score, norm).

``given_arm`` is an arm already run (``rag_service.db.parallel_search`` runs the two on two connections at
once): its rows bound as arrays, so the fused statement is the same whichever way the arms ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.elements import BindParameter

from rag_service.config import SCHEMA_EMBEDDING_DIM
from rag_service.db import bm25
from rag_service.db.models import CollectionStats, DocumentChunk
from rag_service.db.search_request import SearchRequest, chunk_conditions, fts_config_expression
from rag_service.db.vector_type import BinaryVector

#: an arm's row: chunk id, rank in the arm (1 = best), score, score min-max normalised over the arm
ArmRow = tuple[int, int, float, float]
ARM_COLUMNS = ("id", "rank", "score", "norm")
#: the parameters of the two given arms (``given_arm``): ``<arm>_<column>``
GIVEN_ARM_PARAMETERS = frozenset(f"{arm}_{column}" for arm in ("vector_arm", "keyword_arm") for column in ARM_COLUMNS)


def _empty_arm(name: str) -> CTE:
    """An arm that does not run: no rows, the arm's columns."""
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


def vector_arm(request: SearchRequest) -> CTE:
    """The vector arm's candidates (id, rank, score, norm): see ``rag_service.db.search``."""
    if not request.runs_vector:
        return _empty_arm("vector_arm")
    qvec = bindparam("query_vector", request.query_vector, type_=BinaryVector(SCHEMA_EMBEDDING_DIM))
    distance = DocumentChunk.embedding.cosine_distance(qvec)
    size = func.coalesce(
        select(CollectionStats.chunk_count)
        .where(CollectionStats.collection == bindparam("collection", request.collection))
        .scalar_subquery(),
        0,
    )
    exact_below = bindparam("exact_search_below", request.exact_search_below, type_=BigInteger)
    limit: BindParameter[int] = bindparam("candidate_k", request.candidate_k)
    base = select(DocumentChunk.id.label("id"), distance.label("distance")).where(*chunk_conditions(request))
    # one branch runs, the other is cut by its one-time filter: ``+ 0`` keeps the exact one off the index
    exact = base.where(size <= exact_below).order_by(distance + literal(0.0, Double)).limit(limit)
    indexed = base.where(size > exact_below).order_by(distance).limit(limit)
    nearest = union_all(exact, indexed).subquery("nearest")
    similarity = cast(1.0 - nearest.c.distance, Double)
    return (
        select(
            nearest.c.id,
            func.row_number().over(order_by=(nearest.c.distance, nearest.c.id)).label("rank"),
            similarity.label("score"),
            _normalised(similarity).label("norm"),
        )
        .cte("vector_arm")
        .prefix_with("MATERIALIZED")
    )


def tsquery_expression(request: SearchRequest) -> ColumnElement[Any]:
    """``websearch(any) && websearch(required)``; Postgres' ``&&`` returns the other side when one is empty."""
    cfg = fts_config_expression(request)
    any_q = func.websearch_to_tsquery(cfg, bindparam("any_terms", request.any_terms, type_=String))
    req_q = func.websearch_to_tsquery(cfg, bindparam("required_terms", request.required_terms, type_=String))
    return any_q.op("&&")(req_q)


def _ts_rank_matches(request: SearchRequest) -> Select[Any]:
    tsq = tsquery_expression(request)  # inline: the planner sees it as a stable expression for the GIN index
    rank = cast(func.ts_rank_cd(DocumentChunk.content_tsv, tsq), Double)
    return (
        select(DocumentChunk.id.label("id"), rank.label("score"))
        .where(DocumentChunk.content_tsv.op("@@")(tsq), *chunk_conditions(request))
        .order_by(rank.desc(), DocumentChunk.id)
        .limit(bindparam("candidate_k_kw", request.candidate_k))
    )


def keyword_arm(request: SearchRequest) -> CTE:
    """The keyword arm's candidates (id, rank, score, norm): BM25 or ``ts_rank_cd``."""
    if not request.runs_keyword:
        return _empty_arm("keyword_arm")
    if request.keyword_scorer == "bm25":
        matched = bm25.bm25_matches(request).subquery("matched")
    else:
        matched = _ts_rank_matches(request).subquery("matched")
    return (
        select(
            matched.c.id,
            func.row_number().over(order_by=(matched.c.score.desc(), matched.c.id)).label("rank"),
            matched.c.score,
            _normalised(matched.c.score).label("norm"),
        )
        .cte("keyword_arm")
        .prefix_with("MATERIALIZED")
    )


def arm_rows_statement(arm: CTE) -> Select[Any]:
    """The rows of ``arm`` alone (to run one arm by itself)."""
    return select(*(arm.c[name] for name in ARM_COLUMNS))


def given_arm(name: str) -> CTE:
    """The arm ``name`` from rows already fetched, bound as the arrays ``<name>_<column>`` (``given_arm_values``)."""
    types = (BigInteger, BigInteger, Double, Double)
    arrays: list[BindParameter[Any]] = [
        bindparam(f"{name}_{column}", type_=ARRAY(kind)) for column, kind in zip(ARM_COLUMNS, types, strict=True)
    ]
    rows = func.unnest(*arrays).table_valued(*ARM_COLUMNS).render_derived(name=f"{name}_rows")
    return select(*(rows.c[column] for column in ARM_COLUMNS)).cte(name)


def given_arm_values(name: str, rows: Sequence[ArmRow]) -> dict[str, list[Any]]:
    """The parameters of ``given_arm(name)`` for ``rows``."""
    return {f"{name}_{column}": [row[i] for row in rows] for i, column in enumerate(ARM_COLUMNS)}
