"""Which edges a written document gets in the chunk graph; run in the transaction that writes it.

Three kinds of edges, all within one collection (SQL in ``rag_service.db.graph``):

* similarity: each chunk's ``neighbours`` nearest chunks of other documents with cosine similarity
  at least ``min_similarity``, through the HNSW index, both ways (weight: the similarity);
* structure: consecutive chunks of one section are siblings, both ways; a section's first chunk
  and the first chunk of its enclosing section (one header level up) are child and parent;
* links: a markdown or HTML link to another document, or to one of its sections (``#anchor``, the
  slug of its header), from the chunk holding it to the target's first chunk, with a weaker
  backlink. Links are stored unresolved as well (``chunk_links``), so a document written later, or
  rewritten, gets the edges of the links that point at it.

A rewritten document loses all its edges with its old chunks (``db.documents.replace_document``),
and gets new ones here in the same transaction; an unchanged document is never written, so a re-run
writes no edges.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from rag_service.db import graph as store
from rag_service.db.graph import Edge, GraphChunk
from rag_service.ingest.chunk import HEADER_KEYS
from rag_service.ingest.links import DOCUMENT_SUFFIXES, INDEX_NAMES, document_key, find_links, slugify

#: nearest chunks of other documents linked to each new chunk
DEFAULT_NEIGHBOURS = 5
#: cosine similarity an embedding neighbour needs to become an edge (MiniLM: related passages ~0.5+)
DEFAULT_MIN_SIMILARITY = 0.5
SIBLING_WEIGHT = 0.5
PARENT_WEIGHT = 0.5
LINK_WEIGHT = 1.0
BACKLINK_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class GraphBuilder:
    """Writes a document's edges; ``neighbours=0`` leaves similarity edges out."""

    neighbours: int = DEFAULT_NEIGHBOURS
    min_similarity: float = DEFAULT_MIN_SIMILARITY
    #: similarity edges only to documents up to the written one's id: ``rag reindex --all`` rewrites a collection in id
    #: order, keeping ids, so these are the ones rewritten already, as a first index wrote them (edges to a later one
    #: would go with its old chunks, thinning the graph at every reindex)
    replay: bool = False
    #: a collection of at most this many chunks (and ``db.graph.EDGE_MAX_SCAN_TUPLES``) gets its similarity edges by
    #: comparing every chunk of it (``RAG_EXACT_SEARCH_BELOW``; ``db.graph.write_similar_edges``); 0: always the index
    exact_below: int = 0

    def build(
        self,
        session: Session,
        *,
        collection: str,
        document_id: int,
        source: str,
        text: str,
        up_to_document: int | None = None,
    ) -> int:
        """Write every edge of a newly written document (its chunks are stored); returns how many.

        ``up_to_document``: similarity edges only to documents with an id up to it (a bulk load
        replaying the row path, which wrote documents in id order; ``ingest.bulkwrite``).
        """
        chunks = store.document_chunks(session, collection=collection, document_id=document_id)
        if not chunks:
            return 0
        written = store.write_edges(session, collection=collection, edges=structure_edges(chunks))
        written += self._link_edges(session, collection, source, text, chunks)
        if self.neighbours > 0:
            written += store.write_similar_edges(
                session,
                collection=collection,
                document_id=document_id,
                chunk_ids=[c.id for c in chunks],
                neighbours=self.neighbours,
                min_similarity=self.min_similarity,
                up_to_document=document_id if up_to_document is None and self.replay else up_to_document,
                exact_below=self.exact_below,
            )
        return written

    def _link_edges(self, session: Session, collection: str, source: str, text: str, chunks: list[GraphChunk]) -> int:
        own = {c.id for c in chunks}
        starts = [c.start_char for c in chunks]
        outgoing = [
            (chunk.id, link.target_key, link.anchor)
            for link in find_links(text, source=source)
            if (chunk := _chunk_at(chunks, starts, link.offset)) is not None
        ]
        store.write_links(session, collection=collection, links=outgoing)
        edges: list[Edge] = []
        targets: dict[str, list[GraphChunk]] = {}
        for chunk_id, key, anchor in outgoing:
            if key not in targets:
                targets[key] = _document_by_key(session, collection, key)
            edges += _link(chunk_id, targets[key], anchor)
        for chunk_id, anchor in store.links_to(session, collection=collection, target_key=document_key(source)):
            if chunk_id not in own:
                edges += _link(chunk_id, chunks, anchor)
        return store.write_edges(session, collection=collection, edges=edges)


@dataclass(slots=True)
class GraphReport:
    """What ``rag graph build`` did."""

    collections: list[str] = field(default_factory=list)
    documents: int = 0
    edges_written: int = 0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """Human-readable summary."""
        names = ", ".join(repr(c) for c in self.collections) or "none"
        return [
            f"graph of {names}: {self.documents} documents, {self.edges_written} edges written in {self.seconds:.1f} s"
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def rebuild_collection(
    session: Session, builder: GraphBuilder, *, collection: str, documents: Iterable[tuple[int, str, str]]
) -> tuple[int, int]:
    """Replace the whole graph of a collection from its stored chunks: ``(documents, edges)``.

    ``documents`` are ``(id, source, stored text)``. Run in one transaction: readers see the old graph
    or the new one. Nothing is embedded: similarity edges come from the stored vectors.
    """
    store.forget_collection(session, collection=collection)
    count = edges = 0
    for document_id, source, text in documents:
        edges += builder.build(session, collection=collection, document_id=document_id, source=source, text=text)
        count += 1
    return count, edges


def timed_rebuild(
    session: Session, builder: GraphBuilder, *, collection: str, documents: Iterable[tuple[int, str, str]]
) -> GraphReport:
    """``rebuild_collection`` with its report."""
    started = time.perf_counter()
    count, edges = rebuild_collection(session, builder, collection=collection, documents=documents)
    return GraphReport([collection], count, edges, time.perf_counter() - started)


def structure_edges(chunks: Sequence[GraphChunk]) -> list[Edge]:
    """Siblings (consecutive chunks of one section, both ways) and parent/child between section heads."""
    edges: list[Edge] = []
    heads: dict[tuple[str, ...], GraphChunk] = {}  # the latest section head under each header path
    previous: GraphChunk | None = None
    for chunk in chunks:
        if previous is not None and _section(previous) == _section(chunk):
            edges += [
                (previous.id, chunk.id, store.SIBLING, SIBLING_WEIGHT),
                (chunk.id, previous.id, store.SIBLING, SIBLING_WEIGHT),
            ]
        else:
            path = _header_path(chunk)
            parent = next((heads[path[:n]] for n in range(len(path) - 1, 0, -1) if path[:n] in heads), None)
            if parent is not None:
                edges += [
                    (chunk.id, parent.id, store.PARENT, PARENT_WEIGHT),
                    (parent.id, chunk.id, store.CHILD, PARENT_WEIGHT),
                ]
            heads[path] = chunk
        previous = chunk
    return edges


def _section(chunk: GraphChunk) -> tuple[object, ...]:
    if chunk.parent_start is not None:
        return ("parent", chunk.parent_start, chunk.parent_end)
    return ("headers", *_header_path(chunk))


def _header_path(chunk: GraphChunk) -> tuple[str, ...]:
    return tuple(chunk.headers[k] for k in HEADER_KEYS if k in chunk.headers)


def _chunk_at(chunks: Sequence[GraphChunk], starts: Sequence[int], offset: int) -> GraphChunk | None:
    """The first chunk holding ``offset`` (``starts``: the chunks' start offsets, ascending)."""
    index = bisect.bisect_right(starts, offset) - 1
    holding = [c for c in chunks[max(index - 1, 0) : index + 1] if c.start_char <= offset < c.end_char]
    return holding[0] if holding else None


def _link(chunk_id: int, target: Sequence[GraphChunk], anchor: str) -> list[Edge]:
    """Edges from a linking chunk to the target document's first chunk, or its section's (``anchor``)."""
    head = _anchor_head(target, anchor) if anchor else (target[0] if target else None)
    if head is None or head.id == chunk_id:
        return []
    return [(chunk_id, head.id, store.LINK, LINK_WEIGHT), (head.id, chunk_id, store.BACKLINK, BACKLINK_WEIGHT)]


def _anchor_head(chunks: Iterable[GraphChunk], anchor: str) -> GraphChunk | None:
    """The first chunk of the section whose innermost header's slug is ``anchor``."""
    for chunk in chunks:
        path = _header_path(chunk)
        if path and slugify(path[-1]) == anchor:
            return chunk
    return None


def _document_by_key(session: Session, collection: str, key: str) -> list[GraphChunk]:
    """The chunks of the stored document a link key names (``guide/install`` -> ``guide/install.md``...)."""
    found = store.document_ids_by_source(session, collection=collection, sources=candidate_sources(key))
    if not found:
        return []
    document_id = found[min(found)]  # several candidates: the first source in sort order, deterministically
    return store.document_chunks(session, collection=collection, document_id=document_id)


def candidate_sources(key: str) -> list[str]:
    """The sources a document with this key may be stored under."""
    names = [key, *(key + suffix for suffix in DOCUMENT_SUFFIXES)]
    for index in (*INDEX_NAMES, "README"):
        base = f"{key}/{index}" if key else index
        names += [base + suffix for suffix in DOCUMENT_SUFFIXES]
    return names
