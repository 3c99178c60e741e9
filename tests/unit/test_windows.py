"""Parents cut to windows around their matched child so every result fits the token budget."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from rag_service.result import ChunkScores, RetrievedChunk
from rag_service.retrieve.windows import fit_to_budget, water_level, window_span
from tests.retrieved import span_chunk


def _count(text: str) -> int:
    return len(text.split())


def _parent(doc: str, start: int, end: int, match: tuple[int, int], chunk_id: int = 1) -> RetrievedChunk:
    return span_chunk(
        doc,
        start,
        end,
        chunk_id=chunk_id,
        scores=ChunkScores(),
        chunk_type="parent",
        is_parent=True,
        match_start=match[0],
        match_end=match[1],
    )


@given(st.lists(st.integers(0, 500), max_size=12), st.integers(0, 3000))
def test_water_level_is_the_largest_level_that_fits(sizes: list[int], budget: int) -> None:
    level = water_level(sizes, budget)
    if sum(sizes) <= budget:
        assert level == max(sizes, default=0)
    else:
        assert sum(min(s, level) for s in sizes) <= budget
        assert sum(min(s, level + 1) for s in sizes) > budget


def test_small_parents_stay_whole_and_a_long_one_becomes_a_window_around_its_match() -> None:
    words = [f"w{i}" for i in range(1000)]
    doc = "\n".join(" ".join(words[i : i + 10]) for i in range(0, 1000, 10))
    small = _parent(doc, 0, 59, (0, 20), chunk_id=1)
    match = (doc.index("w500"), doc.index("w520"))
    big = _parent(doc, 60, len(doc), match, chunk_id=2)
    fitted = fit_to_budget([small, big], budget=120, count=_count)
    assert fitted[0] == small
    window = fitted[1]
    assert window.start_char <= match[0] and window.end_char >= match[1]
    assert window.content == doc[window.start_char : window.end_char]
    assert (window.match_start, window.match_end) == match
    assert _count(small.content) + _count(window.content) <= 125
    assert window.content.startswith("w") and not window.content.endswith("\n")  # whole lines where it can


def test_children_are_never_cut_and_everything_fitting_is_unchanged() -> None:
    doc = "a " * 400
    child = _parent(doc, 0, 800, (0, 800))
    child = replace(child, is_parent=False, chunk_type="child")
    assert fit_to_budget([child], budget=10, count=_count) == [child]
    assert fit_to_budget([child], budget=10_000, count=_count) == [child]


@given(
    st.integers(0, 400),
    st.integers(0, 400),
    st.integers(1, 600),
    st.text(alphabet="ab \n", min_size=400, max_size=400),
)
def test_window_span_holds_the_match_and_stays_in_the_parent(a: int, b: int, chars: int, text: str) -> None:
    start, end = 0, len(text)
    m0, m1 = sorted((a, b))
    lo, hi = window_span(start, end, m0, m1, text, chars)
    assert start <= lo <= m0 <= m1 <= hi <= end
    assert hi - lo <= max(chars, m1 - m0)


def test_a_window_in_a_paragraph_on_one_line_starts_and_ends_at_sentences() -> None:
    sentences = [f"Sentence {i} says something about the service (with detail {i})." for i in range(60)]
    doc = " ".join(sentences)  # one line: no line break to move to
    match = (doc.index("Sentence 30 "), doc.index("Sentence 31 "))
    window = fit_to_budget([_parent(doc, 0, len(doc), match)], budget=80, count=_count)[0]
    assert window.start_char <= match[0] and window.end_char >= match[1]
    assert window.content.startswith("Sentence ") and window.content.endswith(").")
    assert window.start_char > 0 and window.end_char < len(doc)


def test_a_window_in_one_long_sentence_starts_and_ends_on_whole_words() -> None:
    words = [f"word{'x' * (i % 5)}{i:03d}" for i in range(400)]  # words of uneven lengths
    doc = "Please " + " ".join(words) + " end."  # no sentence, line or paragraph break to move to
    match = (doc.index(words[200]), doc.index(words[201]) + len(words[201]))
    window = fit_to_budget([_parent(doc, 0, len(doc), match)], budget=60, count=_count)[0]
    assert 0 < window.start_char <= match[0] and match[1] <= window.end_char < len(doc)
    assert doc[window.start_char - 1] == " " and doc[window.end_char] == " "  # it began mid-word ("rd117 ...")
    assert window.content.split()[0] in words and window.content.split()[-1] in words
