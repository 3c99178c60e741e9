"""How much of a question its best results hold: the idf-weighted share of its lexemes in a chunk.

A second, lexical piece of evidence for the relevance floor (``retrieve/relevance.py``): a short question whose
best passage the embedding model scores low can still be answerable when a result holds its rare words (the
words the collection has few of weigh most). Each lexeme weighs its BM25 idf in the collection
(``lexeme_stats``; a lexeme the collection lacks weighs the most); the share of a chunk is the weight of the
question's lexemes its ``content_tsv`` holds (title and header path included) over the weight of all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.orm import Session

_HELD_SHARE = text(
    "WITH q AS (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector(CAST(:fts_config AS regconfig), :words))) "
    "AS lexeme), "
    "w AS (SELECT q.lexeme, ln(1 + (n.chunk_count - coalesce(s.doc_freq, 0) + 0.5) / (coalesce(s.doc_freq, 0) + 0.5)) "
    "AS idf FROM q JOIN collection_stats n ON n.collection = :collection "
    "LEFT JOIN lexeme_stats s ON s.collection = :collection AND s.lexeme = q.lexeme), "
    "c AS (SELECT id, tsvector_to_array(content_tsv) AS held FROM document_chunks "
    "WHERE collection = :collection AND id = ANY(CAST(:ids AS bigint[]))) "
    "SELECT c.id, coalesce(sum(w.idf) FILTER (WHERE w.lexeme = ANY(c.held)), 0) "
    "/ nullif((SELECT sum(idf) FROM w), 0) AS share FROM c CROSS JOIN w GROUP BY c.id"
)


def held_shares(
    session: Session, *, collection: str, fts_config: str, words: str, chunk_ids: Sequence[int]
) -> dict[int, float]:
    """The idf-weighted share of the lexemes of ``words`` each of ``chunk_ids`` holds (0..1; 0 when ``words`` has no
    lexeme, the collection no statistics, or the chunk is not in the collection)."""
    if not chunk_ids:
        return {}
    params = {"collection": collection, "fts_config": fts_config, "words": words, "ids": [int(i) for i in chunk_ids]}
    found = {int(i): float(share or 0.0) for i, share in session.execute(_HELD_SHARE, params).all()}
    return {int(i): found.get(int(i), 0.0) for i in chunk_ids}

