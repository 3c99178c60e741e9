"""LexRank (Erkan and Radev, 2004) as sumy 0.13 computes it, without the import of NLTK that sumy's carries.

Written here because sumy's summarizers import its stemmers, which import NLTK, whose package init (collocations,
``scipy.stats``) took ~2.4 s in every process that summarises: three quarters of a cold ``rag reindex`` of one
file. The rest is sumy's ``LexRankSummarizer``: words lower-cased, sumy's English stop words left out, the rest
stemmed; tf over a sentence's most frequent term, idf ``ln(n / (1 + df))``; the idf-modified cosine of every pair,
an edge where it exceeds 0.1; rows divided by their degree; the power method until a step moves less than 0.1.
The stemmer is Snowball's English (``snowballstemmer`` 2.2, the algorithm NLTK's is: 4 of 39,518 words of the
visible datasets stem differently, all ending in ``-ization``). ``tests/unit/test_lexrank.py`` compares the
summaries with sumy's own on every visible document.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cache, lru_cache

#: an edge joins two sentences whose idf-modified cosine exceeds this (sumy's ``threshold``)
THRESHOLD = 0.1
#: the power method stops when a step moves the scores by no more than this (sumy's ``epsilon``)
EPSILON = 0.1
#: distinct words whose stems are kept
STEM_CACHE_WORDS = 65_536


@cache
def _stem() -> Callable[[str], str]:
    """Snowball's English stem of a word, cached (documents repeat their words: the summaries of 45 documentation
    pages took 1.5 s uncached, 0.4 s cached), from any thread: a stemmer object holds the word it works on, so each
    thread has its own."""
    import snowballstemmer

    local = threading.local()

    @lru_cache(maxsize=STEM_CACHE_WORDS)
    def stem(word: str) -> str:
        stemmer = getattr(local, "stemmer", None)
        if stemmer is None:
            stemmer = local.stemmer = snowballstemmer.stemmer("english")
        return stemmer.stemWord(word)  # type: ignore[no-any-return]

    return stem


@cache
def _stop_words() -> frozenset[str]:
    from sumy.utils import get_stop_words  # a word list read from sumy's data: no NLTK

    return frozenset(word.lower() for word in get_stop_words("english"))


def _terms(words: Sequence[str]) -> list[str]:
    stop, stem = _stop_words(), _stem()
    return [stem(word) for word in (w.lower() for w in words) if word not in stop]


def scores(sentence_words: Sequence[Sequence[str]]) -> list[float]:
    """Each sentence's LexRank centrality, given its words (as sumy's ``LexRankSummarizer`` rates them)."""
    import numpy as np  # not at import: an unchanged reindex, which summarises nothing, loads no numpy

    terms = [_terms(words) for words in sentence_words]
    count = len(terms)
    if count == 0:
        return []
    counts = [Counter(t) for t in terms]
    vocabulary = {term: column for column, term in enumerate(dict.fromkeys(t for c in counts for t in c))}
    df = Counter(term for c in counts for term in c)
    idf = np.array([math.log(count / (1 + df[term])) for term in vocabulary])
    weights = np.zeros((count, len(vocabulary)))
    for row, c in enumerate(counts):
        top = max(c.values()) if c else 1
        for term, tf in c.items():
            weights[row, vocabulary[term]] = tf / top
    weights *= idf
    norms = np.sqrt((weights**2).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = (weights @ weights.T) / np.outer(norms, norms)
    cosine[~np.isfinite(cosine)] = 0.0  # a sentence with no weighted term is like no other
    edges = (cosine > THRESHOLD).astype(float)
    degrees = edges.sum(axis=1)
    degrees[degrees == 0] = 1
    matrix = edges / degrees[:, None]
    p = np.full(count, 1.0 / count)
    step = 1.0
    # a graph without edges (no sentence has a term of nonzero idf) gives NaN scores and stops, as sumy's does
    with np.errstate(divide="ignore", invalid="ignore"):
        while step > EPSILON:
            following = matrix.T @ p
            following /= np.linalg.norm(following)
            step = float(np.linalg.norm(following - p))
            p = following
    return [float(score) for score in p]


def central_sentences(
    sentences: Sequence[str], count: int, *, words: Callable[[str], Sequence[str]], lead_weight: float
) -> set[str]:
    """The ``count`` sentences rated highest when each one's LexRank centrality is divided by
    ``1 + position / lead_weight`` and the first always leads (the summary's rule); duplicates rate as one."""
    rating = dict(zip(sentences, scores([words(s) for s in sentences]), strict=True))
    position = {sentence: at for at, sentence in enumerate(sentences)}  # a repeated sentence: its last place
    weighted = {s: math.inf if position[s] == 0 else r / (1.0 + position[s] / lead_weight) for s, r in rating.items()}
    ranked = sorted(range(len(sentences)), key=lambda at: weighted[sentences[at]], reverse=True)
    return {sentences[at] for at in ranked[:count]}
