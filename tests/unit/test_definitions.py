"""``add_definitions``: a code chunk defining a name the question names ranks higher; documentation never moves."""

from __future__ import annotations

import pytest

from rag_service.db.search import hit_columns
from rag_service.result import ChunkScores, RetrievedChunk
from rag_service.retrieve.definitions import QueryNames, add_definitions

CODE = "code:1500:0:50:v10.3"
MARKDOWN = "markdown:500:100"


def _result(chunk_id: int, relevance: float, header_path: str, chunker: str = CODE) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk_id,
        document_id=chunk_id,
        source=f"src{chunk_id}",
        content=f"text {chunk_id}",
        headers={},
        header_path=header_path,
        start_char=0,
        end_char=6,
        relevance_score=relevance,
        scores=ChunkScores(fused=relevance),
        collection="c",
        chunk_type="text",
        chunker=chunker,
    )


def _order(chunks: list[RetrievedChunk]) -> list[int]:
    return [c.chunk_id for c in chunks]


def test_the_chunk_defining_the_asked_name_moves_above_its_users() -> None:
    ranked = [_result(1, 0.75, "lib > Store > put"), _result(2, 0.7, "lib > run"), _result(3, 0.6, "lib > Store > get")]
    out = add_definitions(ranked, "where is get defined?", 0.5)
    assert _order(out) == [3, 1, 2]
    assert out[0].relevance_score == pytest.approx(1 - 0.4 * 0.5)
    assert [c.relevance_score for c in out[1:]] == [0.75, 0.7]  # the others keep theirs


def test_a_markdown_result_keeps_its_score_and_place() -> None:
    ranked = [_result(1, 0.9, "Guide > get", chunker=MARKDOWN), _result(2, 0.5, "lib > Store > get")]
    out = add_definitions(ranked, "get", 0.5)
    by_id = {c.chunk_id: c for c in out}
    assert by_id[1].relevance_score == 0.9
    assert by_id[1] is ranked[0]
    assert by_id[2].relevance_score == pytest.approx(0.75)


def test_only_markdown_results_come_back_unchanged() -> None:
    ranked = [_result(1, 0.9, "Guide > Install", MARKDOWN), _result(2, 0.3, "Guide > get", MARKDOWN)]
    out = add_definitions(ranked, "where is get defined?", 1.0)
    assert out == ranked
    assert [c.relevance_score for c in out] == [0.9, 0.3]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("getBits", "get_bits"),
        ("get_bits", "getBits"),
        ("how do I get bits?", "GetBits"),
        ("ScalingConfig", "scaling_config"),
        ("where is HTTPServer defined?", "HttpServer"),
    ],
)
def test_names_compare_by_their_parts_whatever_joins_them(query: str, name: str) -> None:
    assert QueryNames.of(query).match(f"mod > {name}") == 1.0


def test_a_dotted_name_asks_for_the_method_of_that_type() -> None:
    names = QueryNames.of("Store.get")
    assert names.match("lib > Store > get") == 1.0
    assert names.match("lib > Cache > get") == 0.5
    assert names.match("lib > Store") == 0.0
    assert QueryNames.of("Store::get").match("lib > Store > get") == 1.0
    assert QueryNames.of("jinja2.nodes.EvalContext").match("nodes > EvalContext") == 1.0
    assert names.match("store > Store.get") == 1.0  # a dotted definition name (a JS `Store.get = function`)


def test_no_match_for_the_module_alone_nor_another_name() -> None:
    names = QueryNames.of("where is coalesce defined?")
    assert names.match("coalesce") == 0.0  # code outside any definition
    assert names.match("coalesce > coalesce_pair") == 0.0
    assert names.match("adaptors > coalesce") == 1.0


def test_weight_zero_leaves_the_ranking_alone() -> None:
    ranked = [_result(1, 0.9, "lib > put"), _result(2, 0.5, "lib > get")]
    assert add_definitions(ranked, "get", 0.0) == ranked


def test_every_hit_reads_its_documents_chunker() -> None:
    assert "chunker" in {getattr(column, "name", None) for column in hit_columns()}
