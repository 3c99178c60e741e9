"""Exact BM25 for large collections: each lexeme's postings packed into one bytea, scored in the server.

Above ~20k chunks the bounded SQL arm stops being BM25 on real text (overlap with the exact top 20: 0.82 at
100k, 0.41 at 1M), and reading every posting in SQL costs 0.3-0.9 s at 1M (docs/benchmarks.md, sessions 18-19).
The ``rag_bm25`` extension (``ext/rag_bm25``, C: the SQL executor costs ~0.3 us a posting, 15x the C loop)
scores packed lists exactly in 10-19 ms at 1M. Its lists are a snapshot, kept exact between rebuilds:

* ``refresh`` packs a collection (one ``INSERT ... SELECT rag_bm25_pack(...) GROUP BY lexeme``) when it has at
  least ``min_chunks`` chunks, and packs it again once the chunks changed since pass ``REBUILD_SHARE`` of it;
* chunks deleted or rewritten since the snapshot are tombstones (a trigger, migration 0014): the extension's
  top ``k + tombstones`` less the tombstones is the snapshot's exact top ``k`` of the chunks still packed;
* chunks added since (ids above ``max_id``) and rewritten ones are scored by SQL from ``chunk_terms`` (few:
  at most ``REBUILD_SHARE`` of the collection), and the two lists merged.

Scores are BM25 with the live statistics (idf, average length), as the SQL arm's; the C loop sums in float32,
so scores agree to ~1e-6 relative. Without the extension, on Citus, or for a request with filters, phrases or
exclusions, ``db.bm25`` runs its SQL arms as before.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    CTE,
    BigInteger,
    Double,
    Integer,
    Select,
    String,
    Text,
    bindparam,
    cast,
    delete,
    func,
    literal,
    select,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by, insert
from sqlalchemy.orm import Session

from rag_service.db.database import Database
from rag_service.db.models import ChunkTerm, CollectionStats, DocumentChunk, PackedList, PackedSnapshot, PackedTombstone
from rag_service.db.statistics import vacuum
from rag_service.errors import first_line

if TYPE_CHECKING:  # search_request imports numpy, which an ingest run without changes never needs
    from rag_service.db.search_request import SearchRequest

_log = logging.getLogger(__name__)

EXTENSION = "rag_bm25"
#: the extension's version this code calls (0.2: ``rag_bm25_topk`` takes the ids to leave out; 0.3: a bulk load's
#: best lexemes, ``db.bulk_keywords``)
EXTENSION_VERSION = "0.3"
#: a snapshot is packed again once the chunks added, deleted or rewritten since pass this share of it: the SQL
#: part of the arm (chunks added since) stays small, and a rebuild costs ~32 s a million chunks
REBUILD_SHARE = 0.05
#: the extension's ids are int4 offsets from a snapshot's first chunk id
_MAX_SPAN = 2**31 - 2
_BUILD = (
    "INSERT INTO bm25_packed_lists (collection, lexeme, data) "
    "SELECT collection, lexeme, rag_bm25_pack(chunk_id - :base_id, tf, doc_len ORDER BY chunk_id) "
    "FROM chunk_terms WHERE collection = :collection GROUP BY collection, lexeme"
)


@dataclass(frozen=True, slots=True)
class PackedRefresh:
    """What ``refresh`` did: ``built``, ``kept`` (the snapshot is recent enough), ``dropped`` (the collection
    shrank below the size), ``none`` (too small) or ``unavailable`` (``reason`` says why)."""

    action: str
    chunks: int = 0
    seconds: float = 0.0
    reason: str = ""


def unavailable_reason(session: Session) -> str | None:
    """Why this database cannot pack postings, or None when it can (creating the extension if the server has
    it: ``make install`` builds it into the embedded server; another server needs ``ext/rag_bm25/build.sh``)."""
    rows = session.execute(
        text("SELECT extname, extversion FROM pg_extension WHERE extname IN ('citus', :e)"), {"e": EXTENSION}
    )
    installed = {str(name): str(version) for name, version in rows}
    if "citus" in installed:
        return "Citus: packed postings are not distributed; the bounded BM25 arm stays"
    if installed.get(EXTENSION) == EXTENSION_VERSION:
        return None
    build = "`make install` (the embedded server) or `bash ext/rag_bm25/build.sh $(which pg_config)` on your server"
    versions = session.scalars(
        text("SELECT version FROM pg_available_extension_versions WHERE name = :e"), {"e": EXTENSION}
    ).all()
    if EXTENSION_VERSION not in versions:
        have = f"has {EXTENSION} {', '.join(sorted(versions))}" if versions else f"has no {EXTENSION} extension"
        return f"the PostgreSQL server {have}, this code needs {EXTENSION_VERSION}; build it with {build}"
    if EXTENSION in installed:
        statement = f"ALTER EXTENSION {EXTENSION} UPDATE TO '{EXTENSION_VERSION}'"
    else:
        statement = f"CREATE EXTENSION {EXTENSION} VERSION '{EXTENSION_VERSION}'"
    try:
        with session.begin_nested():
            session.execute(text(statement))
    except Exception as exc:
        return f"{statement} failed ({first_line(exc)}); a superuser can run it once in this database"
    return None


def is_packed(session: Session, collection: str) -> bool:
    """``collection`` has a ready snapshot: its unfiltered BM25 arm runs in the extension."""
    where = (PackedSnapshot.collection == collection, PackedSnapshot.ready)
    return bool(session.scalar(select(func.count()).select_from(PackedSnapshot).where(*where)))


def refresh(db: Database, collection: str, *, min_chunks: int) -> PackedRefresh:
    """Pack ``collection``'s postings when it holds at least ``min_chunks`` chunks (0: never) and its snapshot
    is missing or older than ``REBUILD_SHARE`` of changes; drop the snapshot of a collection below the size.

    Run by the ingest after each run, under the collection's reindex lock (one refresh at a time).
    """
    with db.transaction() as session:
        chunks = session.scalar(select(CollectionStats.chunk_count).where(CollectionStats.collection == collection))
        chunks = int(chunks or 0)
        snapshot = session.get(PackedSnapshot, collection)
        if min_chunks <= 0 or chunks < min_chunks:
            if snapshot is None:
                return PackedRefresh("none", chunks)
            _drop(session, collection)
            return PackedRefresh("dropped", chunks)
        reason = unavailable_reason(session)
        if reason is not None:
            return PackedRefresh("unavailable", chunks, reason=reason)
        if (
            snapshot is not None
            and snapshot.ready
            and _changes(session, snapshot) <= REBUILD_SHARE * snapshot.chunk_count
        ):
            return PackedRefresh("kept", chunks)
        first = snapshot is None
        if first:
            # committed first: from here on, deletes record tombstones, so none made during the build is missed
            session.add(PackedSnapshot(collection=collection, base_id=0, max_id=-1, chunk_count=0, ready=False))
    started = time.perf_counter()
    if first:
        _settle_postings(db)
    packed = _build(db, collection)
    seconds = time.perf_counter() - started
    _log.info("packed the postings of %d chunks of collection %r in %.1f s", packed, collection, seconds)
    return PackedRefresh("built", packed, seconds)


def _settle_postings(db: Database) -> None:
    """``VACUUM (ANALYZE)`` the postings before a collection's first pack. A first pack usually follows a bulk
    load whose postings were never read: the pack's scan then set every page's hint bits and found no visibility
    map (at 100k chunks: pack 15.3 s right after the load's commit, 26.4 s inside its transaction; vacuum 2.1 s,
    then pack 5.6 s). VACUUM skips the pages already all-visible, so on a settled table it costs little. A table
    another VACUUM holds is left to it (waiting would make PostgreSQL cancel an autovacuum: ``db.statistics``)."""
    started = time.perf_counter()
    if vacuum(db, "VACUUM (ANALYZE, SKIP_LOCKED) chunk_terms"):
        _log.info("vacuumed the postings before a first pack in %.1f s", time.perf_counter() - started)


def _changes(session: Session, snapshot: PackedSnapshot) -> int:
    """Chunks deleted or rewritten (tombstones) and added (ids above ``max_id``) since ``snapshot``."""
    where = PackedTombstone.collection == snapshot.collection
    tombstones = session.scalar(select(func.count()).select_from(PackedTombstone).where(where)) or 0
    added = session.scalar(
        select(func.count())
        .select_from(DocumentChunk)
        .where(DocumentChunk.collection == snapshot.collection, DocumentChunk.id > snapshot.max_id)
    )
    return int(tombstones) + int(added or 0)


def _build(db: Database, collection: str) -> int:
    """Pack every posting of ``collection`` in one REPEATABLE READ transaction: the lists, ``max_id`` and the
    tombstones cleared are of one snapshot; tombstones written meanwhile (invisible to it) stay."""
    with db.transaction() as session:
        if not db.is_bound:
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        session.execute(text("SET LOCAL statement_timeout = 0"))  # ~32 s a million chunks
        session.execute(text("SET LOCAL work_mem = '256MB'"))  # each lexeme's postings sorted in memory
        span = session.execute(
            select(func.min(DocumentChunk.id), func.max(DocumentChunk.id), func.count()).where(
                DocumentChunk.collection == collection
            )
        ).one()
        base_id, max_id, count = int(span[0] or 0), int(span[1] if span[1] is not None else -1), int(span[2])
        session.execute(delete(PackedList).where(PackedList.collection == collection))
        snapshot = session.get(PackedSnapshot, collection, with_for_update=True)
        if max_id - base_id > _MAX_SPAN:
            _log.warning("collection %r spans more chunk ids than packed postings hold; not packed", collection)
            if snapshot is not None:
                session.delete(snapshot)
            return 0
        session.execute(text(_BUILD), {"collection": collection, "base_id": base_id})
        session.execute(delete(PackedTombstone).where(PackedTombstone.collection == collection))
        values = {"base_id": base_id, "max_id": max_id, "chunk_count": count, "ready": True, "built_at": func.now()}
        upsert = insert(PackedSnapshot).values(collection=collection, **values)
        session.execute(upsert.on_conflict_do_update(index_elements=["collection"], set_=values))
    return count


def _drop(session: Session, collection: str) -> None:
    for table in (PackedList, PackedTombstone, PackedSnapshot):
        session.execute(delete(table).where(table.collection == collection))


def drop(db: Database, collection: str) -> None:
    """Remove ``collection``'s packed postings (its keyword arm goes back to SQL)."""
    with db.transaction() as session:
        _drop(session, collection)


def packed_matches(request: SearchRequest, terms: CTE) -> Select[Any]:
    """The exact BM25 top ``candidate_k`` of a collection with a snapshot: the extension over the packed lists
    (less tombstones) merged with SQL over the chunks added or rewritten since. ``terms`` are the query's
    lexemes with their constants (``db.bm25._bm25_stats``: ``weight = idf * (k1 + 1)``)."""
    collection = bindparam("collection", request.collection, type_=String)
    k1 = bindparam("bm25_k1", float(request.bm25_k1), type_=Double)
    b = bindparam("bm25_b", float(request.bm25_b), type_=Double)
    k = bindparam("candidate_k_kw", request.candidate_k, type_=BigInteger)
    snapshot = (
        select(PackedSnapshot.base_id, PackedSnapshot.max_id)
        .where(PackedSnapshot.collection == collection, PackedSnapshot.ready)
        .cte("bm25_snapshot")
    )
    tombstones = (
        select(PackedTombstone.chunk_id, PackedTombstone.rewritten)
        .where(PackedTombstone.collection == collection)
        .cte("bm25_tombstones")
        .prefix_with("MATERIALIZED")
    )
    # each query lexeme's list probed by its key: with a join, statistics from before a pack (one row for the
    # collection) made the planner read every list of the collection and filter (ray docs: 15 of a 15 ms arm).
    # LIMIT 1 (the key is unique) keeps the LATERAL from being pulled up into a join the planner may reorder
    term_list = (
        select(PackedList.lexeme, PackedList.data)
        .where(PackedList.collection == collection, PackedList.lexeme == terms.c.lexeme)
        .limit(1)
        .lateral("bm25_term_list")
    )
    lists = (
        select(
            func.array_agg(aggregate_order_by(term_list.c.data, term_list.c.lexeme)).label("data"),
            func.array_agg(aggregate_order_by(terms.c.weight / (k1 + 1.0), term_list.c.lexeme)).label("idf"),
        )
        .select_from(terms.join(term_list, true()))
        .cte("bm25_lists")
    )
    average = cast(CollectionStats.total_length, Double) / cast(CollectionStats.chunk_count, Double)
    span = cast(snapshot.c.max_id - snapshot.c.base_id, Integer)
    # the tombstones the snapshot holds, as the extension's offsets: left out of its top k
    held = tombstones.c.chunk_id.between(snapshot.c.base_id, snapshot.c.max_id)
    offsets = func.array_agg(cast(tombstones.c.chunk_id - snapshot.c.base_id, Integer)).filter(held)
    skip = select(func.coalesce(offsets, cast(literal("{}"), ARRAY(Integer)))).select_from(
        snapshot.join(tombstones, true())
    )
    top = (
        func.rag_bm25_topk(lists.c.data, lists.c.idf, k1, b, average, cast(k, Integer), span, skip.scalar_subquery())
        .table_valued("chunk_id", "score")
        .lateral("bm25_top")
    )
    from_snapshot = (
        select((snapshot.c.base_id + top.c.chunk_id).label("id"), top.c.score.label("score"))
        .select_from(snapshot.join(lists, true()).join(CollectionStats, CollectionStats.collection == collection))
        .join(top, true())
        .subquery("bm25_from_snapshot")
    )
    packed = select(from_snapshot.c.id, from_snapshot.c.score)
    both = packed.union_all(_since_snapshot(request, terms, snapshot, tombstones)).subquery("bm25_exact")
    return select(both.c.id, both.c.score).order_by(both.c.score.desc(), both.c.id).limit(k)


def _since_snapshot(request: SearchRequest, terms: CTE, snapshot: CTE, tombstones: CTE) -> Select[Any]:
    """BM25 in SQL of the chunks the snapshot does not hold as they are: added since (ids above ``max_id``;
    all of them without a ready snapshot) and rewritten since (tombstones that still exist).

    Their ids are gathered first (the chunks' primary key, then the tombstones), and each is scored by a probe of
    ``pk_chunk_terms`` for the query's lexemes (correlated, as ``db.bm25`` scores filtered chunks): a condition
    ``chunk_id > max_id`` on the postings let the planner read every posting of the query's lexemes instead (21 ms
    at 1M, for none found).
    """
    collection = bindparam("collection", request.collection, type_=String)
    max_id = func.coalesce(select(snapshot.c.max_id).scalar_subquery(), literal(-1, BigInteger))
    added = select(DocumentChunk.id).where(DocumentChunk.collection == collection, DocumentChunk.id > max_id)
    rewritten = select(tombstones.c.chunk_id.label("id")).where(tombstones.c.rewritten, tombstones.c.chunk_id <= max_id)
    changed = added.union_all(rewritten).cte("bm25_changed").prefix_with("MATERIALIZED")
    lexemes = cast(select(func.array_agg(terms.c.lexeme)).scalar_subquery(), ARRAY(Text))
    tf = cast(ChunkTerm.tf, Double)
    probe = (
        select(func.sum(terms.c.weight * tf / (tf + terms.c.base + terms.c.slope * ChunkTerm.doc_len)))
        .select_from(ChunkTerm)
        .join(terms, terms.c.lexeme == ChunkTerm.lexeme)
        .where(
            ChunkTerm.collection == collection,
            ChunkTerm.chunk_id == changed.c.id,
            ChunkTerm.lexeme == func.any(lexemes),
        )
        .scalar_subquery()
    )
    # materialized: the planner would otherwise run the probe twice, in the filter and in the select list
    scored = select(changed.c.id, probe.label("score")).cte("bm25_changed_scores").prefix_with("MATERIALIZED")
    return select(scored.c.id, scored.c.score).where(scored.c.score.is_not(None))
