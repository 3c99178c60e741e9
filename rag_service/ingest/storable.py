"""What PostgreSQL text can store, checked before a document is chunked: a failed document, not a failed batch."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rag_service.errors import DocumentReadError
from rag_service.ingest.report import FileProblem

#: the longest source a document may have, everywhere (Linux's PATH_MAX): a file's key never exceeds it, and
#: ``DELETE /api/documents`` takes a source this long, so no document is stored that cannot be named to delete it
MAX_SOURCE_CHARS = 4096


def check_storable(source: object, title: object, text: object) -> None:
    """Raise ``DocumentReadError`` (one line naming the fix) unless the three can be stored: text, no NUL, no lone
    surrogate (a text decoded wrongly: the whole batch failed on ``UnicodeEncodeError``), a source not blank and
    at most ``MAX_SOURCE_CHARS`` characters."""
    fields = {"source": _text("source", source), "title": _text("title", title), "text": _text("text", text)}
    if not fields["source"].strip():
        raise DocumentReadError("its source is blank, so no result could cite it; give it a name, e.g. 'notes.md'")
    if len(fields["source"]) > MAX_SOURCE_CHARS:
        raise DocumentReadError(
            f"its source is {len(fields['source'])} characters; a source may have at most {MAX_SOURCE_CHARS} (a "
            "path's limit), so a delete can name it: shorten it"
        )
    for name, value in fields.items():
        if "\x00" in value:
            raise DocumentReadError(f"its {name} contains NUL bytes, which PostgreSQL text cannot store; remove them")
        if value.isascii():  # the usual case, without encoding the text once more than its hash does
            continue
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise DocumentReadError(
                f"its {name} holds a lone surrogate (\\u{ord(value[exc.start]):04x} at character {exc.start}), no "
                "UTF-8 character: decode the text from its bytes with the right encoding, or drop the character"
            ) from None


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise DocumentReadError(f"its {name} is {type(value).__name__}, not text; pass a string")
    return value


def storable_key(key: str) -> bool:
    """Whether a file's key can be stored: a name that is not UTF-8 (a Latin-1 archive's, a Windows share's) holds
    lone surrogates once Python decodes it, which the database refuses."""
    try:
        key.encode()
    except UnicodeEncodeError:
        return False
    return True


def storable_names(
    keyed: Mapping[Path, tuple[str, str | None]],
) -> tuple[dict[Path, tuple[str, str | None]], list[FileProblem]]:
    """The files whose key (``keyed``: key and origin) can be stored (``storable_key``), and one failure for each
    other: one such key sent to the database ended the whole run with a traceback."""
    fix = "its name is not UTF-8, so no source can name it; rename it to UTF-8 (e.g. convmv -f latin1 -t utf8)"
    failed = [
        FileProblem(key.encode(errors="surrogateescape").decode(errors="replace"), fix)
        for key, _ in keyed.values()
        if not storable_key(key)
    ]
    return {path: keyed_source for path, keyed_source in keyed.items() if storable_key(keyed_source[0])}, failed
