"""The context similarity of a hit chunk: the query's cosine with the mean vector of its context.

A chunk's context is its section or, in a document without sections, the document (``db.contexts``, as for the
context BM25); its mean vector is stored with its row when the context is written (``document_contexts.embedding``,
migration 0015). A section whose chunks are all near the question outranks one with a single near chunk among
unrelated ones; the chunks' own vectors cannot see that. Read per returned row with one key probe (NULL for a chunk
without a stored context); the retriever adds it, min-max normalised, after fusion (``retrieve/context.py``).
Screened in ``scripts/simulate_ranking.py`` and measured with ``rag eval`` on every visible set (docs/benchmarks.md,
"Session 29").
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Double, bindparam, cast, func, select

from rag_service.config import SCHEMA_EMBEDDING_DIM
from rag_service.db.models import DocumentContext
from rag_service.db.search_request import SearchRequest
from rag_service.db.vector_type import BinaryVector


def context_similarity(request: SearchRequest, hit: Any) -> ColumnElement[float]:
    """The query's cosine with the stored mean vector of the hit's context (NULL when it has none)."""
    c = DocumentContext
    qvec = bindparam("query_vector", request.query_vector, type_=BinaryVector(SCHEMA_EMBEDDING_DIM))
    mean = (
        select(c.embedding)
        .where(
            c.collection == bindparam("collection", request.collection),
            c.document_id == hit.c.document_id,
            c.context_start == func.coalesce(hit.c.parent_start, -1),
        )
        .scalar_subquery()
    )
    return cast(1.0 - mean.op("<=>", return_type=Double)(qvec), Double)
