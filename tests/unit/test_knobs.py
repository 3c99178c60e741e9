"""One definition per preset knob: the API schema, Preset.validate and fusion all follow rag_service.knobs."""

from __future__ import annotations

import dataclasses

import pytest

from rag_service.config import DEFAULT_PRESETS, Preset
from rag_service.errors import ConfigurationError
from rag_service.knobs import MAX_QUERY_CHARS, PRESET_KNOBS
from rag_service.retrieve.fusion import check_weights
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


def test_min_relevance_is_a_knob_with_a_0_to_1_range() -> None:
    knob = PRESET_KNOBS["min_relevance"]
    assert (knob.default, knob.ge, knob.le) == (0.0, 0.0, 1.0)
    assert [p.min_relevance for p in DEFAULT_PRESETS if p.min_relevance > 0] and all(
        0 <= p.min_relevance <= 1 for p in DEFAULT_PRESETS
    )
    with pytest.raises(ConfigurationError, match="min_relevance"):
        DEFAULT_PRESETS[0].with_overrides({"min_relevance": 1.5})
