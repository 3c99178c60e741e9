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
    # the lexemes as one array (an InitPlan) and each weight by lookup: joined to ``stats`` instead, the planner
    # unnested the chunk's tsvector once per question lexeme (6 ms a row on anthropic-docs-qa, 0.3 now)
    lexemes = lexeme_array(stats)
    weight = select(stats.c.weight).where(stats.c.lexeme == terms.c.lexeme).scalar_subquery()
    held = (
        select(terms.c.lexeme, terms.c.positions, weight.label("weight"))
        .select_from(chunk.join(terms, true()))
        .where(
            chunk.c.collection == collection,
            chunk.c.id == chunk_id,
            terms.c.lexeme == any_(lexemes),
            terms.c.positions.is_not(None),
        )
        .correlate_except(chunk, terms, stats)  # ``chunk_id``'s table is the enclosing statement's
    )
    first, second = held.subquery("proximity_a"), held.subquery("proximity_b")
    at_a = func.unnest(first.c.positions).table_valued("at").render_derived()
    at_b = func.unnest(second.c.positions).table_valued("at").render_derived()
    nearest = select(func.min(func.abs(at_a.c.at - at_b.c.at))).select_from(at_a.join(at_b, true())).scalar_subquery()
    pair = first.c.weight * second.c.weight / cast(func.greatest(nearest, 1), Double)
    return (
        select(func.coalesce(func.sum(pair), literal(0.0, Double)))
        .select_from(first.join(second, first.c.lexeme < second.c.lexeme))
        .scalar_subquery()
    )
