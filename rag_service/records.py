"""One constructor for every boundary where a record becomes another with the same field names.

A database row becomes a ``SearchHit`` or a ``Preset``, a ``SearchHit`` a ``RetrievedChunk``, a
``TextChunk`` a ``ChunkRow``: the fields they share are copied by name, so a field added to both
sides travels without a copier to update; only what differs is passed by hand.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    RecordT = TypeVar("RecordT", bound=DataclassInstance)
else:
    RecordT = TypeVar("RecordT")


def from_fields(cls: type[RecordT], source: object, /, **given: Any) -> RecordT:
    """A ``cls`` (a dataclass) from ``source``'s attributes of the same names, and ``given`` values.

    ``source`` may also be a mapping (a database row's ``_asdict()``: its keys read ~3x faster than a row's
    attributes, and a search builds a record per candidate). Fields neither given nor on ``source`` keep their
    defaults; a required one missing from both is a ``TypeError`` naming it.
    """
    values = dict(given)
    mapping = source if isinstance(source, Mapping) else None
    for name, required in _init_fields(cls):
        if name in values:
            continue
        if mapping is not None and name in mapping:
            values[name] = mapping[name]
        elif mapping is None and hasattr(source, name):
            values[name] = getattr(source, name)
        elif required:
            raise TypeError(f"{cls.__name__}.{name} is required and {type(source).__name__} has no such field")
    return cls(**values)


@functools.cache
def _init_fields(cls: type[Any]) -> tuple[tuple[str, bool], ...]:
    """``cls``'s init fields and whether each is required: read once per class (a query copies ~40 records)."""
    return tuple((f.name, f.default is MISSING and f.default_factory is MISSING) for f in fields(cls) if f.init)
