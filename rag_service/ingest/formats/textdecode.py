"""Decoding a text file's bytes: UTF-8 (a BOM dropped), UTF-16/UTF-32 when a byte-order mark says so, or the
charset an HTML file declares.

The stored text is the decoded text with ``\\r\\n`` and lone ``\\r`` turned into ``\\n``; chunk offsets
refer to it, never to the bytes. Bytes in another encoding are refused, never guessed: the refusal names the
legacy encodings they read as (``legacy``), for the user to convert with.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from rag_service.errors import DocumentReadError
from rag_service.ingest.formats.legacy import readable_encodings

__all__ = ["decode_text", "normalise_text"]

#: byte-order marks and their codecs; UTF-32 first, as its little-endian mark starts with UTF-16's
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)


#: a charset an HTML file declares: ``<meta charset=...>``, ``<meta http-equiv="Content-Type" content="...;
#: charset=...">`` or an XML declaration's ``encoding="..."``; looked for in its first bytes, as browsers do
_DECLARED = re.compile(
    rb"<meta\b[^>]*?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)|<\?xml\b[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9_.:-]+)",
    re.IGNORECASE,
)
_DECLARED_WINDOW = 4096
#: labels that browsers read as another encoding (WHATWG Encoding): a page saying latin1 is written in cp1252
_LABEL_ALIASES = {"iso8859-1": "cp1252", "ascii": "cp1252", "gb2312": "gb18030", "gbk": "gb18030"}


def decode_text(path: Path, data: bytes, *, markup: bool = False) -> str:
    """The normalised text of the file ``path`` holding ``data``; ``markup`` (HTML) honours a declared charset.

    A declared charset is used only for bytes that are not UTF-8: pages re-saved as UTF-8 often keep their old
    declaration, and a legacy text is almost never valid UTF-8. Raises DocumentReadError for bytes that are binary
    (NUL bytes without a UTF-16/32 BOM, or NUL characters), or not valid in their encoding.
    """
    for bom, codec, name in _WIDE_BOMS:
        # wide text has NUL bytes (the high bytes of ASCII, newlines, spaces), or, when it has no ASCII at all
        # (a line of Japanese), is not UTF-8; ``FF FE`` before valid UTF-8 is rather the start of a Latin-1 file
        if data.startswith(bom) and (b"\x00" in data or not _is_utf8(data[len(bom) :])):
            try:
                text = data[len(bom) :].decode(codec)
            except UnicodeDecodeError as err:
                raise DocumentReadError(
                    f"{path} starts with a {name} byte-order mark but is not valid {name} (at byte "
                    f"{len(bom) + err.start}); convert it to UTF-8, e.g. iconv -f {name.lower()} -t utf-8"
                ) from None
            if "\x00" in text:
                raise DocumentReadError(f"{path} contains NUL characters, so it looks binary; only text is indexed")
            return _normalise(text)
    if b"\x00" in data:
        raise DocumentReadError(f"{path} contains NUL bytes, so it looks binary; only text files are indexed")
    bom_length = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[bom_length:].decode("utf-8")
    except UnicodeDecodeError as err:
        declared = _declared_charset(data) if markup and not bom_length else None
        if declared is not None:
            return _normalise(_decode_declared(path, data, declared))
        offset = bom_length + err.start
        raise DocumentReadError(
            f"{path} is not valid UTF-8 (byte 0x{data[offset]:02x} at offset {offset}); {_conversion_advice(data)}"
        ) from None
    return _normalise(text)


def normalise_text(text: str) -> str:
    """A text given directly (not read from a file) as a file's decoded text is stored: a leading BOM dropped,
    ``\\r\\n`` and lone ``\\r`` turned into ``\\n``."""
    return _normalise(text.removeprefix("\ufeff"))


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _declared_charset(data: bytes) -> str | None:
    """The Python codec of the charset the markup ``data`` declares, or None (none, unknown, UTF-8 or wide)."""
    found = _DECLARED.search(data[:_DECLARED_WINDOW])
    if found is None:
        return None
    label = (found.group(1) or found.group(2)).decode("ascii").lower()
    try:
        codec = codecs.lookup(label).name
    except LookupError:
        return None
    codec = _LABEL_ALIASES.get(codec, codec)
    # UTF-8 failed already; a page declaring UTF-16 without a BOM is read as UTF-8 by browsers too
    return None if codec.startswith(("utf_8", "utf-8", "utf_16", "utf-16", "utf_32", "utf-32")) else codec


def _decode_declared(path: Path, data: bytes, codec: str) -> str:
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as err:
        raise DocumentReadError(
            f"{path} declares charset {codec} but is not valid {codec} (byte 0x{data[err.start]:02x} at offset "
            f"{err.start}); {_conversion_advice(data)}"
        ) from None
    if "\x00" in text:
        raise DocumentReadError(f"{path} contains NUL characters, so it looks binary; only text is indexed")
    return text


def _conversion_advice(data: bytes) -> str:
    """How to convert ``data`` to UTF-8, naming the legacy encodings it reads as (never indexed as a guess)."""
    found = readable_encodings(data)
    if not found:
        return "convert it to UTF-8 from the encoding it was written in, e.g. iconv -f <encoding> -t utf-8"
    codec, name = found[0]
    others = "".join(f"; or iconv -f {other} for {other_name}" for other, other_name in found[1:])
    return f"convert it to UTF-8, e.g. iconv -f {codec} -t utf-8 (it reads as {name}{others})"
