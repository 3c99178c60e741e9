"""``filters`` is a mapping of filter keys: anything else is one line saying so, not a list of its letters."""

from __future__ import annotations

import numpy as np
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


def test_a_chunk_type_is_one_stored_or_shown_and_a_header_key_a_level() -> None:
    """Any chunk_type or header key was accepted and matched nothing, and 'parent', the chunk_type an expanded
    result shows, found nothing either."""
    assert ChunkFilters.parse({"chunk_type": "parent"}) == ChunkFilters(chunk_type="child")
    assert ChunkFilters.parse({"chunk_type": "text"}) == ChunkFilters(chunk_type="text")
    with pytest.raises(UnknownFilterError, match="filter 'chunk_type' 'childs' is no chunk type; did you mean 'child'"):
        ChunkFilters.parse({"chunk_type": "childs"})
    with pytest.raises(UnknownFilterError, match="filter 'headers' key\\(s\\) 'h9' name no header level: use h1"):
        ChunkFilters.parse({"headers": {"h1": "Guide", "h9": "x"}})
    assert ChunkFilters.parse({"headers": {"h6": "x"}}) == ChunkFilters(headers={"h6": "x"})


def test_a_numpy_document_id_is_taken_as_a_plain_int() -> None:
    """D4: np.int64(1) was refused as "must be a document id, a whole number"."""
    parsed = ChunkFilters.parse({"document_id": np.int64(7)})
    assert parsed == ChunkFilters(document_id=7) and type(parsed.document_id) is int
    with pytest.raises(UnknownFilterError, match=r"filter 'document_id' \(np.True_\) must be a document id"):
        ChunkFilters.parse({"document_id": np.True_})
