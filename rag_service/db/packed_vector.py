"""A vector in pgvector's binary form as a bound parameter (``vector_type.BinaryVector`` sends these).

Its psycopg dumper is registered when this module is imported, and a connection copies psycopg's adapters
when it opens: a connection opened earlier could not send one ("cannot adapt type 'PackedVector'"). So
``db.engine`` imports this module (light: no numpy, no pgvector) before it makes any connection.
"""

from __future__ import annotations

import struct
from typing import Any

from psycopg import adapters
from psycopg.adapt import Dumper
from psycopg.pq import Format

_HEADER = struct.Struct(">HH")  # dimensions, unused


class PackedVector:
    """A vector in pgvector's binary form, ready to send (psycopg dumps it as it is)."""

    __slots__ = ("data",)

    def __init__(self, values: Any) -> None:
        import numpy as np  # when a vector is written: a no-op reindex never loads numpy

        array = np.asarray(values, dtype=">f4").reshape(-1)
        self.data = _HEADER.pack(array.shape[0], 0) + array.tobytes()


class _PackedVectorDumper(Dumper):
    format = Format.BINARY
    oid = 0  # unknown: the server infers ``vector`` from the statement, as for an untyped literal

    def dump(self, obj: PackedVector) -> bytes:
        return obj.data


adapters.register_dumper(PackedVector, _PackedVectorDumper)
