"""A document PostgreSQL text cannot store fails alone, with one line (a lone surrogate failed the whole batch)."""

from __future__ import annotations

import pytest

from rag_service.errors import DocumentReadError
from rag_service.ingest.storable import check_storable


@pytest.mark.parametrize(
    ("source", "title", "text", "message"),
    [
        ("a.md", "", "a NUL \x00 here", "its text contains NUL bytes, which PostgreSQL text cannot store"),
        ("a.md", "", "a lone \ud800 here", "its text holds a lone surrogate (\\ud800 at character 7), no UTF-8"),
        ("a\udc80.md", "", "text", "its source holds a lone surrogate (\\udc80 at character 1)"),
        ("  ", "", "text", "its source is blank, so no result could cite it"),
        ("a.md", None, "text", "its title is NoneType, not text; pass a string"),
        ("a.md", "", b"bytes", "its text is bytes, not text; pass a string"),
        ("s" * 4094 + ".md", "", "text", "its source is 4097 characters; a source may have at most 4096"),
    ],
)
def test_what_text_cannot_store_is_one_line(source: object, title: object, text: object, message: str) -> None:
    with pytest.raises(DocumentReadError) as raised:
        check_storable(source, title, text)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_ordinary_text_passes() -> None:
    check_storable("docs/é.md", "Título", "# Guide\n\nUnicode — fine, even 𝄞.")
    check_storable("s" * 4093 + ".md", "", "the longest source a delete can name")
