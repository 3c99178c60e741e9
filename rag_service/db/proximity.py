"""Term proximity of a hit chunk: how close together the question's words stand in it (BM25TP-like).

Over each pair of the question's lexemes the chunk holds, ``w_a * w_b / d``: ``w`` the lexemes' BM25 weights
(``idf * (k1 + 1)``, from the context BM25's constants) and ``d`` the distance, in words, of the pair's nearest
occurrences (the positions of ``content_tsv``, its title and header path included). A chunk where the words of a
question stand side by side scores higher than one where they are scattered. Computed per returned row, like
the context BM25; the retriever adds it, min-max normalised, after fusion (``retrieve/context.py``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import CTE, Double, String, any_, bindparam, cast, func, literal, select, true

from rag_service.db.bm25 import lexeme_array
from rag_service.db.models import DocumentChunk
from rag_service.db.search_request import SearchRequest


def proximity_score(stats: CTE, request: SearchRequest, *, chunk_id: Any) -> Any:
    """The proximity of chunk ``chunk_id`` to the question (0 when it holds fewer than two of its lexemes).

    ``stats``: the question's lexemes with their ``weight`` (``db.bm25.context_stats``).
    """
    collection = bindparam("collection", request.collection, type_=String)
    chunk = DocumentChunk.__table__.alias("proximity_chunk")
    terms = func.unnest(chunk.c.content_tsv).table_valued("lexeme", "positions", "weights")
    at = func.unnest(terms.c.positions).table_valued("at").render_derived(name="proximity_at")
    # the lexemes as one array (an InitPlan) and each weight by lookup: joined to ``stats`` instead, the planner
    # unnested the chunk's tsvector once per question lexeme (6 ms a row on anthropic-docs-qa, 0.3 then)
    lexemes = lexeme_array(stats)
    weight = select(stats.c.weight).where(stats.c.lexeme == terms.c.lexeme).scalar_subquery()
    # every occurrence of the question's lexemes in the chunk, read once a row; the pairs' nearest occurrences
    # then in one join and one aggregate (a subquery per pair was ~0.12 ms a row: 2.4 ms a search at 20 rows)
    held = (
        select(terms.c.lexeme, weight.label("weight"), at.c.at)
        .select_from(chunk.join(terms, true()).join(at, true()))
        .where(chunk.c.collection == collection, chunk.c.id == chunk_id, terms.c.lexeme == any_(lexemes))
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
