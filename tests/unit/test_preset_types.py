"""Preset.validate checks each knob's type before its range: one ConfigurationError line, never a TypeError."""

from __future__ import annotations

import numpy as np
import pytest

from rag_service.config import DEFAULT_PRESETS
from rag_service.errors import ConfigurationError

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
