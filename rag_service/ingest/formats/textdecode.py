"""Decoding a text file's bytes: UTF-8 (a BOM dropped), or UTF-16/UTF-32 when a byte-order mark says so.

The stored text is the decoded text with ``\\r\\n`` and lone ``\\r`` turned into ``\\n``; chunk offsets
refer to it, never to the bytes.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from rag_service.errors import DocumentReadError

#: byte-order marks and their codecs; UTF-32 first, as its little-endian mark starts with UTF-16's
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)


def decode_text(path: Path, data: bytes) -> str:
    """The normalised text of the file ``path`` holding ``data``.

    Raises DocumentReadError for bytes that are binary (NUL bytes without a UTF-16/32 BOM, or NUL
    characters), or not valid in their encoding.
    """
    for bom, codec, name in _WIDE_BOMS:
        # wide text has NUL bytes (the high bytes of ASCII, newlines, spaces): without any, ``FF FE`` is more
        # likely the start of a Latin-1 file than UTF-16 (it is then refused as not UTF-8, below)
        if data.startswith(bom) and b"\x00" in data:
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
        offset = bom_length + err.start
        raise DocumentReadError(
            f"{path} is not valid UTF-8 (byte 0x{data[offset]:02x} at offset {offset}); "
            "convert it to UTF-8, e.g. iconv -f latin1 -t utf-8"
        ) from None
    return _normalise(text)


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
