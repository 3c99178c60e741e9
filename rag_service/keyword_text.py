"""The text the keyword arm reads: Unicode folded, and scripts written without spaces cut into character pairs.

PostgreSQL's text-search parser compares code points and splits only at spaces and punctuation, so with any
configuration:

- Chinese, Japanese, Thai, Lao, Khmer and Myanmar text (and Korean words with their particles) became one lexeme
  per clause: a word inside it never matched. Runs of those scripts are cut into overlapping pairs of characters
  (``全量备份`` -> ``全量 量备 备份``), as Lucene's CJKAnalyzer and pg_bigm do: a query's pairs meet a
  document's wherever the query's characters stand in it, and a quoted phrase is its pairs in a row.
- ``ＡＰＩ`` (full width), ``ｶﾀｶﾅ`` (half width) and a decomposed ``é`` are other lexemes than the same text typed
  plainly: the text is NFKC-normalised.
- A soft hyphen or a zero-width space inside a word (``Daten\\xadsicherung``) kept it one unmatchable lexeme: format
  characters are removed.

Names the parser reads whole or not at all are given to the keyword arm in words too, after a chunk's prefix
(``db.chunk_text.keyword_prefix``; audit 56a D7, 56b D2): every document's bare ``<name>`` (``<head_node_host>``, a
``tag`` to the parser, dropped: ``bare_tag_names``), and a code document's dotted and CamelCase names in parts
(``ds.repartition``, a ``host``, and ``ScalingConfig`` never met ``repartition`` and ``scaling config``:
``name_parts``). Documentation keeps its names whole: its code samples' names are made of the prose's own words, whose
weight their parts took (anthropic-docs-qa -0.016, ray-docs-qa's BM25 arm -0.020 nDCG@10; docs/benchmarks.md "Session
57").

Only what becomes a tsvector or a tsquery changes; stored texts and offsets stay as written. Documents are read
through the SQL function ``rag_keyword_text`` (migration 0021, ``KEYWORD_TEXT_FUNCTION``), queries through
``keyword_text`` here; ``tests/integration/test_keyword_text.py`` holds the two to the same output. ASCII text
is returned as it is by both.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from rag_service.text_breaks import NO_SPACE_SCRIPTS

#: the letters of the scripts written without spaces (``text_breaks``) and Hangul syllables: scripts the parser cannot
#: split into words (Hangul has spaces, but a word carries its particles: ``백업을`` for ``백업``)
_UNSPACED = NO_SPACE_SCRIPTS + "\uac00-\ud7af"
#: format characters that hide inside words (as regular-expression escapes, which Python and PostgreSQL read
#: alike): soft hyphen, zero-width space/joiners and direction marks, embeddings and overrides, word joiner and
#: invisible operators, byte-order mark
_INVISIBLE = r"\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff"
#: a character of such a run with one of the run on each side: written twice, it ends one pair and starts the next
_INTERIOR = f"(?<=[{_UNSPACED}])([{_UNSPACED}])(?=[{_UNSPACED}])"

_INVISIBLE_RE = re.compile(f"[{_INVISIBLE}]")
_INTERIOR_RE = re.compile(_INTERIOR)

#: the chunking strategies whose chunks are matched by the parts of their names too (``name_parts``)
NAME_PART_STRATEGIES = frozenset({"code"})


def reads_name_parts(chunker: str) -> bool:
    """Whether a document whose fingerprint is ``chunker`` (``code:1500:0:50:v10.3:...``) is chunked by one of the
    ``NAME_PART_STRATEGIES``: its chunks' header paths end in definitions' names, and names are read in parts."""
    return chunker.split(":", 1)[0] in NAME_PART_STRATEGIES
#: a name with parts: joined by dots between names (``ds.map``, ``tf.keras.Model``; not ``3.14``) or with a CamelCase
#: step (``getBits``, ``HTTPServer``), hyphens inside it; a method after a call (``f(x).getBits``), not in a path or a
#: URL (after ``/``), not part of a word with letters outside ASCII (``naïveBayes``)
_NAME = re.compile(
    r"(?<![A-Za-z0-9_/\u0080-\uffff])(?<![A-Za-z0-9_][.-])"
    r"(?=[A-Za-z0-9_.-]*?(?:[A-Za-z0-9_]\.[A-Za-z_]|[a-z0-9][A-Z]|[A-Z][A-Z][a-z]))"
    r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
)
#: where a name's parts meet: a dot or hyphen, before a CamelCase step's capital (``get|Bits``, ``HTTP|Server``)
_STEP = re.compile(r"[.-]|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
#: a bare ``<name>`` (a type parameter, a placeholder), which the parser drops as a tag; one with attributes is a tag
#: (a pattern PostgreSQL reads alike: ``db.contexts`` reads a section's so)
BARE_TAG = r"<([A-Za-z][A-Za-z0-9_.-]*)>"
_BARE_TAG = re.compile(BARE_TAG)

#: the same as ``keyword_text``, in SQL (the database's encoding must be UTF8 for ``normalize``; else the text is
#: given as it is, where no such character can be stored anyway). IMMUTABLE as each function it calls, and not
#: STRICT, so the planner inlines it
KEYWORD_TEXT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION rag_keyword_text(content text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $rag$
SELECT CASE WHEN content ~ '[^\\x01-\\x7f]' THEN regexp_replace(regexp_replace(normalize(content, NFKC),
    '[{_INVISIBLE}]', '', 'g'), '{_INTERIOR}', '\\1 \\1', 'g') ELSE content END
$rag$"""
#: a database in another encoding: the function passes its text through
KEYWORD_TEXT_PASS_THROUGH = """
CREATE OR REPLACE FUNCTION rag_keyword_text(content text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $rag$ SELECT content $rag$"""


def keyword_text(text: str) -> str:
    """``text`` as the keyword arm reads it: NFKC, no format characters, unspaced scripts in character pairs."""
    return in_pairs(folded(text))


def bare_tag_names(text: str) -> str:
    """The names inside ``text``'s bare ``<name>``s, which the parser drops as tags (``<head_node_host>``)."""
    return " ".join(tag[1] for tag in _BARE_TAG.finditer(text))


def name_parts(text: str) -> str:
    """The words the parser does not make of ``text``'s names: each dotted or CamelCase name's parts and each bare
    ``<name>``, as often as they occur (``ds.repartition(n) <T> getBits`` -> ``ds repartition get Bits T``)."""
    names = " ".join(_STEP.sub(" ", name[0]) for name in _NAME.finditer(text))
    return " ".join(words for words in (names, bare_tag_names(text)) if words)


def folded(text: str) -> str:
    """``text`` NFKC-normalised, without format characters (``keyword_text`` without the pairs)."""
    return text if text.isascii() else _INVISIBLE_RE.sub("", unicodedata.normalize("NFKC", text))


def in_pairs(text: str) -> str:
    """Each run of an unspaced script in ``text`` as its overlapping pairs of characters (``全量备份`` -> ``全量 量备
    备份``); a run of one or two characters stays as it is."""
    return text if text.isascii() else _INTERIOR_RE.sub(r"\1 \1", text)


def keyword_text_sql(expression: str) -> str:
    """``expression`` (SQL text) through ``rag_keyword_text``, for the statements that build tsvectors."""
    return f"rag_keyword_text({expression})"


def create_keyword_text_function(connection: Any) -> None:
    """Create (or replace) ``rag_keyword_text`` in ``connection``'s database (a SQLAlchemy connection): migration
    0021, and 0013 before it, whose contexts of stored documents are tokenized through it."""
    from sqlalchemy import text

    utf8 = connection.execute(text("SELECT current_setting('server_encoding') = 'UTF8'")).scalar_one()
    connection.execute(text(KEYWORD_TEXT_FUNCTION if utf8 else KEYWORD_TEXT_PASS_THROUGH))
