"""Reading the presets from ``rag_configurations`` (at call time, so edits apply at once)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from sqlalchemy import Connection, Select, String, bindparam, exists, false, func, select, text
from sqlalchemy.orm import Session

from rag_service.config import Preset
from rag_service.db.index_settings import StoredModel
from rag_service.db.models import CollectionStats, Document, IndexSettings, PackedSnapshot, RagConfiguration
from rag_service.errors import ConfigurationError, UnknownContextError, did_you_mean, shown_name
from rag_service.knobs import PRESET_KNOBS
from rag_service.records import from_fields


def _to_preset(row: RagConfiguration) -> Preset:
    return from_fields(Preset, row)


def stored_problems(preset: Preset, *, replaced: Iterable[str] = ()) -> dict[str, str]:
    """Each stored value of ``preset`` outside its knob's limits (a row edited in SQL: the table's CHECKs are
    looser), as ``{name: "2.5 (must be between 0 and 1)"}``, but for the ``replaced`` ones."""
    skip = set(replaced)
    wrong: dict[str, str] = {}
    for name, knob in PRESET_KNOBS.items():
        value = getattr(preset, name, knob.default)
        requirement = None if name in skip else knob.requirement(value)
        if requirement is not None:
            wrong[name] = f"{value!r} ({requirement})"
    arms = {"vector_weight", "keyword_weight"}
    if not wrong and not arms & skip and preset.vector_weight + preset.keyword_weight <= 0:
        wrong["vector_weight"] = "0 and keyword_weight 0 (give one arm a weight)"
    return wrong


def stored_message(preset: Preset, wrong: dict[str, str]) -> str:
    """``preset 'wild' stores vector_weight 2.5 (must be between 0 and 1), ...`` (``stored_problems``)."""
    return f"preset {preset.context_type!r} stores {', '.join(f'{k} {v}' for k, v in wrong.items())}"


def check_stored(preset: Preset, *, replaced: Iterable[str] = ()) -> Preset:
    """``preset`` as read from its row, or ConfigurationError naming every bad stored value (``stored_problems``)
    and how to fix it."""
    wrong = stored_problems(preset, replaced=replaced)
    if wrong:
        name = preset.context_type
        fix = f"fix it with PUT /api/presets/{name} (update_preset) or in rag_configurations"
        raise ConfigurationError(f"{stored_message(preset, wrong)}; {fix}")
    return preset


def list_presets(session: Session) -> list[Preset]:
    """Every preset, ordered by id."""
    rows = session.execute(select(RagConfiguration).order_by(RagConfiguration.id)).scalars()
    return [_to_preset(row) for row in rows]


def load_preset(session: Session, context_type: str, *, for_update: bool = False) -> Preset:
    """The preset named ``context_type``; UnknownContextError lists the valid names. ``for_update``: its row
    locked until the transaction ends (an edit reads what the edit before it committed)."""
    check_context_name(context_type)
    query = select(RagConfiguration).where(RagConfiguration.context_type == context_type)
    row = session.execute(query.with_for_update() if for_update else query).scalar_one_or_none()
    if row is None:
        names = list(session.execute(select(RagConfiguration.context_type).order_by(RagConfiguration.id)).scalars())
        hint = did_you_mean(context_type, names)
        shown = shown_name(context_type)
        raise UnknownContextError(f"unknown context {shown}; {hint}valid contexts: {', '.join(names)}")
    return _to_preset(row)


def check_context_name(context_type: object) -> None:
    """Raise UnknownContextError for a context no preset can be named: not text, or holding a control character
    (a NUL reached the SQL as a raw DataError)."""
    if not isinstance(context_type, str):  # an int reached the SQL: "operator does not exist: varchar = integer"
        raise UnknownContextError(f"context must be a preset name (text), not {type(context_type).__name__}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in context_type):
        raise UnknownContextError(
            f"context {shown_name(context_type)} holds a control character, which no preset name has; "
            "`rag presets` lists the names"
        )


class CallPreset(NamedTuple):
    """What a query reads before it searches: its preset, whether its collection holds a document,
    the stored model (None before the first write) and the collection's number of chunks (``hnsw.ef_search``
    grows with it)."""

    preset: Preset
    collection_exists: bool
    stored_model: StoredModel | None
    collection_chunks: int = 0
    #: the collection's postings are packed (``db.packed_postings``): its BM25 arm runs in the extension
    packed_postings: bool = False
    #: the call gave ``min_relevance`` itself (a floor it cannot have is then said, ``relevance.applied_floor``)
    floor_given: bool = False


def _call_preset_statement(with_collection: bool) -> Select[Any]:
    """The statement of ``read_call_preset``, its values bound at execution (``context_type``, ``collection``)."""
    table = RagConfiguration.__table__
    collection = bindparam("collection", type_=String)
    held = select(Document.id).where(Document.collection == collection).limit(1)
    probe = exists(held) if with_collection else false()
    size = select(CollectionStats.chunk_count).where(CollectionStats.collection == collection).scalar_subquery()
    packed = exists(
        select(PackedSnapshot.collection).where(PackedSnapshot.collection == collection, PackedSnapshot.ready)
    )
    return (
        select(
            *table.columns,
            probe.label("call_collection_exists"),
            func.coalesce(size, 0).label("call_collection_chunks"),
            packed.label("call_packed_postings"),
            IndexSettings.embedding_model.label("call_stored_model"),
            IndexSettings.switching_to.label("call_switching_to"),
            IndexSettings.fts_config.label("call_fts_config"),
        )
        .select_from(table.outerjoin(IndexSettings.__table__, IndexSettings.id == 1))
        .where(table.c.context_type == bindparam("context_type", type_=String))
    )


#: built once: building it and its cache key cost ~0.7 ms of every query (docs/benchmarks.md, session 15)
_CALL_PRESET = {True: _call_preset_statement(True), False: _call_preset_statement(False)}


def read_call_preset(
    session: Session, context_type: str, *, collection: str | None, overridden: Iterable[str] = ()
) -> CallPreset:
    """``load_preset``, ``collection_exists``, ``read_stored_model`` and the collection's chunk count in one
    statement: one round trip instead of three before every search (0.15-0.2 ms on a local socket, a
    network round trip each elsewhere: docs/benchmarks.md, session 10). Without ``collection``,
    ``collection_exists`` is False and the count 0. The stored values are checked (``check_stored``),
    but for the ``overridden`` ones, which this call replaces."""
    check_context_name(context_type)
    statement = _CALL_PRESET[collection is not None]
    row = session.execute(statement, {"context_type": context_type, "collection": collection}).first()
    if row is None:
        load_preset(session, context_type)  # raises UnknownContextError naming the presets
        raise AssertionError("a preset vanished between two reads of one transaction")
    stored = (
        None
        if row.call_stored_model is None
        else StoredModel(row.call_stored_model, row.call_switching_to, row.call_fts_config)
    )
    overridden = frozenset(overridden)
    return CallPreset(
        check_stored(from_fields(Preset, row), replaced=overridden),
        bool(row.call_collection_exists),
        stored,
        int(row.call_collection_chunks),
        bool(row.call_packed_postings),
        "min_relevance" in overridden,
    )


_MOVE_FLOOR = text(
    "UPDATE rag_configurations SET min_relevance = :new, updated_at = now() "
    "WHERE context_type = :context AND min_relevance = :old"
)


def move_stock_floors(connection: Connection, floors: dict[str, tuple[float, float]], *, back: bool = False) -> None:
    """Each preset's ``min_relevance`` from the first floor of its ``(old, new)`` pair to the second (to the first
    with ``back``), only where it still holds the floor it moves from: a floor a user edited stays (migrations)."""
    for context_type, (old, new) in floors.items():
        moved = {"old": new, "new": old} if back else {"old": old, "new": new}
        connection.execute(_MOVE_FLOOR, {"context": context_type, **moved})
