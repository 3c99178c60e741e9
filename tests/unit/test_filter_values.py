"""``filters`` is a mapping of filter keys: anything else is one line saying so, not a list of its letters."""

from __future__ import annotations

import pytest

from rag_service.db.search_request import ChunkFilters
from rag_service.errors import UnknownFilterError


@pytest.mark.parametrize("filters", ["notjson", ["source"], 5])
def test_filters_that_are_no_mapping_say_so(filters: object) -> None:
    with pytest.raises(UnknownFilterError) as raised:
        ChunkFilters.parse(filters)  # type: ignore[arg-type]
    assert str(raised.value).startswith("filters must be a mapping of filter keys to values, e.g. {'source_prefix'")
    assert repr(filters) in str(raised.value)


def test_a_mapping_is_parsed() -> None:
    assert ChunkFilters.parse({"source_prefix": "docs/"}) == ChunkFilters(source_prefix="docs/")
