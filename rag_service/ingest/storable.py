"""What PostgreSQL text can store, checked before a document is chunked: a failed document, not a failed batch."""

from __future__ import annotations

from rag_service.errors import DocumentReadError


def check_storable(source: object, title: object, text: object) -> None:
    """Raise ``DocumentReadError`` (one line naming the fix) unless the three can be stored: text, no NUL, no lone
    surrogate (a text decoded wrongly: the whole batch failed on ``UnicodeEncodeError``), a source not blank."""
    for name, value in (("source", source), ("title", title), ("text", text)):
        if not isinstance(value, str):
            raise DocumentReadError(f"its {name} is {type(value).__name__}, not text; pass a string")
    assert isinstance(source, str) and isinstance(text, str)  # for the type checker
    if not source.strip():
        raise DocumentReadError("its source is blank, so no result could cite it; give it a name, e.g. 'notes.md'")
    for name, value in (("source", source), ("title", title), ("text", text)):
        if "\x00" in str(value):
            raise DocumentReadError(f"its {name} contains NUL bytes, which PostgreSQL text cannot store; remove them")
        try:
            str(value).encode()
        except UnicodeEncodeError as exc:
            bad = f"\\u{ord(str(value)[exc.start]):04x}"
            raise DocumentReadError(
                f"its {name} holds a lone surrogate ({bad} at character {exc.start}), no UTF-8 character: decode "
                "the text from its bytes with the right encoding, or drop the character"
            ) from None
