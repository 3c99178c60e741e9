"""A misspelt query word is searched as the collection spells it (audit 56a, D5 and F3).

A word the collection lacks is a lexeme no chunk holds, so the keyword arm drops it, and the vector arm reads its
broken word pieces: one typo per question cost ray-docs-qa 0.056 nDCG@10. A word is taken for a typo only when it is
plain (ASCII letters only, ``MIN_LETTERS`` or more, lower case or capitalised: no identifier, acronym, number, path or
word of another script) and the collection holds neither it nor an inflection of it (its stem under the collection's
text-search configuration is not in ``lexeme_stats``). Its spelling is the collection's most frequent word one edit
away (a deletion, an insertion, a substitution or a swap of neighbours), or, for a word of ``TWO_EDIT_LETTERS`` letters
or more with none one edit away, two deletions or a deletion and an insertion, neither at the first letter
(``uncultured`` is no typo of ``cultured``): a stop word first (``doess`` -> ``does``), else the spelling whose stem
most chunks hold (at least ``MIN_DOC_FREQ``) among those the collection writes (a stem is no word: ``polarizable`` is
not ``polarable``, which stems to ``polar``). Everything comes from the collection: no word list, no extension.

A word the collection lacks may be a real word all the same (``curly brace``: the collection writes ``curl``; a protein
named ``Merlin``; ``adept``): a word the embedding model's tokenizer reads as one token of its vocabulary is no typo
(``model_words``; the bundled all-MiniLM-L6-v2's is BERT uncased WordPiece: ``curly`` is one token, ``decorater``
two pieces), and the vector arm reads it as the user meant it. The window fit's tokenizer is asked
(``unreadable.query_window``: the bundled model's files, no model loaded), only for words the collection lacks, and
whichever arms search; a model without one (the hashing embedder of the tests) has no vocabulary, so no word is
exempt. Of the corrections made on the audit's misspelt questions, the only ones of such words but those the
questions already held (``curly``, ``Merlin``, ``adept``, ``adopt``) were ray-docs-qa's ``custer`` for ``cluster`` (1
of 194 with one typo per question, 2 of 332 with two).

The query is searched respelled, by both arms, the calibration and the reranker (``respell``), and
``metrics.degraded`` says so in one line. The user's word matched no chunk in the keyword arm, so only the vector arm
loses its reading; searched beside the user's query instead (one more variant merged by RRF, as ``expand_query``'s
are), the respelled one gained about half as much on misspelt questions (ray-docs-qa, one typo per question, hybrid
nDCG@10: 0.364 as asked, 0.403 beside, 0.425 instead) and no more on the sets as asked (a mean of -0.0003 beside). A
query with more than ``MAX_UNKNOWN`` such words is left as it is: it is rather in another language, or on a subject
the collection lacks, than misspelt. Cost: one primary-key probe per plain word, in one statement (every word known:
the common case); one more statement per word respelled (a few ms).

Off by default (``RAG_TYPO_CORRECTION``): a default must raise the visible sets' mean and lower none by more than
0.005, and on the sets as asked, whose few real typos it respells (6 of ray-docs-qa's 217 questions, 10 of SciFact's
300, none of anthropic-docs-qa's 100), nDCG@10 hybrid / vector / BM25 moved by +0.0007 / -0.0010 / +0.0007
(ray-docs-qa), 0 / 0 / 0 (anthropic-docs-qa) and -0.0023 / -0.0002 / -0.0010 (SciFact): a mean of -0.0003. SciFact's
loss is three right corrections (``florescent``, ``methyltrasnferase``, ``lamelliopodia``) of words its relevant
abstracts do not hold, which then ranked other abstracts higher. Leaving out spellings held by fewer than 1.5% of the
chunks passed the rule (a mean of +0.0001), but only a threshold between two questions' words does (``already``, 1.17%
of ray-docs-qa's chunks, ranked worse; ``preprocesses``, 1.90%, a wrong correction of ``reprocesses``, ranked better),
and it lost 11% to 91% of the hybrid typo gain: not kept. With one typo in each question, hybrid rose by +0.066 /
+0.038 / +0.010 (ray / anthropic / SciFact), with two by +0.109 / +0.048 / +0.032.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session

from rag_service.config import Settings
from rag_service.db.spelling import Spelling, known_words, likeliest_spellings
from rag_service.embed import Embedder
from rag_service.errors import ModelLoadError
from rag_service.result import RetrievalMetrics
from rag_service.retrieve.unreadable import query_window

#: the embedding model's token count of each text, its special tokens left out (``model_window.ModelWindow.count``)
TokenCount = Callable[[Sequence[str]], list[int]]

#: shorter words are left alone: one edit from a short word is another word too often
MIN_LETTERS = 5
#: words this long with no spelling one edit away may have one two edits away
TWO_EDIT_LETTERS = 8
#: a spelling's stem must be held by at least this many chunks (audit 56a's "seen 3+ times", chosen before any set
#: was measured with it)
MIN_DOC_FREQ = 3
#: a query with more plain words the collection lacks is not respelled at all
MAX_UNKNOWN = 3
#: plain words checked per query (``query.MAX_QUERY_WORDS``: the keyword arm reads no more)
MAX_CHECKED = 32

_LETTERS = string.ascii_lowercase
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters of any script
# a run of ASCII letters standing alone: not part of a path, a dotted or snake_case name, a flag, an -exclusion, a
# call, a number or a word of other letters
_PLAIN = re.compile(r"(?<![\w.\-/\\@#$%'’])[A-Za-z]+(?![\w\-/\\@(])(?![.:]\w)")


def _plain(match: re.Match[str]) -> bool:
    word = match.group(0)
    if len(word) < MIN_LETTERS:
        return False
    return word.islower() or word.istitle()


def plain_words(text: str) -> dict[str, str]:
    """The words of ``text`` that may be typos: each in lower case, mapped to its first spelling as written."""
    words: dict[str, str] = {}
    for match in _PLAIN.finditer(text):
        if _plain(match) and len(words) < MAX_CHECKED:
            words.setdefault(match.group(0).lower(), match.group(0))
    return words


def model_words(words: Sequence[str], count: TokenCount | None) -> set[str]:
    """The ``words`` (lower case) the embedding model reads as one token of its vocabulary, by ``count``: words of the
    language it learnt (``curly``, ``adept``), where a typo is read in pieces (``decorater``: ``deco`` ``##rater``).
    None without a model (``count`` None)."""
    if count is None or not words:
        return set()
    return {word for word, tokens in zip(words, count(list(words)), strict=True) if tokens == 1}


def _splits(word: str) -> list[tuple[str, str]]:
    return [(word[:i], word[i:]) for i in range(len(word) + 1)]


def one_edit(word: str) -> set[str]:
    """Every spelling one edit from ``word``: a deletion, a swap of neighbours, a substitution, an insertion."""
    splits = _splits(word)
    deleted = {a + b[1:] for a, b in splits if b}
    swapped = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaced = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserted = {a + c + b for a, b in splits for c in _LETTERS}
    return (deleted | swapped | replaced | inserted) - {word}


def two_edits(word: str) -> set[str]:
    """Every spelling two deletions, or a deletion and an insertion, from ``word``, its first letter kept."""
    first, rest = word[0], word[1:]
    once = {rest[:i] + rest[i + 1 :] for i in range(len(rest))}
    twice = {d[:i] + d[i + 1 :] for d in once for i in range(len(d))}
    moved = {d[:i] + c + d[i:] for d in once for i in range(len(d) + 1) for c in _LETTERS}
    return {first + s for s in twice | moved} - {word}


def _rank(spelling: Spelling) -> tuple[bool, int, int, int, str]:
    """A stop word first; else the stem most chunks hold, the spelling most written of it, the shorter, a-z."""
    return (not spelling.stop_word, -spelling.doc_freq, -spelling.seen, len(spelling.word), spelling.word)


def _spelling(session: Session, word: str, *, collection: str, fts_config: str) -> str | None:
    """The collection's likeliest spelling of ``word`` (lower case), or None."""
    for candidates in (one_edit(word), two_edits(word) if len(word) >= TWO_EDIT_LETTERS else set()):
        found = likeliest_spellings(
            session, collection=collection, fts_config=fts_config, candidates=candidates, min_doc_freq=MIN_DOC_FREQ
        )
        written = [s for s in found if s.written]
        if written:
            return min(written, key=_rank).word
    return None


def spellings(
    session: Session,
    query: str,
    *,
    collection: str,
    fts_config: str,
    count: Callable[[], TokenCount | None],
    known: dict[str, bool],
) -> dict[str, str]:
    """Each word of ``query`` taken for a typo, as first written, mapped to the collection's spelling of it
    (capitalised where the word was; empty: none). ``known``: ``known_words`` of at least its ``plain_words``.
    ``count()`` gives the embedding model's token count (None: no model), asked only when a word is no word of the
    collection: a word of the model's vocabulary is no typo."""
    words = plain_words(query)
    unknown = {word for word in words if known.get(word) is False}
    if len(unknown) > MAX_UNKNOWN:
        return {}
    unknown -= model_words(sorted(unknown), count() if unknown else None)
    fixes = {}
    for word in (w for w in words if w in unknown):
        spelling = _spelling(session, word, collection=collection, fts_config=fts_config)
        if spelling is not None:
            typed = words[word]
            fixes[typed] = spelling.capitalize() if typed.istitle() else spelling
    return fixes


def respelled(query: str, fixes: dict[str, str]) -> str:
    """``query`` with each plain word of ``fixes`` (any case) replaced by its spelling, capitalised where it was."""
    lower = {typed.lower(): spelling.lower() for typed, spelling in fixes.items()}

    def respell(match: re.Match[str]) -> str:
        word = match.group(0)
        spelling = lower.get(word.lower()) if _plain(match) else None
        if spelling is None:
            return word
        return spelling.capitalize() if word.istitle() else spelling

    return _PLAIN.sub(respell, query)


def query_words(query: str) -> list[str]:
    """The words of ``query`` ``unknown_note`` reads: runs of letters of any script, lower case, each once, the first
    ``MAX_CHECKED``."""
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))[:MAX_CHECKED]


def unknown_note(words: Sequence[str], known: dict[str, bool]) -> str | None:
    """One line when more than ``MAX_UNKNOWN`` of a query's ``words`` (``query_words``), and at least half of them, are
    no words of the collection (``known``: ``known_words`` of them; nor inflections of one): a question in another
    language than the documents (audit 56a: German and Spanish questions on English docs lost 0.1-0.3 nDCG@10 with no
    word said), or on a subject they lack; else None. Stop words and numbers do not count. Chosen before measuring:
    none of the visible sets' 617 questions gets it, 16 and 13 of ray-docs-qa's 20 questions in German and Spanish
    do, 131 of SciFact's 300 asked of ray-docs-qa."""
    counted = [word for word in words if word in known]  # stop words have no lexeme: not counted
    missing = [word for word in counted if not known[word]]
    if len(missing) <= MAX_UNKNOWN or 2 * len(missing) < len(counted):
        return None
    shown = ", ".join(f'"{word}"' for word in missing[:5]) + (", ..." if len(missing) > 5 else "")
    return (
        f"{len(missing)} of its {len(counted)} words appear nowhere in the collection ({shown}): if it is in another "
        "language than the documents, ask in theirs; else they may not cover it"
    )


def respell(
    session: Session, query: str, collection: str, settings: Settings, metrics: RetrievalMetrics, embedder: Embedder
) -> str:
    """``query`` with the words taken for typos spelt as ``collection`` spells them, and one ``metrics.degraded`` line
    naming each; ``query`` itself when none is, or when ``settings.typo_correction`` is off. First, one line when most
    of its words are no words of the collection (``unknown_note``; one statement reads which words the collection
    holds, for both). ``embedder``'s vocabulary tells a word from a typo whichever arms search (``model_window``: the
    bundled model's is read from its files, no model is loaded)."""
    words = query_words(query)
    checked = list(dict.fromkeys([*words, *plain_words(query)])) if settings.typo_correction else words
    known = known_words(session, collection=collection, fts_config=settings.fts_config, words=checked)
    if note := unknown_note(words, known):
        metrics.degrade("query", note)
    if not settings.typo_correction:
        return query

    def count() -> TokenCount | None:
        try:
            window = query_window(embedder)
        except ModelLoadError as exc:  # a keyword-only search needs no model: respell without the guard, say so
            metrics.degrade("query", f"typo correction read no vocabulary of {embedder.model_id} ({exc})")
            return None
        return None if window is None else window[0]

    fixes = spellings(
        session, query, collection=collection, fts_config=settings.fts_config, count=count, known=known
    )
    if not fixes:
        return query
    pairs = ", ".join(f'"{spelling}" for "{typed}"' for typed, spelling in fixes.items())
    nouns = "words" if len(fixes) > 1 else "a word"
    metrics.degrade("query", f"searched {pairs} (not {nouns} of the collection)")
    return respelled(query, fixes)
