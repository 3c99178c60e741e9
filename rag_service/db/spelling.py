"""A collection's own vocabulary for typo correction (``retrieve/spelling.py``): which query words it lacks, and
which spellings near one it holds.

No word list and no extension: the vocabulary is ``lexeme_stats`` (the lexemes of the collection's chunks under its
text-search configuration, with their document frequency, kept by the triggers and the bulk path alike), probed by
its primary key. Lexemes are stems (``decorator``, ``decorate`` and ``decorated`` are all ``decor``), so a spelling
is looked up by its stem and its written form is read from the text of a bounded sample of the chunks holding that
stem (the form the user sees and the vector arm reads; the keyword arm searches the stem either way).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

#: chunks holding a stem whose text is read to tell whether (and how often) the collection writes a spelling of it
SAMPLE_CHUNKS = 64
#: chunks holding a stem read at most to tell whether a spelling none of the ``SAMPLE_CHUNKS`` writes is written at all
DEEP_CHUNKS = 1024
#: spellings of the most frequent stems whose text is read, per word
RANKED_SPELLINGS = 8

# each word with a lexeme (not a stop word), and whether the collection holds one of its lexemes; one primary-key probe
# per word
_KNOWN = text(
    "SELECT w.word, EXISTS (SELECT 1 FROM unnest(v.lexemes) AS l(lexeme) JOIN lexeme_stats s "
    "ON s.collection = CAST(:collection AS varchar) AND s.lexeme = l.lexeme) AS known "
    "FROM unnest(CAST(:words AS text[])) AS w(word) "
    "CROSS JOIN LATERAL (SELECT tsvector_to_array(to_tsvector(CAST(:fts_config AS regconfig), w.word)) AS lexemes) v "
    "WHERE cardinality(v.lexemes) > 0"
)

# The spellings among :candidates that are stop words (no lexeme: words of every text), and the :ranked whose stems
# most chunks hold (at least :min_doc_freq), each with how many of the first :sample chunks holding its stem write it
# (case-insensitively, as a whole word: ``strpos`` first, cheap, then the regex) and whether the collection writes it:
# when none of those does and its stem is more frequent than those of the spellings seen (else it cannot be chosen),
# whether one of the first :deep does. MATERIALIZED: the stems are looked up before any chunk is read (inlined, the
# planner read chunks for every candidate: 255 ms for a word of 5 letters).
_CANDIDATES = text(
    "WITH v AS MATERIALIZED (SELECT c.word, "
    "tsvector_to_array(to_tsvector(CAST(:fts_config AS regconfig), c.word)) AS lexemes "
    "FROM unnest(CAST(:candidates AS text[])) AS c(word)), "
    "known AS MATERIALIZED (SELECT v.word, s.doc_freq FROM v CROSS JOIN LATERAL unnest(v.lexemes) AS l(lexeme) "
    "JOIN lexeme_stats s ON s.collection = CAST(:collection AS varchar) AND s.lexeme = l.lexeme "
    "WHERE s.doc_freq >= :min_doc_freq ORDER BY s.doc_freq DESC, v.word LIMIT :ranked), "
    "counted AS MATERIALIZED (SELECT k.word, k.doc_freq, (SELECT count(*) FROM (SELECT c.header_path, c.content "
    "FROM document_chunks c WHERE c.collection = CAST(:collection AS varchar) "
    "AND c.content_tsv @@ plainto_tsquery(CAST(:fts_config AS regconfig), k.word) LIMIT :sample) d "
    "WHERE strpos(lower(concat_ws(' ', d.header_path, d.content)), k.word) > 0 "
    "AND concat_ws(' ', d.header_path, d.content) ~* ('\\m' || k.word || '\\M')) AS seen FROM known k) "
    "SELECT v.word, 0 AS doc_freq, 0 AS seen, true AS written FROM v WHERE cardinality(v.lexemes) = 0 "
    "UNION ALL "
    "SELECT k.word, k.doc_freq, k.seen, k.seen > 0 OR k.doc_freq > coalesce((SELECT max(w.doc_freq) FROM counted w "
    "WHERE w.seen > 0), 0) AND EXISTS (SELECT 1 FROM (SELECT c.header_path, c.content "
    "FROM document_chunks c WHERE c.collection = CAST(:collection AS varchar) "
    "AND c.content_tsv @@ plainto_tsquery(CAST(:fts_config AS regconfig), k.word) LIMIT :deep) d "
    "WHERE strpos(lower(concat_ws(' ', d.header_path, d.content)), k.word) > 0 "
    "AND concat_ws(' ', d.header_path, d.content) ~* ('\\m' || k.word || '\\M')) AS written FROM counted k"
)


@dataclass(frozen=True, slots=True)
class Spelling:
    """A spelling near a query word: a stop word of the configuration (``doc_freq`` 0), or a word whose stem
    ``doc_freq`` chunks of the collection hold, ``seen`` of the first ``SAMPLE_CHUNKS`` of them writing it so.
    ``written``: a stop word, or a spelling some chunk writes; else it may be no word at all, only a string the stemmer
    maps to a stem the collection holds (``polarable``: ``polar``), and it is not known when it could not be chosen."""

    word: str
    doc_freq: int
    seen: int
    written: bool

    @property
    def stop_word(self) -> bool:
        """A word the configuration does not index (``does``, ``should``): one of every text's most frequent."""
        return self.doc_freq == 0


def known_words(session: Session, *, collection: str, fts_config: str, words: Sequence[str]) -> dict[str, bool]:
    """Each of ``words`` (lower case) that is no stop word, and whether ``collection`` holds one of its lexemes (the
    word, or an inflection of it)."""
    if not words:
        return {}
    params = {"words": list(words), "fts_config": fts_config, "collection": collection}
    return {row.word: row.known for row in session.execute(_KNOWN, params)}


def likeliest_spellings(
    session: Session, *, collection: str, fts_config: str, candidates: Collection[str], min_doc_freq: int
) -> list[Spelling]:
    """Of ``candidates`` (lower-case spellings), the stop words and the ``RANKED_SPELLINGS`` whose stems most chunks
    of ``collection`` hold, at least ``min_doc_freq``."""
    if not candidates:
        return []
    params = {
        "candidates": sorted(candidates),
        "fts_config": fts_config,
        "collection": collection,
        "min_doc_freq": min_doc_freq,
        "sample": SAMPLE_CHUNKS,
        "ranked": RANKED_SPELLINGS,
        "deep": DEEP_CHUNKS,
    }
    rows = session.execute(_CANDIDATES, params).all()
    return [Spelling(word, int(df), int(seen), bool(written)) for word, df, seen, written in rows]
