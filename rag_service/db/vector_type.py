"""Vectors to and from the server in pgvector's binary form, not its text.

pgvector's SQLAlchemy type sends a vector as text (``'[0.1,0.2,...]'``): formatting 384 floats costs
~230 us in Python and parsing them back ~150 us, plus the server's own float formatting and parsing,
for every chunk written, every vector looked up for reuse and every query. The binary form
(``vector_send`` / ``vector_recv``: int16 dimensions, int16 unused, big-endian float4s) costs ~1 us
and formats or parses nothing on either side (docs/benchmarks.md "Session 36").

``BinaryVector`` is the columns' and parameters' type: a bound value goes as ``PackedVector``, which
psycopg sends in binary with no type of its own, so the server takes the type from the statement
(a ``CAST(... AS vector)``, a ``vector`` column, the ``<=>`` operator) and reads it with ``vector_recv``;
a selected column is read through ``vector_send``. No per-connection type lookup is needed, so it
works on a fresh database, through poolers and on Citus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import func
from sqlalchemy.types import TypeDecorator

from rag_service.db.packed_vector import PackedVector

if TYPE_CHECKING:
    import numpy as np


def vector_from_send(data: bytes) -> np.ndarray[Any, Any]:
    """A vector from pgvector's binary form (``vector_send``: int16 dim, int16 unused, big-endian float4s).

    Much cheaper for both sides than the text form: no float formatting in the server, no parsing here.
    """
    import numpy as np

    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


class BinaryVector(TypeDecorator[Any]):
    """pgvector's ``vector`` column type, sent and read in binary (numpy float32 arrays on this side).

    Its processors replace (not precede) pgvector's text ones: a bound value is packed, a selected one
    arrives as ``vector_send``'s bytes.
    """

    impl = Vector
    cache_ok = True

    def bind_processor(self, dialect: Any) -> Any:
        return _pack

    def column_expression(self, column: Any) -> Any:
        return func.vector_send(column, type_=self)

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        return _unpack


def _pack(value: Any) -> PackedVector | None:
    return None if value is None else PackedVector(value)


def _unpack(value: bytes | None) -> np.ndarray[Any, Any] | None:
    return None if value is None else vector_from_send(value)
