"""Overlapping results of one document are shown once, joined into the better one (``rag_service.overlaps``)."""

from __future__ import annotations

from rag_service.format import format_context
from rag_service.overlaps import first_passages, joined_overlaps
from rag_service.result import RetrievedChunk
from rag_service.tokens import count_tokens
from tests.retrieved import span_chunk

DOC = " ".join(f"Sentence {i} tells the reader about backup number {i}." for i in range(40))


def _piece(chunk_id: int, start: int, end: int, relevance: float, *, document_id: int = 7) -> RetrievedChunk:
    return span_chunk(DOC, start, end, chunk_id=chunk_id, relevance=relevance, document_id=document_id)


def test_an_overlapping_result_joins_the_better_one_and_the_shared_text_shows_once() -> None:
    best, later = _piece(1, 300, 700, 0.9), _piece(2, 600, 1000, 0.5)  # 100 characters in common
    [joined] = joined_overlaps([best, later])
    assert (joined.chunk_id, joined.start_char, joined.end_char) == (1, 300, 1000)
    assert joined.content == DOC[300:1000] and (joined.match_start, joined.match_end) == (300, 700)
    result = format_context([later, best], max_tokens=2000)
    shared = DOC[600:700]
    assert result.text.count(shared) == 1 and [c.chunk_id for c in result.included] == [1]  # was shown twice
    assert result.total_tokens == count_tokens(result.text)


def test_a_grown_span_that_reaches_a_third_result_makes_one_passage_and_others_stay_apart() -> None:
    ranked = [
        _piece(1, 0, 200, 0.9),
        _piece(2, 400, 600, 0.8),
        _piece(3, 150, 450, 0.7),  # bridges 1 and 2
        _piece(4, 900, 1000, 0.6),  # apart
        _piece(5, 100, 180, 0.5, document_id=8),  # another document's offsets
        _piece(6, 50, 120, 0.4),  # inside the passage already
    ]
    out = joined_overlaps(ranked)
    assert [(c.chunk_id, c.start_char, c.end_char) for c in out] == [(1, 0, 600), (4, 900, 1000), (5, 100, 180)]
    assert out[0].content == DOC[0:600]


def test_spans_whose_texts_disagree_are_not_joined() -> None:
    stray = _piece(2, 100, 300, 0.5)
    stray.content = "x" * 200  # offsets that do not describe this document's text
    assert [c.chunk_id for c in joined_overlaps([_piece(1, 0, 200, 0.9), stray])] == [1, 2]


def test_max_chunks_counts_passages_so_results_a_join_folds_away_are_made_up_by_the_next() -> None:
    ordered = [_piece(1, 0, 200, 0.9), _piece(2, 150, 400, 0.8), _piece(3, 900, 1000, 0.7), _piece(4, 1500, 1600, 0.6)]
    picked: list[int] = []

    def pick(k: int) -> list[RetrievedChunk]:
        picked.append(k)
        return ordered[:k]

    taken = first_passages(pick, 2, len(ordered))  # 1 and 2 are one passage: 3 makes the second
    assert [c.chunk_id for c in taken] == [1, 2, 3] and len(joined_overlaps(taken)) == 2 and picked == [2, 3]
    assert [c.chunk_id for c in first_passages(pick, 9, len(ordered))] == [1, 2, 3, 4]  # fewer than asked: all
    picked.clear()
    assert [c.chunk_id for c in first_passages(lambda k: ordered[2:][:k], 1, 2)] == [3] and picked == []
