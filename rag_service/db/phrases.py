"""Which of a query's quoted phrases no chunk holds: the keyword arm searches those as words.

A required phrase is a filter on the keyword arm (``bm25._holding_required_terms``): one that no chunk of the
collection (within the call's filters) holds left the arm empty, silently in hybrid (audit 56a, D1): a phrase
retyped from memory, a traceback's ``File "/home/..."`` lines. One statement: a phrase with a lexeme the collection
lacks (``lexeme_stats``, its primary key) is absent at once; the others get an ``EXISTS`` with the tsquery the filter
builds. The look-up comes first because the planner costs an ``EXISTS`` as stopping at an early match and scans
the collection's chunks for one that is not there (100 ms a phrase at 7,800 chunks; a GIN scan it does not choose).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import String, bindparam, case, exists, false, func, select
from sqlalchemy.orm import Session

from rag_service.db.models import DocumentChunk, LexemeStats
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
        tsquery = func.websearch_to_tsquery(cfg, value)
        array = func.tsvector_to_array(func.to_tsvector(cfg, value))
        lexemes = func.unnest(array).table_valued("lexeme").render_derived(name=f"lexemes_{index}")
        known = exists(LexemeStats.lexeme).where(
            LexemeStats.collection == request.collection, LexemeStats.lexeme == lexemes.c.lexeme
        )
        all_known = ~exists(select(lexemes.c.lexeme).where(~known))
        found = exists().where(*chunk_conditions(request), DocumentChunk.content_tsv.op("@@")(tsquery))
        held.append(case((all_known, found), else_=false()))  # CASE: the look-up is made first
    row = session.execute(select(*held)).one()
    return [phrase for phrase, found in zip(phrases, row, strict=True) if not found]
