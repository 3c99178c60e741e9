"""The context similarity of a hit chunk: the query's cosine with the mean vector of its context.

A chunk's context is its section (the chunks with its ``parent_start``) or, without sections, its document
(as for the context BM25, ``db.contexts``). A section whose chunks are all near the question outranks one with a
single near chunk among unrelated ones; the chunks' own vectors cannot see that. Computed per returned row from
the stored vectors (the (collection, document) key); the retriever adds it, min-max normalised, after fusion
(``retrieve/context.py``). Screened in ``scripts/simulate_ranking.py`` and measured with ``rag eval`` on every
visible set (docs/benchmarks.md, "Session 29").
"""

from __future__ import annotations

from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ColumnElement, Double, bindparam, cast, func, select
from sqlalchemy.orm import aliased

from rag_service.config import SCHEMA_EMBEDDING_DIM
from rag_service.db.models import DocumentChunk
from rag_service.db.search_request import SearchRequest

#: how far (in chunks) from a hit its context is read: a context of up to 257 chunks is read whole wherever the hit
#: lies in it (every context of the visible sets: anthropic-docs-qa's longest has 254), a longer one (a large
#: document without sections) around the hit, so a hit costs at most 513 vectors however long its document is
CONTEXT_REACH = 256


def context_similarity(request: SearchRequest, hit: Any) -> ColumnElement[float]:
    """The query's cosine with the mean vector of the hit's context: the chunks of its section (same
    ``parent_start``), or of its document when it has none, within ``CONTEXT_REACH`` chunks of the hit, read
    through the (collection, document, chunk index) key."""
    s = aliased(DocumentChunk, name="context_chunk")
    qvec = bindparam("query_vector", request.query_vector, type_=Vector(SCHEMA_EMBEDDING_DIM))
    mean = (
        select(func.avg(s.embedding))
        .where(
            s.collection == bindparam("collection", request.collection),
            s.document_id == hit.c.document_id,
            s.chunk_index.between(hit.c.chunk_index - CONTEXT_REACH, hit.c.chunk_index + CONTEXT_REACH),
            func.coalesce(s.parent_start, -1) == func.coalesce(hit.c.parent_start, -1),
        )
        .scalar_subquery()
    )
    return cast(1.0 - mean.op("<=>", return_type=Double)(qvec), Double)
