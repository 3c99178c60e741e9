"""Quoted phrases that no chunk holds are searched as words, and the call says so (audit 56a, D1 and D2).

A phrase is a filter on the keyword arm: one the collection lacks (retyped from memory, a traceback's
``File "/home/..."`` lines) left that arm empty, and a hybrid call answered from its vector arm alone without a
word in ``metrics.degraded``. A phrase some chunk holds is kept as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from rag_service.db.phrases import absent_phrases
from rag_service.db.search import ChunkFilters, SearchRequest
from rag_service.result import RetrievalMetrics


def phrases_as_words(
    session: Session, probe: SearchRequest, phrases: Sequence[str], metrics: RetrievalMetrics
) -> list[str]:
    """The ``phrases`` to search as words: those no chunk of ``probe``'s collection (within its filters) holds,
    each named in one ``metrics.degraded`` line; none when ``probe``'s keyword arm does not run."""
    if not phrases or not probe.runs_keyword:
        return []
    absent = absent_phrases(session, probe, phrases)
    if absent:
        where = "passing the call's filters" if probe.filters != ChunkFilters() else "of the collection"
        quoted = ", ".join(f'"{phrase}"' for phrase in absent)
        phrase = "phrases" if len(absent) > 1 else "phrase"
        metrics.degrade(
            "query",
            f"no chunk {where} holds the quoted {phrase} {quoted}: the keyword arm searched its words instead "
            "(a quoted phrase must be verbatim in a document)",
        )
    return absent
