"""Preset.validate checks each knob's type before its range: one ConfigurationError line, never a TypeError."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from rag_service.config import DEFAULT_PRESETS
from rag_service.errors import ConfigurationError
from rag_service.integrations import check_overrides
from rag_service.knobs import PRESET_KNOBS

CHATBOT = DEFAULT_PRESETS[0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_chunks": "ten"}, "max_chunks ('ten') must be a whole number"),
        ({"max_chunks": 5.5}, "max_chunks (5.5) must be a whole number"),
        ({"max_tokens": True}, "max_tokens (True) must be a whole number"),
        ({"diversity": "high"}, "diversity ('high') must be a number"),
        ({"vector_weight": None}, "vector_weight (None) must be a number"),
        ({"expand_query": 1}, "expand_query (1) must be true or false"),
        ({"rerank_enabled": "yes"}, "rerank_enabled ('yes') must be true or false"),
        ({"fusion_method": 3}, "fusion_method (3) must be one of 'rrf', 'linear'"),
    ],
)
def test_wrong_types_are_one_line_configuration_errors(overrides, message):
    with pytest.raises(ConfigurationError) as raised:
        CHATBOT.with_overrides(overrides)
    assert str(raised.value) == message


def test_numbers_of_any_numeric_type_pass():
    preset = CHATBOT.with_overrides({"max_chunks": np.int64(4), "diversity": 0, "graph_weight": np.float32(0.5)})
    assert preset.max_chunks == 4 and preset.diversity == 0 and preset.graph_weight == 0.5


def test_numpy_and_fraction_values_become_the_knobs_plain_types():
    """D3/D4: numpy scalars and a Fraction were kept as given (and then stored by update_preset, or refused
    by the SQL driver); each knob now holds its annotated plain type."""
    preset = CHATBOT.with_overrides(
        {
            "max_chunks": np.int64(6),
            "max_tokens": np.int32(500),
            "diversity": Fraction(1, 10),
            "graph_weight": np.float32(0.1),
            "expand_query": np.bool_(False),
            "rerank_enabled": np.True_,
            "fusion_method": np.str_("rrf"),
        }
    )
    values = {name: getattr(preset, name) for name in PRESET_KNOBS}
    assert {name: type(v) for name, v in values.items()} == {name: knob.kind for name, knob in PRESET_KNOBS.items()}
    assert (preset.max_chunks, preset.max_tokens, preset.expand_query, preset.rerank_enabled) == (6, 500, False, True)
    assert preset.diversity == 0.1 and preset.graph_weight == 0.1  # float32(0.1) as meant, not 0.10000000149011612


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_chunks": 3.0}, "max_chunks (3.0) must be an int, not float; pass 3"),
        ({"max_chunks": np.float64(4.5)}, "max_chunks (np.float64(4.5)) must be a whole number"),
        ({"max_chunks": np.int64(0)}, "max_chunks (np.int64(0)) must be between 1 and 1000"),
        ({"expand_query": np.int64(1)}, "expand_query (np.int64(1)) must be true or false"),
        ({"diversity": Decimal("0.1")}, "diversity (Decimal('0.1')) must be a number"),
    ],
)
def test_values_that_do_not_convert_exactly_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigurationError) as raised:
        CHATBOT.with_overrides(overrides)
    assert str(raised.value) == message


def test_a_refused_value_is_named_as_given_not_as_converted():
    with pytest.raises(ConfigurationError) as raised:
        CHATBOT.with_overrides({"diversity": 3})
    assert str(raised.value) == "diversity (3) must be between 0 and 1"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # repr() of an int over 4,300 digits raises ValueError: the message itself failed (audit 53b 8)
        ({"max_chunks": 10**5000}, "max_chunks (100000000000\u2026, 5001 digits) must be between 1 and 1000"),
        ({"diversity": -(10**5000)}, "diversity (-100000000000\u2026, 5001 digits) must be between 0 and 1"),
        ({"fusion_method": "a" * 10_000}, f"fusion_method ('{'a' * 40}\u2026', 10000 characters) must be one of"),
    ],
)
def test_a_huge_value_is_refused_in_one_short_line(overrides, message):
    with pytest.raises(ConfigurationError) as raised:
        CHATBOT.with_overrides(overrides)
    assert str(raised.value).startswith(message) and len(str(raised.value)) < 120
    ((name, value),) = overrides.items()
    assert PRESET_KNOBS[name].problem(value) == str(raised.value)


def test_the_integrations_refuse_a_huge_override_in_one_line():
    with pytest.raises(ConfigurationError, match=r"^max_chunks \(100000000000…, 5001 digits\) must be between"):
        check_overrides("UniversalRAGRetriever", {"max_chunks": 10**5000})
