"""One definition per setting: the API schema, Preset.validate, Settings, the columns and the stages follow knobs."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from rag_service import knobs
from rag_service.config import DEFAULT_PRESETS, Preset, Settings
from rag_service.db.collections import validate_collection
from rag_service.db.documents import ChunkKeywords
from rag_service.db.models import Base, RagConfiguration
from rag_service.embed import SentenceTransformerEmbedder, embedder_for, load_embedder
from rag_service.errors import ConfigurationError
from rag_service.ingest.summary import extractive_summary
from rag_service.knobs import (
    CHUNK_KEYWORDS,
    EMBEDDING_BATCH_SIZE,
    LLM_TIMEOUT_S,
    MAX_COLLECTION_CHARS,
    MAX_EF_SEARCH,
    MAX_PRESET_NAME_CHARS,
    MAX_QUERY_CHARS,
    PRESET_KNOBS,
    RERANK_MODEL,
    SUMMARY_SENTENCES,
)
from rag_service.llm import OpenAICompatibleChat
from rag_service.retrieve.fusion import check_weights
from rag_service.retrieve.rerank.loading import DEFAULT_RERANK_MODEL
from rag_service.server.config import ServerConfig
from rag_service.server.schemas import PresetValues, RetrieveRequest


def _bounds(prop: dict[str, object]) -> tuple[object, object, object]:
    """(minimum, maximum, choices) of one OpenAPI property (the optional value's non-null branch)."""
    branch = next(b for b in prop.get("anyOf", [prop]) if b.get("type") != "null")  # type: ignore[union-attr, attr-defined]
    return branch.get("minimum"), branch.get("maximum"), tuple(branch.get("enum", ()))


def test_the_api_schema_bounds_equal_the_knob_definitions() -> None:
    properties = PresetValues.model_json_schema()["properties"]
    assert set(properties) == set(PRESET_KNOBS)
    for name, knob in PRESET_KNOBS.items():
        assert _bounds(properties[name]) == (knob.ge, knob.le, knob.choices), name
    query = RetrieveRequest.model_json_schema()["properties"]["query"]
    assert query["maxLength"] == MAX_QUERY_CHARS
    assert ServerConfig.model_json_schema()["properties"]["max_query_chars"]["maximum"] == MAX_QUERY_CHARS


def test_every_preset_field_is_a_knob_with_its_default() -> None:
    fields = {f.name: f for f in dataclasses.fields(Preset)}
    assert set(fields) - {"context_type"} == set(PRESET_KNOBS)
    for name, knob in PRESET_KNOBS.items():
        if knob.default is not None:
            assert fields[name].default == knob.default, name


@pytest.mark.parametrize("name", sorted(PRESET_KNOBS))
def test_every_layer_refuses_what_the_definition_refuses(name: str) -> None:
    knob = PRESET_KNOBS[name]
    preset = DEFAULT_PRESETS[0]
    bad = [*(b - 1 for b in (knob.ge,) if b is not None), *(b + 1 for b in (knob.le,) if b is not None)]
    bad += ["nope"] if knob.choices else []
    for value in bad:
        with pytest.raises(ConfigurationError, match=name):
            preset.with_overrides({name: value})
        with pytest.raises(ValueError, match=name):
            PresetValues.model_validate({name: value})
        if name in ("vector_weight", "keyword_weight"):
            with pytest.raises(ConfigurationError, match=name):
                check_weights(**{"vector_weight": 0.5, "keyword_weight": 0.5, name: value})


def test_vector_weight_five_is_refused_everywhere() -> None:
    with pytest.raises(ConfigurationError, match="between 0 and 1"):
        DEFAULT_PRESETS[0].with_overrides({"vector_weight": 5})
    with pytest.raises(ValueError, match="vector_weight"):
        RetrieveRequest.model_validate({"query": "x", "vector_weight": 5})


@pytest.mark.parametrize("value", [False, True, "0.5"])
def test_a_numeric_knob_refuses_booleans_and_strings(value: object) -> None:
    for name in ("min_relevance", "graph_weight", "max_chunks"):
        with pytest.raises(ValueError, match=name):
            PresetValues.model_validate({name: value})


@pytest.mark.parametrize("value", ["yes", "off", "1", "true", 0, 1, 1.0])
def test_a_boolean_is_json_true_or_false_only(value: object) -> None:
    from rag_service.server.schemas import DocumentsRequest

    for name in ("expand_query", "return_parents", "rerank_enabled", "show_metadata"):
        with pytest.raises(ValueError, match=name):
            PresetValues.model_validate({name: value})
    with pytest.raises(ValueError, match="return_formatted"):
        RetrieveRequest.model_validate({"query": "x", "return_formatted": value})
    with pytest.raises(ValueError, match="force"):
        DocumentsRequest.model_validate({"documents": [{"source": "a", "text": "b"}], "force": value})
    assert PresetValues.model_validate({"expand_query": False}).expand_query is False


def test_min_relevance_is_a_knob_with_a_0_to_1_range() -> None:
    knob = PRESET_KNOBS["min_relevance"]
    assert (knob.default, knob.ge, knob.le) == (0.0, 0.0, 1.0)
    assert [p.min_relevance for p in DEFAULT_PRESETS if p.min_relevance > 0] and all(
        0 <= p.min_relevance <= 1 for p in DEFAULT_PRESETS
    )
    with pytest.raises(ConfigurationError, match="min_relevance"):
        DEFAULT_PRESETS[0].with_overrides({"min_relevance": 1.5})


def test_the_api_bounds_names_to_the_library_limits() -> None:
    from fastapi import FastAPI

    from rag_service.server.api import router
    from rag_service.server.schemas import DocumentsRequest, ReindexRequest

    retrieve = RetrieveRequest.model_json_schema()["properties"]
    assert retrieve["collection"]["maxLength"] == MAX_COLLECTION_CHARS
    assert retrieve["context"]["maxLength"] == MAX_PRESET_NAME_CHARS
    assert DocumentsRequest.model_json_schema()["properties"]["collection"]["maxLength"] == MAX_COLLECTION_CHARS
    assert _bounds(ReindexRequest.model_json_schema()["properties"]["collection"])[:2] == (None, None)
    assert ReindexRequest.model_json_schema()["properties"]["collection"]["anyOf"][0]["maxLength"] == (
        MAX_COLLECTION_CHARS
    )
    app = FastAPI()
    app.include_router(router)
    parameters = {
        (path, p["name"]): p["schema"]
        for path, methods in app.openapi()["paths"].items()
        for operation in methods.values()
        for p in operation.get("parameters", [])
    }
    assert parameters[("/api/documents", "collection")]["maxLength"] == MAX_COLLECTION_CHARS
    for path in ("/api/presets/{context}",):
        assert parameters[(path, "context")]["maxLength"] == MAX_PRESET_NAME_CHARS


def test_collection_and_preset_names_are_bounded_by_one_definition() -> None:
    assert validate_collection("c" * MAX_COLLECTION_CHARS)
    with pytest.raises(ConfigurationError, match=f"1-{MAX_COLLECTION_CHARS} characters"):
        validate_collection("c" * (MAX_COLLECTION_CHARS + 1))
    columns = [table.c.collection for table in Base.metadata.tables.values() if "collection" in table.c]
    assert len(columns) >= 6 and {column.type.length for column in columns} == {MAX_COLLECTION_CHARS}  # type: ignore[attr-defined]
    assert RagConfiguration.__table__.c.context_type.type.length == MAX_PRESET_NAME_CHARS  # type: ignore[attr-defined]


def test_the_preset_columns_default_to_the_knob_defaults() -> None:
    columns = RagConfiguration.__table__.c
    for name, knob in PRESET_KNOBS.items():
        default = columns[name].server_default
        if knob.default is None:
            assert default is None, name
            continue
        sql = str(default.arg)
        assert (sql in ("true", "false") and (sql == "true") == knob.default) or (
            type(knob.default)(sql) == knob.default
        ), name


#: the settings defined in rag_service.knobs: every module-level Knob that is not a preset knob
SETTING_KNOBS = {
    v.name: v for v in vars(knobs).values() if isinstance(v, knobs.Knob) and v.name not in PRESET_KNOBS
}


def test_settings_a_stage_also_reads_are_their_definitions() -> None:
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    assert {"rerank_model", "chunk_keywords", "summary_sentences"} <= set(SETTING_KNOBS)
    for name, knob in SETTING_KNOBS.items():
        spec = fields[name]
        assert (spec.default, spec.type) == (knob.default, knob.kind.__name__), name
        assert (spec.metadata["ge"], spec.metadata["le"], spec.metadata["description"]) == (
            knob.ge,
            knob.le,
            knob.description,
        ), name
        # the range Settings checks is the definition's
        for bad in [*(b - 1 for b in (knob.ge,) if b is not None), *(b + 1 for b in (knob.le,) if b is not None)]:
            with pytest.raises(ConfigurationError, match=f"RAG_{name.upper()}"):
                Settings(**{name: knob.kind(bad)})
    # the stages' own defaults (used when called without Settings)
    assert RERANK_MODEL.default == DEFAULT_RERANK_MODEL
    assert ChunkKeywords().count == CHUNK_KEYWORDS.default
    assert inspect.signature(extractive_summary).parameters["sentences"].default == SUMMARY_SENTENCES.default
    assert ChunkKeywords().in_bm25 == fields["keywords_in_bm25"].default
    for function in (load_embedder, embedder_for, SentenceTransformerEmbedder):
        assert inspect.signature(function).parameters["batch_size"].default == EMBEDDING_BATCH_SIZE.default
    assert inspect.signature(OpenAICompatibleChat).parameters["timeout_s"].default == LLM_TIMEOUT_S.default


def test_the_ef_search_bound_is_pgvectors_and_caps_candidate_k() -> None:
    spec = next(f for f in dataclasses.fields(Settings) if f.name == "hnsw_ef_search")
    assert spec.metadata["le"] == MAX_EF_SEARCH == PRESET_KNOBS["candidate_k"].le


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("max_tokens", 0, "max_tokens (0) must be between 1 and 1000000"),  # it said "1 and 1e+06"
        ("diversity", 3, "diversity (3) must be between 0 and 1"),
    ],
)
def test_a_bound_is_written_as_a_number(name: str, value: object, message: str) -> None:
    assert PRESET_KNOBS[name].problem(value) == message
