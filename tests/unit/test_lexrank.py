"""``ingest.lexrank`` picks what sumy's ``LexRankSummarizer`` picks, on every visible document, without NLTK."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import snowballstemmer

from rag_service.ingest import summary
from rag_service.ingest.lexrank import central_sentences
from rag_service.ingest.summary import LEAD_WEIGHT, MAX_SENTENCES, _sentences, prose
from tests.shared_data import SHARED

REPO = Path(__file__).resolve().parents[2]


def _documents() -> list[Path]:
    found = sorted((SHARED / "datasets").glob("*/docs/**/*.md"))
    assert len(found) > 400, f"the visible docs sets are missing under {SHARED / 'datasets'}"
    return found + sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]


class _Words:
    """The tokenizer sumy's document model asks for: the summary's own word regex."""

    language = "english"

    def to_words(self, sentence: str) -> tuple[str, ...]:
        return tuple(summary._WORD.findall(sentence))


def _sumy_picks(sentences: list[str], count: int, lead: float = LEAD_WEIGHT) -> set[str]:
    """The summary's rule on sumy's LexRank (as the service ran it before ``ingest.lexrank``), same stemmer."""
    from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence
    from sumy.summarizers.lex_rank import LexRankSummarizer
    from sumy.utils import get_stop_words

    class LeadWeightedLexRank(LexRankSummarizer):  # type: ignore[misc]
        @staticmethod
        def _get_best_sentences(found: Any, n: Any, rating: Any, *args: Any, **kwargs: Any) -> Any:
            order = {s: position for position, s in enumerate(found)}
            weighted = {s: math.inf if order[s] == 0 else r / (1.0 + order[s] / lead) for s, r in rating.items()}
            return LexRankSummarizer._get_best_sentences(found, n, weighted, *args, **kwargs)

    ranker = LeadWeightedLexRank(snowballstemmer.stemmer("english").stemWord)
    ranker.stop_words = get_stop_words("english")
    document = ObjectDocumentModel([Paragraph([Sentence(s, _Words()) for s in sentences])])
    return {str(s) for s in ranker(document, count)}


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # sumy's NaN scores of a graph without edges
def test_the_picks_are_sumys_on_the_visible_documents() -> None:
    """Every third visible document (sumy's pairwise loop in Python takes ~40 s for all of them; every one
    matched when this was written), three sentences each, as the summaries are made."""
    compared = 0
    for path in _documents()[::3]:
        sentences = _sentences(prose(path.read_text(encoding="utf-8")))[:MAX_SENTENCES]
        if len(sentences) > 3:
            ours = central_sentences(sentences, 3, words=summary._WORD.findall, lead_weight=LEAD_WEIGHT)
            assert ours == _sumy_picks(sentences, 3), path
            compared += 1
    assert compared > 100


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_repeated_and_wordless_sentences_rate_as_sumy_rates_them() -> None:
    sentences = [
        "The backup runs every night at two.",
        "Restores read the backup from cold storage.",
        "The backup runs every night at two.",  # a repeat: one rating, at its last place
        "It is what it is, and so it was.",  # stop words only: no weighted term, no edge at all
        "Operators check the restore logs every morning.",
    ]
    for count in (1, 2, 3):
        assert central_sentences(sentences, count, words=summary._WORD.findall, lead_weight=2.0) == (
            _sumy_picks(sentences, count, lead=2.0)
        )


def test_summarising_does_not_import_nltk() -> None:
    code = (
        "import sys; from rag_service.ingest.summary import extractive_summary; "
        "text = ' '.join(f'Sentence {i} says the backup of cluster {i % 3} runs nightly.' for i in range(12)); "
        "assert extractive_summary(text, sentences=2); print('nltk' in sys.modules, 'scipy' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.split() == ["False", "False"]


def test_stems_are_right_from_many_threads_at_once():
    """Summaries run on the HTTP server's threads: one shared Snowball stemmer keeps the word it works on, so two
    threads stemming at once got each other's stems or an IndexError (seen with the old shared stemmer)."""
    import itertools
    import random
    import threading

    from rag_service.ingest import lexrank

    roots = ["organ", "nation", "connect", "general", "rational", "hope", "run", "care", "relate", "form", "act"]
    endings = ["", "s", "ed", "ing", "ization", "izations", "ational", "fulness", "ively", "ousness", "ments"]
    words = [f"{prefix}{root}{ending}" for prefix, root, ending in itertools.product("abcdefghij", roots, endings)]
    reference = snowballstemmer.stemmer("english")
    expected = {word: reference.stemWord(word) for word in words}
    lexrank._stem.cache_clear()
    stem = lexrank._stem()
    wrong: list[str] = []
    failures: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            wrong.extend(w for w in random.Random(seed).sample(words, len(words)) if stem(w) != expected[w])
        except Exception as error:  # a shared stemmer's state torn mid-word
            failures.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within a few words
    try:
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
        lexrank._stem.cache_clear()
    assert (failures, wrong) == ([], [])
