"""``add_context``: the context BM25 joins each result's relevance after fusion."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag_service.result import ChunkScores, RetrievedChunk
from rag_service.retrieve.context import add_context, context_applies


def _result(chunk_id: int, relevance: float, context: float | None, proximity: float | None = None) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk_id,
        document_id=chunk_id,
        source=f"doc{chunk_id}.md",
        content=f"text {chunk_id}",
        headers={},
        header_path="",
        start_char=0,
        end_char=6,
        relevance_score=relevance,
        scores=ChunkScores(fused=relevance, context=context, proximity=proximity),
        collection="c",
        chunk_type="child",
    )


def test_a_result_whose_context_holds_the_question_moves_up() -> None:
    ranked = [_result(1, 0.9, 1.0), _result(2, 0.8, 9.0), _result(3, 0.2, 5.0)]
    out = add_context(ranked, (0.6,))
    # (0.9 + 0) / 1.6, (0.8 + 0.6) / 1.6, (0.2 + 0.6 * 0.5) / 1.6
    assert [c.chunk_id for c in out] == [2, 1, 3]
    assert [c.relevance_score for c in out] == pytest.approx([1.4 / 1.6, 0.9 / 1.6, 0.5 / 1.6])
    assert all(0.0 <= c.relevance_score <= 1.0 for c in out)


def test_a_context_without_the_questions_words_counts_as_zero() -> None:
    out = add_context([_result(1, 0.5, 0.0), _result(2, 0.4, 3.0)], (1.0,))
    assert [c.chunk_id for c in out] == [2, 1]
    assert [c.relevance_score for c in out] == pytest.approx([0.7, 0.25])


def test_a_result_without_a_stored_context_keeps_its_relevance() -> None:
    out = add_context([_result(1, 0.5, None), _result(2, 0.4, 3.0), _result(3, 0.3, 1.0)], (1.0,))
    assert [c.chunk_id for c in out] == [2, 1, 3]
    assert [c.relevance_score for c in out] == pytest.approx([0.7, 0.5, 0.15])


def test_nothing_changes_without_a_weight_or_any_context_score() -> None:
    ranked = [_result(1, 0.3, 1.0), _result(2, 0.9, 8.0)]
    assert add_context(ranked, (0.0,)) == ranked
    plain = [_result(1, 0.3, None), _result(2, 0.9, None)]
    assert add_context(plain, (0.6,)) == plain


def test_equal_context_scores_keep_the_order() -> None:
    ranked = [_result(1, 0.5, 2.0), _result(2, 0.5, 2.0), _result(3, 0.4, 2.0)]
    assert [c.chunk_id for c in add_context(ranked, (0.6,))] == [1, 2, 3]


def test_it_applies_with_a_weight_and_both_arms_only() -> None:
    assert context_applies(0.6, 0.6) and not context_applies(0.0, 0.6) and not context_applies(0.6, 0.0)


def test_proximity_joins_the_context_with_its_own_weight() -> None:
    ranked = [_result(1, 0.9, 1.0, 0.0), _result(2, 0.8, 1.0, 4.0), _result(3, 0.2, 1.0, 2.0)]
    out = add_context(ranked, (0.6, 0.5))
    # contexts all equal: 1.0 each; proximity min-max 0, 1, 0.5: (r + 0.6 + 0.5 * near) / 2.1
    assert [c.chunk_id for c in out] == [2, 1, 3]
    assert [c.relevance_score for c in out] == pytest.approx([1.9 / 2.1, 1.5 / 2.1, 1.05 / 2.1])
    alone = add_context(ranked, (0.0, 0.5))  # without the context: (r + 0.5 * near) / 1.5
    assert [c.relevance_score for c in alone] == pytest.approx([1.3 / 1.5, 0.9 / 1.5, 0.45 / 1.5])
    assert add_context(ranked, (0.6, 0.0)) == add_context(ranked, (0.6,))  # a zero weight leaves it out


def test_the_context_similarity_is_the_third_signal() -> None:
    ranked = [_result(1, 0.9, None), _result(2, 0.8, None), _result(3, 0.2, None)]
    ranked = [
        replace(c, scores=replace(c.scores, context_similarity=s)) for c, s in zip(ranked, (0.3, 0.5, 0.7), strict=True)
    ]
    out = add_context(ranked, (0.6, 0.15, 0.5))  # no context or proximity score: only the similarity joins
    # similarity min-max 0, 0.5, 1: (r + 0.5 * sim) / 1.5
    assert [c.chunk_id for c in out] == [2, 1, 3]
    assert [c.relevance_score for c in out] == pytest.approx([1.05 / 1.5, 0.9 / 1.5, 0.7 / 1.5])
