"""The checks of ``index_paths`` / ``index_texts`` arguments: one ``ConfigurationError`` line, before any work.

Without them a wrong kind failed deep inside with Python's words (``not enough values to unpack``), or as
"a bug; report it" once per document (metadata that ``json.dumps`` refuses).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rag_service.errors import ConfigurationError

#: the value kinds ``documents.metadata`` (jsonb) holds, as the errors name them
_JSON_KINDS = "strings, numbers, true/false, None, lists or dicts with string keys"


def check_call(items: object, metadata: object) -> None:
    """Refuse ``paths``/``items`` that are no collection, and ``metadata`` that is not a JSON object."""
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise ConfigurationError(f"paths or items must be a list, not {type(items).__name__}")
    if metadata is not None and not isinstance(metadata, dict):
        raise ConfigurationError(f"metadata must be a JSON object (a dict), not {type(metadata).__name__}")
    if metadata is not None:
        _check_json(metadata, "metadata", set())


def _check_json(value: object, where: str, open_containers: set[int]) -> None:
    """ConfigurationError naming the first part of ``value`` that JSON cannot hold (``where`` is its path)."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):  # json.dumps writes NaN, which jsonb refuses
            raise ConfigurationError(f"{where} ({value!r}) is not JSON; pass a finite number")
        return
    if not isinstance(value, dict | list | tuple):
        kind = type(value).__name__
        raise ConfigurationError(f"{where} ({kind}) is not JSON; pass {_JSON_KINDS}")
    if id(value) in open_containers:
        raise ConfigurationError(f"{where} contains itself; pass {_JSON_KINDS}, without cycles")
    open_containers.add(id(value))
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigurationError(f"{where} key {key!r} ({type(key).__name__}) is not JSON; use string keys")
            _check_json(item, f"{where}[{key!r:.60}]", open_containers)
    else:
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]", open_containers)
    open_containers.discard(id(value))


def checked_paths(paths: Iterable[Any]) -> list[Any]:
    """``index_paths``' paths as a list, or ConfigurationError naming the first holding a NUL (no file name has one;
    ``stat`` raised Python's "embedded null byte")."""
    paths = list(paths)
    for i, path in enumerate(paths):
        if "\x00" in str(path):
            shown = f"{str(path)!r:.60}"
            raise ConfigurationError(f"paths[{i}] {shown} holds a NUL byte, which no file name has; remove it")
    return paths


def nul_in_source(source: object) -> bool:
    """Whether ``source`` is text holding a NUL, which PostgreSQL text cannot store (a raw DataError before)."""
    return isinstance(source, str) and "\x00" in source


def text_items(items: Iterable[Any]) -> Iterator[tuple[Any, Any, Any]]:
    """``items`` of ``index_texts`` as (source, title, text) triples, or ConfigurationError naming the first
    item of another shape. A list or tuple is checked whole now (before any work); a lazy iterable (a
    generator) item by item as it is read, so documents before a bad item may be written."""
    if isinstance(items, Sequence):
        return iter([_check_item(i, item) for i, item in enumerate(items)])
    return (_check_item(i, item) for i, item in enumerate(items))


def _check_item(i: int, item: object) -> tuple[Any, Any, Any]:
    if not isinstance(item, tuple | list):
        raise ConfigurationError(f"items[{i}] is a {type(item).__name__}; pass a (source, title, text) tuple")
    if len(item) != 3:
        raise ConfigurationError(f"items[{i}] has {len(item)} values; pass a (source, title, text) tuple")
    source, title, text = item
    if nul_in_source(source):
        raise ConfigurationError(f"items[{i}]: source {source!r:.60} holds a NUL, which a source cannot; remove it")
    return source, title, text
