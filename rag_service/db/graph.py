"""SQL of the chunk graph (``chunk_edges``, ``chunk_links``): writing, forgetting and walking edges.

Every statement names its collection, and nothing here relies on a foreign key: the code that deletes
or replaces chunks calls ``forget_chunks`` / ``forget_documents`` in the same transaction, so no edge
outlives its chunks in any committed state. Which edges to write is the ingest stage's business
(``rag_service.ingest.graph``); this module only stores and reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import any_, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import BigInteger, Text

from rag_service.db.citus import has_citus, insert_columns
from rag_service.db.local_settings import local_settings
from rag_service.db.models import Document, DocumentChunk
from rag_service.db.statistics import collection_chunks

if TYPE_CHECKING:  # the search modules (numpy) load when a walk runs, not for indexing
    from rag_service.db.search_request import SearchHit, SearchRequest

#: edge kinds
SIMILAR = "similar"
SIBLING = "sibling"
PARENT = "parent"  # from a section's first chunk to its enclosing section's first chunk
CHILD = "child"  # the reverse of PARENT
LINK = "link"  # from the chunk holding a link to the linked document's (or section's) first chunk
BACKLINK = "backlink"  # the reverse of LINK

Edge = tuple[int, int, str, float]  # (source chunk id, target chunk id, kind, weight)

_IDS = ARRAY(BigInteger)
#: the largest bigint: "every document" for the similarity scans
MAX_ID = 2**63 - 1
#: HNSW candidate list of the similarity-edge scans (pgvector's own default)
EDGE_EF_SEARCH = 40
#: index tuples an edge scan may read to fill its pool (pgvector's default is 20,000): anthropic-docs-qa beside
#: other collections gets the same 7,776 edges at 1,000 as unbounded, in 1.03-1.16 against 1.56-1.76 s of graph
#: (docs/benchmarks.md "Session 36")
EDGE_MAX_SCAN_TUPLES = 1000


@dataclass(frozen=True, slots=True)
class GraphChunk:
    """What edge building needs to know about one stored chunk."""

    id: int
    chunk_index: int
    headers: dict[str, str]
    start_char: int
    end_char: int
    parent_start: int | None
    parent_end: int | None


_DELETE_EDGES_FROM = text(
    "DELETE FROM chunk_edges WHERE collection = :collection AND source_chunk_id = ANY(:ids)"
).bindparams(bindparam("ids", type_=_IDS))
_DELETE_EDGES_TO = text(
    "DELETE FROM chunk_edges WHERE collection = :collection AND target_chunk_id = ANY(:ids)"
).bindparams(bindparam("ids", type_=_IDS))
_DELETE_LINKS = text(
    "DELETE FROM chunk_links WHERE collection = :collection AND source_chunk_id = ANY(:ids)"
).bindparams(bindparam("ids", type_=_IDS))


def forget_chunks(session: Session, *, collection: str, chunk_ids: Sequence[int]) -> None:
    """Delete every edge from or to these chunks, and their links; call where the chunks are deleted."""
    if not chunk_ids:
        return
    params = {"collection": collection, "ids": list(chunk_ids)}
    session.execute(_DELETE_EDGES_FROM, params)
    session.execute(_DELETE_EDGES_TO, params)
    session.execute(_DELETE_LINKS, params)


def forget_documents(session: Session, *, collection: str, document_ids: Sequence[int]) -> None:
    """``forget_chunks`` for every chunk of these documents of ``collection`` (before they are deleted)."""
    if not document_ids:
        return
    chunk_ids = session.scalars(
        text("SELECT id FROM document_chunks WHERE collection = :collection AND document_id = ANY(:ids)").bindparams(
            bindparam("ids", type_=_IDS)
        ),
        {"collection": collection, "ids": list(document_ids)},
    ).all()
    forget_chunks(session, collection=collection, chunk_ids=chunk_ids)


def forget_collection(session: Session, *, collection: str) -> None:
    """Delete the whole graph of a collection (before it is rebuilt)."""
    session.execute(text("DELETE FROM chunk_edges WHERE collection = :collection"), {"collection": collection})
    session.execute(text("DELETE FROM chunk_links WHERE collection = :collection"), {"collection": collection})


def document_chunks(session: Session, *, collection: str, document_id: int) -> list[GraphChunk]:
    """The chunks of one document in order, as edge building sees them."""
    rows = session.execute(
        text(
            "SELECT id, chunk_index, headers, start_char, end_char, parent_start, parent_end FROM document_chunks "
            "WHERE collection = :collection AND document_id = :document_id ORDER BY chunk_index"
        ),
        {"collection": collection, "document_id": document_id},
    )
    return [GraphChunk(*row) for row in rows.all()]


def document_ids_by_source(session: Session, *, collection: str, sources: Sequence[str]) -> dict[str, int]:
    """Ids of the documents stored under any of these sources, by source."""
    if not sources:
        return {}
    rows = session.execute(
        text("SELECT source, id FROM documents WHERE collection = :collection AND source = ANY(:sources)").bindparams(
            bindparam("sources", type_=ARRAY(Text))
        ),
        {"collection": collection, "sources": list(sources)},
    )
    return {source: int(document_id) for source, document_id in rows.all()}


_INSERT_EDGE = text(
    "INSERT INTO chunk_edges (collection, source_chunk_id, target_chunk_id, kind, weight) "
    "VALUES (:collection, :source, :target, :kind, :weight) ON CONFLICT DO NOTHING"
)


def write_edges(session: Session, *, collection: str, edges: Sequence[Edge]) -> int:
    """Insert edges (an edge already stored is kept); returns how many were given."""
    unique = {(s, t, k): w for s, t, k, w in edges if s != t}
    if unique:
        session.execute(
            _INSERT_EDGE,
            [
                {"collection": collection, "source": s, "target": t, "kind": k, "weight": float(w)}
                for (s, t, k), w in unique.items()
            ],
        )
    return len(unique)


def write_links(session: Session, *, collection: str, links: Sequence[tuple[int, str, str]]) -> None:
    """Store chunks' outgoing links as ``(source chunk id, target key, anchor)``."""
    if links:
        session.execute(
            text(
                "INSERT INTO chunk_links (collection, source_chunk_id, target_key, anchor) "
                "VALUES (:collection, :chunk, :key, :anchor) ON CONFLICT DO NOTHING"
            ),
            [{"collection": collection, "chunk": c, "key": k, "anchor": a} for c, k, a in sorted(set(links))],
        )


def links_to(session: Session, *, collection: str, target_key: str) -> list[tuple[int, str]]:
    """``(source chunk id, anchor)`` of every stored link to the document keyed ``target_key``."""
    rows = session.execute(
        text("SELECT source_chunk_id, anchor FROM chunk_links WHERE collection = :collection AND target_key = :key"),
        {"collection": collection, "key": target_key},
    )
    return [(int(chunk_id), str(anchor)) for chunk_id, anchor in rows.all()]


def _nearest_sql(order: str) -> str:
    """Each chunk of ``:ids`` with its ``:neighbours`` nearest of other documents among the ``:pool`` nearest
    chunks of the collection, nearest first by ``order`` (the distance, as the HNSW index or an exact sort reads it)."""
    return f"""
        SELECT n.id AS a, nb.id AS b, 1.0 - nb.distance AS similarity
        FROM document_chunks n
        CROSS JOIN LATERAL (
            SELECT pool.id, pool.distance FROM (
                SELECT d.id, d.document_id, d.embedding <=> n.embedding AS distance
                FROM document_chunks d
                WHERE d.collection = :collection AND d.id <> n.id AND d.document_id <= :up_to
                ORDER BY {order}
                LIMIT :pool
            ) pool
            WHERE pool.document_id <> :document_id
            ORDER BY pool.distance
            LIMIT :neighbours
        ) nb
        WHERE n.collection = :collection AND n.id = ANY(:ids)
          AND nb.distance <= 1.0 - :min_similarity AND nb.distance < 1.0
"""  # noqa: S608 (constants of this module only)


def _similar_edges_sql(nearest: str) -> str:
    """``nearest``'s pairs inserted as edges both ways; the statement returns how many were new."""
    return f"""
    WITH nearest AS ({nearest}
    ), inserted AS (
        INSERT INTO chunk_edges (collection, source_chunk_id, target_chunk_id, kind, weight)
        SELECT :collection, a, b, :kind, similarity FROM nearest
        UNION ALL
        SELECT :collection, b, a, :kind, similarity FROM nearest
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT count(*) FROM inserted
    """  # noqa: S608 (constants of this module only)


_NEAREST_SQL = _nearest_sql("d.embedding <=> n.embedding")
#: a small collection's neighbours found exactly, every chunk of it compared (``+ 0`` keeps the sort off the HNSW
#: index): see ``write_similar_edges``
_EXACT_NEAREST_SQL = _nearest_sql("(d.embedding <=> n.embedding) + 0")
_SIMILAR_EDGES = text(_similar_edges_sql(_NEAREST_SQL)).bindparams(bindparam("ids", type_=_IDS))
_EXACT_SIMILAR_EDGES = text(_similar_edges_sql(_EXACT_NEAREST_SQL)).bindparams(bindparam("ids", type_=_IDS))
# Citus: the pairs read by a single-shard SELECT, then inserted from arrays (routed to the collection's shard):
# the data-modifying CTE above is planned in steps whose intermediate results go to every worker, so one worker
# down failed each document's write into every collection
_CITUS_NEAREST = text(_NEAREST_SQL).bindparams(bindparam("ids", type_=_IDS))
_CITUS_EXACT_NEAREST = text(_EXACT_NEAREST_SQL).bindparams(bindparam("ids", type_=_IDS))
_CITUS_EDGES = text(
    "INSERT INTO chunk_edges (collection, source_chunk_id, target_chunk_id, kind, weight) "
    "SELECT CAST(:collection AS varchar), u.s, u.t, :kind, u.w FROM unnest(CAST(:sources AS bigint[]), "
    "CAST(:targets AS bigint[]), CAST(:weights AS float8[])) AS u(s, t, w) ON CONFLICT DO NOTHING"
)
#: chunks whose neighbours one statement looks up (a 10,000-chunk document stays within statement_timeout)
SIMILAR_BATCH = 256
#: nearest chunks read per chunk before those of its own document are dropped: a bounded scan even when
#: the document is most of its collection (filtering inside the scan made pgvector walk thousands of them)
POOL_PER_NEIGHBOUR = 4


def write_similar_edges(
    session: Session,
    *,
    collection: str,
    document_id: int,
    chunk_ids: Sequence[int],
    neighbours: int,
    min_similarity: float,
    up_to_document: int | None = None,
    exact_below: int = 0,
) -> int:
    """Edges both ways between each chunk of the document and its nearest chunks of other documents.

    ``up_to_document``: only chunks of documents with an id up to it (a bulk load's replay,
    ``ingest.bulkwrite``). pgvector's iterative scan reads on until the pool is full of chunks that pass.

    The neighbours come from the HNSW index (``ORDER BY embedding <=> ... LIMIT``, one index scan per
    chunk), in the caller's transaction: the ``4 * neighbours`` nearest chunks of the collection, of
    which those of other documents are kept. Returns how many edges were inserted.

    A collection of at most ``exact_below`` chunks (``RAG_EXACT_SEARCH_BELOW``, as the vector arm) and no more than
    the walk's budget (``EDGE_MAX_SCAN_TUPLES``) is compared chunk by chunk instead, reading no more rows than a walk
    may: in an index shared with a large collection, a small one's walk spent its budget on the others' tuples and
    stopped with few of its own (a 62-chunk collection beside 68,000 chunks: 66-78 of its 356 edges, in 0.4-0.7 s;
    compared: all 356 in 0.06 s).
    """
    pool = POOL_PER_NEIGHBOUR * neighbours
    up_to = MAX_ID if up_to_document is None else up_to_document
    if 0 < collection_chunks(session, collection) <= min(exact_below, EDGE_MAX_SCAN_TUPLES):
        with local_settings(session, _EXACT_PLAN):
            return _write_similar_batches(
                session, collection, document_id, chunk_ids, pool, neighbours, min_similarity, up_to, exact=True
            )
    # 40 candidates suffice for 5 neighbours: the same edges as ef_search 100 (1031 of 1031 on SciFact,
    # 4858 of 4859 on ray-docs-qa) at 2-3x less time. The scan reads on (iterative) until its pool is full of the
    # collection's live chunks: other collections' chunks, deleted ones not yet vacuumed and (a bulk replay) later
    # documents would otherwise take the candidate list. A replay keeps pgvector's bound on that: early documents
    # of a large load pass few of the tuples it reads
    scan = {**_INDEX_ONLY_PLAN, "hnsw.ef_search": str(max(EDGE_EF_SEARCH, pool)), "hnsw.iterative_scan": "strict_order"}
    if up_to_document is None:
        scan["hnsw.max_scan_tuples"] = str(EDGE_MAX_SCAN_TUPLES)
    # the rest of the ingest's transaction plans and scans as before
    with local_settings(session, scan):
        written = _write_similar_batches(
            session, collection, document_id, chunk_ids, pool, neighbours, min_similarity, up_to
        )
    return written


#: the planner settings the similarity scans turn off for their statements. A new collection's chunks
#: are written in the ingest's own transaction, unanalysed: planned for the ~17 rows the statistics
#: promise, each chunk's nearest were found by reading and sorting every chunk of the collection instead
#: of through the HNSW index: 12.8 ms a chunk, 113 s of graph for one 5,000-chunk document (4.2 s now)
_INDEX_ONLY_PLAN = dict.fromkeys(("enable_seqscan", "enable_bitmapscan", "enable_sort"), "off")
#: the exact comparison reads the collection's chunks by its key, never the whole table (a new collection is
#: unanalysed: estimated at a few rows, a sequential scan of the table could look as cheap)
_EXACT_PLAN = {"enable_seqscan": "off"}


def _write_similar_batches(
    session: Session,
    collection: str,
    document_id: int,
    chunk_ids: Sequence[int],
    pool: int,
    neighbours: int,
    min_similarity: float,
    up_to: int,
    *,
    exact: bool = False,
) -> int:
    written = 0
    statement = _EXACT_SIMILAR_EDGES if exact else _SIMILAR_EDGES
    citus_nearest = _CITUS_EXACT_NEAREST if exact else _CITUS_NEAREST
    citus = has_citus(session.connection())
    for start in range(0, len(chunk_ids), SIMILAR_BATCH):
        params: dict[str, Any] = {
            "collection": collection,
            "document_id": document_id,
            "ids": list(chunk_ids[start : start + SIMILAR_BATCH]),
            "pool": pool,
            "neighbours": neighbours,
            "min_similarity": float(min_similarity),
            "kind": SIMILAR,
            "up_to": up_to,
        }
        if not citus:
            written += int(session.execute(statement, params).scalar_one())
            continue
        pairs = session.execute(citus_nearest, params).all()
        edges = [(a, b, float(w)) for a, b, w in pairs] + [(b, a, float(w)) for a, b, w in pairs]
        written += insert_columns(
            session, _CITUS_EDGES, ("sources", "targets", "weights"), edges, collection=collection, kind=SIMILAR
        )
    return written


#: the edges within two hops of the seeds (``neighbourhood``); tests read its plan
NEIGHBOURHOOD_SQL = """
    WITH hop1 AS (
        SELECT s.id AS source, e.target_chunk_id AS target, e.weight
        FROM unnest(CAST(:seeds AS bigint[])) AS s(id)
        CROSS JOIN LATERAL (
            SELECT target_chunk_id, sum(weight) AS weight FROM chunk_edges
            WHERE collection = :collection AND source_chunk_id = s.id
            GROUP BY target_chunk_id ORDER BY 2 DESC, 1 LIMIT :per_node
        ) e
    ), hop2 AS (
        SELECT f.id AS source, e.target_chunk_id AS target, e.weight
        FROM (SELECT DISTINCT target AS id FROM hop1) f
        CROSS JOIN LATERAL (
            SELECT target_chunk_id, sum(weight) AS weight FROM chunk_edges
            WHERE collection = :collection AND source_chunk_id = f.id
            GROUP BY target_chunk_id ORDER BY 2 DESC, 1 LIMIT :per_node
        ) e
    )
    SELECT source, target, weight FROM hop1
    UNION
    SELECT source, target, weight FROM hop2
    """
_NEIGHBOURHOOD = text(NEIGHBOURHOOD_SQL)


_HAS_EDGES = text("SELECT EXISTS (SELECT 1 FROM chunk_edges WHERE collection = :collection)")


def has_edges(session: Session, *, collection: str) -> bool:
    """Whether ``collection`` has a chunk graph at all (an index made before the graph has none)."""
    return bool(session.execute(_HAS_EDGES, {"collection": collection}).scalar_one())


def neighbourhood(
    session: Session, *, collection: str, seeds: Sequence[int], per_node: int
) -> list[tuple[int, int, float]]:
    """The edges within two hops of the seeds, at most ``per_node`` (strongest) out of each chunk.

    Edges of several kinds between the same two chunks are summed into one.
    """
    if not seeds:
        return []
    rows = session.execute(_NEIGHBOURHOOD, {"collection": collection, "seeds": list(seeds), "per_node": per_node}).all()
    return [(int(s), int(t), float(w)) for s, t, w in rows]


def fetch_hits(session: Session, request: SearchRequest, chunk_ids: Sequence[int]) -> list[SearchHit]:
    """The chunks a graph walk reached, as search hits without arm scores, under the request's filters."""
    from rag_service.db.search import hit_columns, hit_from_row
    from rag_service.db.search_request import chunk_conditions

    if not chunk_ids:
        return []
    c, d = DocumentChunk, Document
    statement = (
        select(c.id, *hit_columns())
        .join(d, (d.collection == c.collection) & (d.id == c.document_id))
        .where(c.id == any_(bindparam("graph_ids", list(chunk_ids), type_=_IDS)), *chunk_conditions(request))
    )
    return [
        hit_from_row(row, vector_rank=None, keyword_rank=None, vector_score=None, keyword_score=None, fused_score=0.0)
        for row in session.execute(statement).all()
    ]
