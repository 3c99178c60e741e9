"""Term proximity of a hit chunk: how close together the question's words stand in it (BM25TP-like).

Over each pair of the question's lexemes the chunk holds, ``w_a * w_b / d``: ``w`` the lexemes' BM25 weights
(``idf * (k1 + 1)``, from the context BM25's constants) and ``d`` the distance, in words, of the pair's nearest
occurrences (the positions of ``content_tsv``, its title and header path included). A chunk where the words of a
question stand side by side scores higher than one where they are scattered. Computed per returned row, like
the context BM25; the retriever adds it, min-max normalised, after fusion (``retrieve/context.py``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import CTE, Double, String, bindparam, cast, func, literal, literal_column, select, true
from sqlalchemy.sql.elements import ColumnClause

from rag_service.db.bm25 import lexeme_array
from rag_service.db.models import DocumentChunk
from rag_service.db.search_request import SearchRequest

# Postgres' one-byte "char" weights of a tsvector's positions, as constants
_WEIGHT_D: ColumnClause[Any] = literal_column("'D'::\"char\"")
_WEIGHT_A: ColumnClause[Any] = literal_column("'A'::\"char\"")
_ONLY_A: ColumnClause[Any] = literal_column("'{a}'::\"char\"[]")


def proximity_score(stats: CTE, request: SearchRequest, *, chunk_id: Any) -> Any:
    """The proximity of chunk ``chunk_id`` to the question (0 when it holds fewer than two of its lexemes).

    ``stats``: the question's lexemes with their ``weight`` (``db.bm25.context_stats``).
    """
    collection = bindparam("collection", request.collection, type_=String)
    chunk = DocumentChunk.__table__.alias("proximity_chunk")
    # the lexemes as one array (an InitPlan) and each weight by lookup: joined to ``stats`` instead, the planner
    # unnested the chunk's tsvector once per question lexeme (6 ms a row on anthropic-docs-qa, 0.3 then)
    lexemes = lexeme_array(stats)
    # the tsvector cut to the question's lexemes in C before it is unnested (every lexeme marked D, the question's
    # A, the A ones kept) rather than every lexeme unnested into rows and filtered: 0.6 against 1.0 ms for 20 rows
    marked = func.setweight(func.setweight(chunk.c.content_tsv, _WEIGHT_D), _WEIGHT_A, lexemes)
    held_only = func.ts_filter(marked, _ONLY_A)
    terms = func.unnest(held_only).table_valued("lexeme", "positions", "weights")
    at = func.unnest(terms.c.positions).table_valued("at").render_derived(name="proximity_at")
    weight = select(stats.c.weight).where(stats.c.lexeme == terms.c.lexeme).scalar_subquery()
    # every occurrence of the question's lexemes in the chunk, read once a row; the pairs' nearest occurrences
    # then in one join and one aggregate (a subquery per pair was ~0.12 ms a row: 2.4 ms a search at 20 rows)
    held = (
        select(terms.c.lexeme, weight.label("weight"), at.c.at)
        .select_from(chunk.join(terms, true()).join(at, true()))
        .where(chunk.c.collection == collection, chunk.c.id == chunk_id)
        .correlate_except(chunk, terms, at, stats)  # ``chunk_id``'s table is the enclosing statement's
        .cte("proximity_held", nesting=True)
        .prefix_with("MATERIALIZED")
    )
    first, second = held.alias("proximity_a"), held.alias("proximity_b")
    pairs = (
        select(
            func.min(first.c.weight).label("weight_a"),
            func.min(second.c.weight).label("weight_b"),
            func.min(func.abs(first.c.at - second.c.at)).label("nearest"),
        )
        .select_from(first.join(second, first.c.lexeme < second.c.lexeme))
        .group_by(first.c.lexeme, second.c.lexeme)
        .subquery("proximity_pairs")
    )
    pair = pairs.c.weight_a * pairs.c.weight_b / cast(func.greatest(pairs.c.nearest, 1), Double)
    return select(func.coalesce(func.sum(pair), literal(0.0, Double))).scalar_subquery()
