"""Children grouped into their sections: each section once, scored from all its matching children."""

from __future__ import annotations

from rag_service.result import ChunkScores, RetrievedChunk
from rag_service.retrieve.parents import expand_to_parents
from tests.retrieved import span_chunk

DOC = "# A\none two three\n# B\nfour five six\n"


def _child(chunk_id: int, start: int, end: int, relevance: float, proximity: float | None = None) -> RetrievedChunk:
    return span_chunk(
        DOC,
        start,
        end,
        chunk_id=chunk_id,
        relevance=relevance,
        scores=ChunkScores(fused=relevance, proximity=proximity),
    )


SECTION_A = (DOC[0:18], 0, 18)
SECTION_B = (DOC[18:], 18, len(DOC))


def test_each_section_once_with_the_best_childs_match_span() -> None:
    children = [_child(1, 4, 8, 0.9), _child(2, 8, 17, 0.5), _child(3, 22, 26, 0.7)]
    parents = {1: SECTION_A, 2: SECTION_A, 3: SECTION_B}
    out = expand_to_parents(children, parents, sibling_weight=0.0)
    assert [(c.start_char, c.end_char, c.match_start, c.match_end) for c in out] == [(0, 18, 4, 8), (18, 36, 22, 26)]
    assert [c.relevance_score for c in out] == [0.9, 0.7]
    assert all(c.is_parent and DOC[c.start_char : c.end_char] == c.content for c in out)


def test_a_section_where_several_children_matched_can_overtake_one_with_a_single_better_child() -> None:
    children = [_child(3, 22, 26, 0.8), _child(1, 4, 8, 0.7), _child(2, 8, 17, 0.6)]
    parents = {1: SECTION_A, 2: SECTION_A, 3: SECTION_B}
    out = expand_to_parents(children, parents, sibling_weight=1.0)
    assert [c.start_char for c in out] == [0, 18]
    assert abs(out[0].relevance_score - (1 - 0.3 * 0.4)) < 1e-9  # noisy-OR of 0.7 and 0.6
    assert out[0].match_start == 4  # still the best child's span
    assert out[1].relevance_score == 0.8


def test_children_without_a_parent_pass_through() -> None:
    child = _child(9, 4, 8, 0.4)
    assert expand_to_parents([child], {}, sibling_weight=1.0) == [child]


def test_a_section_takes_its_childrens_best_proximity() -> None:
    children = [
        _child(1, 4, 8, 0.9, 1.0),
        _child(2, 8, 17, 0.5, 3.0),
        _child(3, 22, 26, 0.7, None),
        _child(4, 26, 30, 0.6, 2.0),
    ]
    parents = {1: SECTION_A, 2: SECTION_A, 3: SECTION_B, 4: SECTION_B}
    out = expand_to_parents(children, parents, sibling_weight=1.0)
    assert [(c.start_char, c.scores.proximity, c.scores.fused) for c in out] == [(0, 3.0, 0.9), (18, 2.0, 0.7)]
