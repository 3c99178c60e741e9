"""The user's query: validation, parsing for PostgreSQL full-text search, and cheap expansion.

``parse_query`` reads websearch syntax: ``"quoted phrases"``, ``-term`` / ``-"phrase"`` (one ``-`` at
the start of a token, before a word of two letters or more, or a quote) to exclude, everything else a word:
``--address``, ``-n`` (command-line flags) and ``-2`` (a number, a list such as ``E2f-1, -2, -3``) are words.
Quotes pair up from the left; an unbalanced last quote is literal (dropped, the text after it read as words),
not a phrase running to the end of the text as in ``websearch_to_tsquery``: a stray ``"`` made the rest of a
question a phrase no chunk holds (audit 56a, D1). ``as_words`` names phrases to read as words instead (the
retriever passes those no chunk of the collection holds). Nothing here ever raises on odd input.

``websearch_parts`` turns that into two strings for ``websearch_to_tsquery``, combined in SQL as
``websearch_to_tsquery(cfg, any_terms) && websearch_to_tsquery(cfg, required_terms)``:

* ``any_terms``: the words joined with `` or `` — a question matches documents with any of its words
  (an AND of every word of a natural-language question would match almost nothing);
* ``required_terms``: phrases as ``"a b"`` and exclusions as ``-x`` / ``-"a b"``, which keep their
  websearch meaning (phrase required, term excluded).

Words are made inert first. Inside an unquoted word, PostgreSQL's websearch parser treats ``'`` and
``\\`` as quoting/escaping (``don't or it's or bar`` parses to just ``'bar'``), ``! & | ( ) <`` as
operators and ``:`` as a weight/prefix marker, ``"`` as a phrase and a leading ``-`` as negation. So words are
split at those characters, stripped of leading and trailing punctuation (but a path's leading ``/``, which the
``file`` lexeme keeps), and the word ``or`` (any case) is dropped. Phrase text goes inside quotes, where only ``"``
is special.

The work per query is bounded whatever its content: ``validate_query`` cuts it to
``MAX_QUERY_CHARS`` characters, and ``parse_query`` keeps at most ``MAX_QUERY_WORDS`` distinct words,
``MAX_QUERY_FILTERS`` phrases and exclusions together, and ``MAX_PHRASE_WORDS`` words per phrase. What
is dropped is the least selective: the shortest words and filters (longer words are rarer), ties
by position; ``bounds_note`` says what was dropped, and the retriever reports it in ``metrics.degraded``.
PostgreSQL splits a word at most punctuation, so a kept word is also cut after ``MAX_WORD_PARTS`` runs of letters
and digits (into its parts, never to a prefix no lexeme equals: a long path is kept whole or left out,
``_cut_word``), a phrase or exclusion after ``MAX_PHRASE_PARTS``, each after ``MAX_TERM_CHARS`` characters: a
query reaches SQL with at most ``2 * MAX_QUERY_WORDS * MAX_WORD_PARTS`` word parts and ``MAX_QUERY_FILTERS *
MAX_PHRASE_PARTS`` filter parts, whatever its length.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field

from rag_service import knobs
from rag_service.errors import ConfigurationError, QueryError
from rag_service.keyword_text import folded, in_pairs

#: longer queries are cut (at a word boundary) to this many characters by ``validate_query``
MAX_QUERY_CHARS = knobs.MAX_QUERY_CHARS
#: distinct words searched per query (each is a BM25 posting list and a tsquery branch)
MAX_QUERY_WORDS = 32
#: quoted phrases and ``-exclusions`` per query, together (each is a tsquery filter on every candidate)
MAX_QUERY_FILTERS = 8
#: words kept of one phrase (a phrase is matched position by position)
MAX_PHRASE_WORDS = 16
#: parts (runs of letters and digits) kept of one word: PostgreSQL's parser makes ``a.b/c-d`` several
#: lexemes, so a word of punctuation-joined garbage would otherwise be hundreds of postings lists
MAX_WORD_PARTS = 8
#: parts kept of one phrase or exclusion: each is a position of the phrase match run on every candidate
MAX_PHRASE_PARTS = 16
#: characters kept of one word, phrase or exclusion (PostgreSQL skips words over 2,047 characters)
MAX_TERM_CHARS = 200

# a phrase (optionally excluded) between two quotes; or a run of other characters (a lone quote matches neither)
_TOKEN = re.compile(r'(-?)"([^"]*)"|([^\s"]+)')
# characters PostgreSQL's websearch parser gives a meaning to inside an unquoted word
_SPECIAL = re.compile(r"""["'\\!&|()<>:*\x00-\x1f\x7f\ud800-\udfff]+""")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PHRASE_UNSAFE = re.compile(r'["\x00-\x1f\x7f\ud800-\udfff]')
# a run of letters and digits: what PostgreSQL's parser can make a lexeme of
_PART = re.compile(r"[^\W_]+")
# a path's start that PostgreSQL's ``file`` lexeme keeps: the ``/`` (and the dots of ``/.aws``). After a space
# its parser reads ``~/.aws/x``, ``./run.sh``, ``../a/b`` as ``/.aws/x``, ``/run.sh``, ``/a/b``: so do the words
_PATH_START = re.compile(r"/\.*\Z")


@dataclass(slots=True)
class ParsedQuery:
    """A query split the websearch way; every entry is non-empty and safe to quote."""

    words: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    dropped_words: int = 0
    """distinct words left out by ``MAX_QUERY_WORDS``"""
    dropped_filters: int = 0
    """phrases and exclusions left out by ``MAX_QUERY_FILTERS``"""
    cut_terms: int = 0
    """kept words, phrases and exclusions shortened by ``MAX_WORD_PARTS``, ``MAX_PHRASE_PARTS``, ``MAX_TERM_CHARS``"""


def _most_selective(items: list[str], limit: int) -> list[str]:
    """The ``limit`` longest items (ties: the earlier), in their original order."""
    if len(items) <= limit:
        return items
    keep = sorted(sorted(range(len(items)), key=lambda i: (-len(items[i]), i))[:limit])
    return [items[i] for i in keep]


def _cut(term: str, max_parts: int) -> str:
    """``term`` up to the end of its ``max_parts``-th part and at most ``MAX_TERM_CHARS`` long."""
    term = term[:MAX_TERM_CHARS]
    for count, part in enumerate(_PART.finditer(term), start=1):
        if count == max_parts:
            return term[: part.end()]
    return term


def _cut_word(word: str) -> str:
    """``word`` within the bounds, never cut to a prefix no document lexeme can equal ("" when dropped).

    A word with a ``/`` or ``.`` (a path, a dotted name) is mostly one lexeme (``file``, ``host``): kept whole up to
    2 * ``MAX_WORD_PARTS`` parts and ``MAX_TERM_CHARS``, else dropped (a cut ``/a/b`` of ``/a/b/c`` matches nothing).
    Another (``a-b-c``, ``a_b_c``: parts indexed on their own) keeps its first ``MAX_WORD_PARTS`` parts, as words."""
    parts = len(_PART.findall(word))
    if parts <= MAX_WORD_PARTS and len(word) <= MAX_TERM_CHARS:
        return word
    if "/" in word or "." in word:
        return word if parts <= 2 * MAX_WORD_PARTS and len(word) <= MAX_TERM_CHARS else ""
    return " ".join(_PART.findall(_cut(word, MAX_WORD_PARTS)))


def _distinct(items: list[str]) -> list[str]:
    """Non-empty items holding a word character, first spelling of each (case-insensitive)."""
    seen: set[str] = set()
    kept: list[str] = []
    for item in items:
        if _has_word_character(item):
            _add(kept, seen, item)
    return kept


def _bounded_filter(text: str) -> str:
    return _cut(" ".join(text.split()[:MAX_PHRASE_WORDS]), MAX_PHRASE_PARTS)


def _bounded(parsed: ParsedQuery) -> ParsedQuery:
    longest = _most_selective(parsed.words, MAX_QUERY_WORDS)
    bounded = [_cut_word(_edge_stripped(w)) for w in longest]
    phrases = _distinct([_bounded_filter(p) for p in parsed.phrases])
    excluded = _distinct([_bounded_filter(x) for x in parsed.excluded])
    filters = _most_selective([*phrases, *excluded], MAX_QUERY_FILTERS)
    kept = set(filters)
    too_long = sum(not w for w in bounded)  # dropped by _cut_word: counted with the cut ones
    words = _distinct(bounded)
    cut = sum(w not in longest for w in words) + too_long
    cut += sum(f not in (*parsed.phrases, *parsed.excluded) for f in filters)
    return ParsedQuery(
        words=words,
        phrases=[p for p in phrases if p in kept],
        excluded=[x for x in excluded if x in kept],
        dropped_words=len(parsed.words) - len(words) - too_long,
        dropped_filters=len(parsed.phrases) + len(parsed.excluded) - len(filters),
        cut_terms=cut,
    )


def bounds_note(parsed: ParsedQuery) -> str | None:
    """One line saying what ``parse_query`` left out of this query, or None when nothing was."""
    parts = []
    if parsed.dropped_words:
        total = len(parsed.words) + parsed.dropped_words
        parts.append(f"kept the {len(parsed.words)} longest of {total} distinct words")
    if parsed.dropped_filters:
        kept = len(parsed.phrases) + len(parsed.excluded)
        parts.append(f"kept the {kept} longest of {kept + parsed.dropped_filters} phrases and -exclusions")
    if parsed.cut_terms:
        parts.append(
            f"cut (or, a path cut short, left out) {parsed.cut_terms} long words/phrases to "
            f"{MAX_WORD_PARTS}/{MAX_PHRASE_PARTS} letter-and-digit runs and {MAX_TERM_CHARS} characters"
        )
    return "; ".join(parts) + " (the per-query bounds of retrieve/query.py)" if parts else None


def _edge_stripped(piece: str) -> str:
    """``piece`` without leading/trailing punctuation, symbols, spaces and control characters, but a path's
    leading ``/`` (of ``/x``, ``~/x``, ``./x``, ``../x``), which the documents' lexeme keeps (audit 56a, D6)."""
    start, end = 0, len(piece)
    while start < end and unicodedata.category(piece[start])[0] in "PSZC":
        start += 1
    if start < end and (path := _PATH_START.search(piece, 0, start)):
        start = path.start()
    while end > start and unicodedata.category(piece[end - 1])[0] in "PSZC":
        end -= 1
    return piece[start:end]


def _has_word_character(text: str) -> bool:
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def _inert_words(token: str) -> list[str]:
    """The searchable words of one unquoted token, with nothing websearch would interpret."""
    words = []
    for piece in _SPECIAL.sub(" ", token).split():
        word = _edge_stripped(piece)
        if word and word.casefold() != "or" and _has_word_character(word):
            words.append(word)
    return words


def _phrase(text: str) -> str:
    """Phrase text with whitespace collapsed; empty when it holds no word character."""
    phrase = " ".join(_PHRASE_UNSAFE.sub(" ", text).split())
    return phrase if _has_word_character(phrase) else ""


def _add(items: list[str], seen: set[str], item: str) -> None:
    key = item.casefold()
    if item and key not in seen:
        seen.add(key)
        items.append(item)


def parse_query(text: str, *, pairs: bool = True, as_words: Collection[str] = ()) -> ParsedQuery:
    """Split ``text`` into words, required phrases and excluded terms (websearch semantics).

    Duplicates are dropped case-insensitively (first spelling kept). A lone ``-`` and the word ``or``
    are ignored; an excluded token that contains special characters becomes an excluded phrase. A
    phrase in ``as_words`` (as ``phrases`` holds it, any case) is read as its words instead.
    The result is bounded (``MAX_QUERY_WORDS``, ``MAX_QUERY_FILTERS``, ``MAX_PHRASE_WORDS``). The text is read
    as documents are (``keyword_text``): folded, and with ``pairs`` each run of Chinese, Japanese, Thai or Korean
    in a word becomes words of two characters, in a phrase or an exclusion a phrase of them.
    """
    parsed = ParsedQuery()
    seen_words: set[str] = set()
    seen_phrases: set[str] = set()
    seen_excluded: set[str] = set()
    split = in_pairs if pairs else str
    unquoted = {phrase.casefold() for phrase in as_words}
    for match in _TOKEN.finditer(folded(text)):
        negated, quoted, bare = match.groups()
        if bare is None and unquoted and not negated and _bounded_filter(_phrase(split(quoted))).casefold() in unquoted:
            for word in _inert_words(split(quoted)):
                _add(parsed.words, seen_words, word)
        elif bare is None:
            phrase = _phrase(split(quoted))
            _add(parsed.excluded if negated else parsed.phrases, seen_excluded if negated else seen_phrases, phrase)
        elif _is_exclusion(bare):
            _add(parsed.excluded, seen_excluded, " ".join(_inert_words(split(bare.lstrip("-")))))
        else:
            for word in _inert_words(split(bare)):
                _add(parsed.words, seen_words, word)
    return _bounded(parsed)


def _is_exclusion(token: str) -> bool:
    """``-word``: one dash right before two letters (``--flag``, ``-n`` and ``-2`` are words in a question)."""
    return len(token) > 2 and token[0] == "-" and token[1].isalpha() and token[2].isalpha()


def _quoted(term: str) -> str:
    return f'"{term}"' if " " in term else term


def websearch_parts(parsed: ParsedQuery) -> tuple[str, str]:
    """``(any_terms, required_terms)`` for ``websearch_to_tsquery``; either may be ``""``.

    ``any_terms`` is ``"w1 or w2 or ..."``; ``required_terms`` is ``'"p1" "p2" -x -"y z"'``.
    """
    any_terms = " or ".join(word for words in parsed.words for word in _inert_words(words))
    required = [f'"{phrase}"' for phrase in map(_phrase, parsed.phrases) if phrase]
    required += [f"-{term}" for term in _excluded_inert(parsed)]
    return any_terms, " ".join(required)


def excluded_terms(parsed: ParsedQuery) -> str:
    """The exclusions as one OR query for ``websearch_to_tsquery`` (``a or "b c"``) when the query has no
    phrase, else ``""``: the keyword arm then drops the chunks matching it (``SearchRequest.excluded_terms``)."""
    return "" if parsed.phrases else " or ".join(_excluded_inert(parsed))


def _excluded_inert(parsed: ParsedQuery) -> list[str]:
    """Each exclusion made inert, a phrase quoted (``x``, ``"y z"``); empty ones dropped."""
    inert = (" ".join(_inert_words(term)) for term in parsed.excluded)
    return [_quoted(term) for term in inert if term]


def validate_query(text: str, *, max_chars: int = MAX_QUERY_CHARS) -> str:
    """The query ready to search: stripped, control characters removed, at most ``max_chars`` long.

    Raises ``QueryError`` when nothing but whitespace is left. A longer query is not refused: its first and last
    ``max_chars // 2`` characters are kept, each cut at whitespace where there is some (not in CJK text), so a
    question after a long paste is still there for ``retrieve.focus`` to find (``cut_note`` says so). Lone surrogates
    (invalid in UTF-8 and in PostgreSQL) become ``?``.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ConfigurationError(
            f"max_chars ({max_chars!r}) must be a positive integer; the default is {MAX_QUERY_CHARS}"
        )
    if not isinstance(text, str):
        raise QueryError(f"query must be text, got {type(text).__name__}; pass the question as a string")
    cleaned = _CONTROL.sub(" ", text.encode("utf-8", errors="replace").decode("utf-8")).strip()
    if not cleaned:
        raise QueryError("query is empty; pass the question to search for")
    if len(cleaned) > max_chars:
        half = max(max_chars // 2, 1)
        tail = _head(cleaned[::-1], max_chars - half - 1)[::-1] if max_chars > 2 else ""
        cleaned = f"{_head(cleaned, half)}\n{tail}".strip()
    return cleaned


def _head(text: str, size: int) -> str:
    """``text``'s first ``size`` characters, cut at its last whitespace when that is in their second half."""
    head = text[: size + 1]
    boundary = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return (head[:boundary] if boundary >= size // 2 else text[:size]).strip()


def cut_note(query: str, max_chars: int = MAX_QUERY_CHARS) -> str | None:
    """One line for ``metrics.degraded`` when ``validate_query`` cut ``query``, else None."""
    size = len(query.strip())
    if size <= max_chars:
        return None
    return (
        f"the query is {size:,} characters: searched its first and last {max_chars // 2:,} "
        f"(a query's bound, {max_chars:,}); ask the question alone, or put it first or last"
    )


def bm25_text(parsed: ParsedQuery) -> str:
    """The words BM25 scores: the free words and the words of the quoted phrases (not the exclusions)."""
    return " ".join([*parsed.words, *parsed.phrases])
