"""Which of a query's quoted phrases no chunk holds: the keyword arm searches those as words.

A required phrase is a filter on the keyword arm (``bm25._holding_required_terms``): one that no chunk of the
collection (within the call's filters) holds left the arm empty, silently in hybrid (audit 56a, D1): a phrase
retyped from memory, a traceback's ``File "/home/..."`` lines. One statement, one ``EXISTS`` per phrase through
the GIN index on ``content_tsv``, the same tsquery the filter builds.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import String, bindparam, exists, func, select
from sqlalchemy.orm import Session

from rag_service.db.models import DocumentChunk
from rag_service.db.search_request import SearchRequest, chunk_conditions, fts_config_expression


def absent_phrases(session: Session, request: SearchRequest, phrases: Sequence[str]) -> list[str]:
    """The ``phrases`` (as ``ParsedQuery.phrases`` holds them) that no chunk of ``request``'s collection passing
    its filters holds, in their order."""
    if not phrases:
        return []
    cfg = fts_config_expression(request)
    held = []
    for index, phrase in enumerate(phrases):
        value = bindparam(f"phrase_{index}", f'"{phrase}"', type_=String)
        tsquery = select(func.websearch_to_tsquery(cfg, value)).scalar_subquery()  # parsed once, not per row
        held.append(exists().where(*chunk_conditions(request), DocumentChunk.content_tsv.op("@@")(tsquery)))
    row = session.execute(select(*held)).one()
    return [phrase for phrase, found in zip(phrases, row, strict=True) if not found]
