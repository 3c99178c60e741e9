"""The calibrated relevance: the model's curve, each section's best child, the ranked order kept, the floor."""

from __future__ import annotations

import numpy as np
import pytest

from rag_service.embed import BUNDLED_MINILM_ID, bundled_model_id
from rag_service.result import ChunkScores, RetrievedChunk
from rag_service.retrieve.relevance import (
    CALIBRATIONS,
    FULL_BACKGROUND_CHUNKS,
    HELD_RESULTS,
    HELD_SHARE,
    LEXICAL_MAX_FLOOR,
    TAIL_SHARE,
    Calibration,
    CollectionReference,
    finalize,
    no_relevant_passages,
    score_candidates,
    section_evidence,
)


def _chunk(
    chunk_id: int,
    relevance: float,
    calibrated: float | None = None,
    *,
    parent: tuple[str, int, int] | None = None,
    embedding: list[float] | None = None,
) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk_id,
        document_id=1,
        source="doc.md",
        content=f"chunk {chunk_id}",
        headers={},
        header_path="",
        start_char=0,
        end_char=7,
        relevance_score=relevance,
        scores=ChunkScores(fused=relevance, calibrated=calibrated),
        collection="c",
        chunk_type="child",
        parent=parent,
        embedding=None if embedding is None else np.asarray(embedding, dtype=np.float32),
    )


def test_the_curve_is_half_at_the_center_and_rises_with_the_cosine() -> None:
    curve = Calibration(center=0.4, scale=0.05, background_weight=0.5)
    assert curve.relevance(0.4, 0.0) == pytest.approx(0.5)
    assert curve.relevance(0.5, 0.2) == pytest.approx(0.5)  # a query close to the whole collection must do more
    values = [curve.relevance(c, 0.1) for c in np.linspace(-1, 1, 41)]
    assert values == sorted(values) and 0.0 <= values[0] < 0.01 and 0.99 < values[-1] <= 1.0


def test_the_bundled_model_has_a_calibration_and_a_fake_does_not() -> None:
    assert CALIBRATIONS[BUNDLED_MINILM_ID] == CALIBRATIONS[bundled_model_id("onnx-int8")]
    assert "test/hashing-embedder" not in CALIBRATIONS


def test_candidates_are_scored_by_their_cosine_against_the_collections_background() -> None:
    reference = CollectionReference(np.array([0.6, 0.8, 0.0], dtype=np.float32), sampled=10)
    curve = Calibration(center=0.5, scale=0.1, background_weight=1.0)
    near, far = _chunk(1, 1.0, embedding=[0.0, 0.0, 1.0]), _chunk(2, 0.5, embedding=[1.0, 0.0, 0.0])
    no_vector = _chunk(3, 0.2)
    scored = score_candidates([near, far, no_vector], np.array([0.0, 0.0, 2.0]), reference, curve)
    assert scored[0].scores.calibrated == pytest.approx(curve.relevance(1.0, 0.0))
    # the query is orthogonal to the centroid: background 0; the far chunk's cosine is 0
    assert scored[1].scores.calibrated == pytest.approx(curve.relevance(0.0, 0.0))
    assert scored[2].scores.calibrated is None
    assert [c.relevance_score for c in scored] == [1.0, 0.5, 0.2]  # the ranking score is left alone


def test_a_small_collections_background_weighs_in_proportion_to_its_chunks() -> None:
    query = np.array([0.0, 0.0, 3.0])
    full = FULL_BACKGROUND_CHUNKS
    for sampled, weight in ((1, 1 / full), (full // 2, (full // 2) / full), (full, 1.0), (512, 1.0)):
        reference = CollectionReference(np.array([0.0, 0.6, 0.8], dtype=np.float32), sampled=sampled)
        assert reference.background(query) == pytest.approx(weight * 0.8)
    assert CollectionReference(np.zeros(0, dtype=np.float32), sampled=0).background(query) == 0.0


def test_a_section_carries_its_best_childs_evidence_on_its_first_child() -> None:
    section = ("text", 0, 40)
    first, better, alone = _chunk(1, 0.9, 0.2, parent=section), _chunk(2, 0.5, 0.8, parent=section), _chunk(3, 0.4, 0.3)
    out = section_evidence([first, better, alone])
    assert [c.scores.calibrated for c in out] == [0.8, 0.8, 0.3]


def test_finalize_keeps_the_ranked_order_and_makes_relevance_non_increasing() -> None:
    # ranked by the pipeline: 1 (0.9), 3 (0.7), 2 (0.5); their own calibrated values 0.2, 0.6, 0.1
    chunks = [_chunk(1, 0.9, 0.2), _chunk(2, 0.5, 0.1), _chunk(3, 0.7, 0.6)]
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.0)
    assert [c.chunk_id for c in kept] == [1, 3, 2] and dropped == []
    values = [c.relevance_score for c in kept]
    assert values[0] > values[1] > values[2]  # strictly: a later sort by relevance keeps the order
    assert values[0] == pytest.approx(0.6, abs=1e-5) and values[2] == pytest.approx(0.1)


def test_the_floor_cuts_a_tail_and_reports_it() -> None:
    chunks = [_chunk(1, 0.9, 0.8), _chunk(2, 0.8, 0.2), _chunk(3, 0.7, 0.45), _chunk(4, 0.6, 0.1)]
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.4)
    assert [c.chunk_id for c in kept] == [1, 2, 3]  # 2 stays: 3, ranked below it, passes
    assert [c.chunk_id for c in dropped] == [4]
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.9)
    assert kept == [] and [c.chunk_id for c in dropped] == [1, 2, 3, 4]


def test_the_floor_gates_on_the_first_result_and_cuts_the_rest_at_a_share_of_it() -> None:
    # an answerable question: its first result passes 0.4, so the rest stay down to TAIL_SHARE * 0.4
    assert TAIL_SHARE == 0.4
    chunks = [_chunk(1, 0.9, 0.8), _chunk(2, 0.8, 0.3), _chunk(3, 0.7, 0.17), _chunk(4, 0.6, 0.15)]
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.4)
    assert [c.chunk_id for c in kept] == [1, 2, 3] and [c.chunk_id for c in dropped] == [4]
    # an unanswerable one: its first result is below the floor, so nothing passes, not even above the share
    chunks = [_chunk(1, 0.9, 0.39), _chunk(2, 0.8, 0.3)]
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.4)
    assert kept == [] and [c.chunk_id for c in dropped] == [1, 2]


def test_a_first_result_under_the_floor_passes_when_its_results_hold_the_question() -> None:
    asked: list[list[int]] = []

    def held(*shares: float):  # type: ignore[no-untyped-def]
        def read(chunks):  # type: ignore[no-untyped-def]
            asked.append([c.chunk_id for c in chunks])
            return [shares[i] if i < len(shares) else 0.0 for i in range(len(chunks))]

        return read

    chunks = [_chunk(i, 1.0 - i / 10, v) for i, v in enumerate((0.35, 0.3, 0.2, 0.19, 0.1), start=1)]
    # 0.35 is under 0.43: each result's share of the question's words is read, the first HELD_RESULTS weighed
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.43, held_shares=held(0, 0, HELD_SHARE))
    assert asked == [[1, 2, 3, 4, 5]]
    assert [c.chunk_id for c in kept] == [1, 2, 3, 4] and [c.chunk_id for c in dropped] == [5]  # tail: 0.4 x 0.43
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.43, held_shares=held(HELD_SHARE - 0.01))
    assert kept == [] and len(dropped) == 5
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.43, held_shares=held(*[0.0] * HELD_RESULTS, 1.0))
    assert kept == [] and len(dropped) == 5  # only the first HELD_RESULTS open the gate
    asked.clear()
    assert 0.43 <= LEXICAL_MAX_FLOOR < 0.9
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.9, held_shares=held(1.0))
    assert kept == [] and asked == []  # a floor over LEXICAL_MAX_FLOOR: the model's score alone decides
    kept, _ = finalize(chunks, calibrate=True, min_relevance=0.3, held_shares=held(1.0))
    assert len(kept) == 4 and asked == []  # a first result over the floor: nothing read


def test_code_the_model_scores_near_zero_passes_on_the_words_it_holds() -> None:
    """A question naming an identifier scores 1-2% against the function that defines it (the model reads prose):
    the first results' words open the gate, and the results holding the question are kept however low their
    score, while those holding neither fall to the tail cut."""
    chunks = [_chunk(i, 1.0 - i / 10, v) for i, v in enumerate((0.02, 0.015, 0.01, 0.005), start=1)]

    def held(chunks):  # type: ignore[no-untyped-def]
        return [(0.9, 0.2, 0.6, 0.0)[i] for i in range(len(chunks))]

    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.45, held_shares=held)
    assert [c.chunk_id for c in kept] == [1, 3] and [c.chunk_id for c in dropped] == [2, 4]
    kept, dropped = finalize(chunks, calibrate=True, min_relevance=0.45, held_shares=lambda c: [0.4] * len(c))
    assert kept == [] and len(dropped) == 4  # an unanswerable one: neither score nor words


def test_without_calibration_the_pipelines_relevance_stays() -> None:
    chunks = [_chunk(1, 0.3, 0.9), _chunk(2, 0.8, 0.1)]
    kept, dropped = finalize(chunks, calibrate=False, min_relevance=0.8)
    assert [(c.chunk_id, c.relevance_score) for c in kept] == [(2, 0.8)] and [c.chunk_id for c in dropped] == [1]


def test_the_no_relevant_passages_line_names_the_query_and_the_floor() -> None:
    line = no_relevant_passages("what   causes\nscurvy?", 0.12, 0.3)
    assert line.startswith("no relevant passages for 'what causes scurvy?'")
    assert "12%" in line and "min_relevance 30%" in line and "\n" not in line
    # as asked, not as a Python literal (it read 'what\'s the "weather"' and C:\\Users)
    assert no_relevant_passages('what\'s the "weather" in C:\\Users', None, 0.3).startswith(
        'no relevant passages for \'what\'s the "weather" in C:\\Users\': no chunk matched it'
    )
