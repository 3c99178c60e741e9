"""Which stored source keys a name given by a user (a filter, a delete) means, whatever its Unicode form."""

from __future__ import annotations

import unicodedata

__all__ = ["key_spellings"]


def key_spellings(source: str) -> list[str]:
    """``source`` as given and in its NFC and NFD forms, each once: the stored keys a typed name may mean.

    A key is stored as the file system spells the name: macOS (HFS+, and archives made there) decomposes accents
    (NFD), while a name typed, pasted or written on Linux is composed (NFC), so ``Résumé.md`` may be two strings
    that look alike. A filter or delete matches any of these spellings rather than re-keying stored documents
    (their keys, origins and the former-keys rules stay as they are) or comparing ``normalize(source, NFC)`` in
    SQL: an equality on a few values keeps the ``(collection, source)`` index, and ``normalize`` needs a UTF-8
    server. A key that mixes both forms (an NFC folder holding an NFD file) still needs its exact spelling.
    """
    spellings = [source]
    for form in ("NFC", "NFD"):
        spelled = unicodedata.normalize(form, source)
        if spelled not in spellings:
            spellings.append(spelled)
    return spellings
