"""Graph retrieval: a random walk with restart from the fused top results, merged into the ranking.

The walk is personalised PageRank on the neighbourhood of the seeds (the best ``SEEDS`` fused results,
restarting in proportion to their relevance): the edges within two hops, at most ``PER_NODE`` of the
strongest out of each chunk, read in one statement (``db.graph.neighbourhood``), then ``ITERATIONS``
power iterations in numpy. A chunk's final relevance is ``(1 - w) * relevance + w * walk`` with the
walk's scores scaled to 0..1 (``w`` = ``graph_weight``); chunks the walk reached that the search did not
return join the candidates (fetched under the request's filters); the list keeps at most the search's
depth (``request.limit``), so the graph displaces the weakest candidates. Runs before reranking and
parent expansion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from sqlalchemy.orm import Session

from rag_service.db import graph as store
from rag_service.db.search_request import SearchHit, SearchRequest
from rag_service.records import from_fields
from rag_service.result import ChunkScores, RetrievalMetrics, RetrievedChunk
from rag_service.retrieve.parents import dedupe

#: fused results the walk restarts from
SEEDS = 10
#: strongest edges read out of each chunk of the neighbourhood
PER_NODE = 12
#: probability of following an edge rather than restarting at a seed
DAMPING = 0.7
#: power iterations (the error after n is below DAMPING**n: 0.03 after 10)
ITERATIONS = 10


def personalised_pagerank(
    edges: Sequence[tuple[int, int, float]], restart: dict[int, float], *, damping: float, iterations: int
) -> dict[int, float]:
    """Scores of a random walk with restart: at each step follow an out-edge (by weight) with
    probability ``damping``, else jump to a seed (by ``restart``); a chunk without out-edges jumps."""
    nodes = sorted({n for s, t, _ in edges for n in (s, t)} | set(restart))
    index = {node: i for i, node in enumerate(nodes)}
    src = np.fromiter((index[s] for s, _, _ in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((index[t] for _, t, _ in edges), dtype=np.int64, count=len(edges))
    weight = np.fromiter((w for _, _, w in edges), dtype=np.float64, count=len(edges))
    out = np.bincount(src, weights=weight, minlength=len(nodes))
    share = weight / out[src] if len(edges) else weight
    p = np.zeros(len(nodes))
    for node, mass in restart.items():
        p[index[node]] = mass
    p /= p.sum()
    dangling = out == 0
    r = p.copy()
    for _ in range(iterations):
        spread = np.bincount(dst, weights=r[src] * share, minlength=len(nodes))
        r = damping * (spread + r[dangling].sum() * p) + (1.0 - damping) * p
    return {node: float(r[i]) for node, i in index.items()}


def graph_rerank(
    session: Session, chunks: list[RetrievedChunk], *, request: SearchRequest, weight: float, metrics: RetrievalMetrics
) -> tuple[list[RetrievedChunk], int]:
    """The candidates re-scored with the walk (and joined by what it reached); ``(chunks, how many joined)``. A
    collection without a chunk graph is a ``metrics.degraded`` line (the weight did nothing, and said nothing)."""
    seeds = chunks[:SEEDS]
    if not seeds or weight <= 0:
        return chunks, 0
    restart = {c.chunk_id: max(c.relevance_score, 1e-6) for c in seeds}
    edges = store.neighbourhood(session, collection=request.collection, seeds=list(restart), per_node=PER_NODE)
    if not edges:
        if not store.has_edges(session, collection=request.collection):
            reason = f"collection {request.collection!r} has no chunk graph, so graph_weight did nothing"
            metrics.degrade("graph", f"{reason}; run `rag graph build --collection {request.collection}`")
        return chunks, 0
    walk = personalised_pagerank(edges, restart, damping=DAMPING, iterations=ITERATIONS)
    top = max(walk.values())
    scaled = {node: score / top for node, score in walk.items()} if top > 0 else {}
    known = {c.chunk_id for c in chunks}
    keep = max(len(chunks), request.limit)
    score = {c.chunk_id: (1.0 - weight) * c.relevance_score + weight * scaled.get(c.chunk_id, 0.0) for c in chunks}
    score.update((n, weight * s) for n, s in scaled.items() if n not in known)
    best = sorted(score, key=lambda n: (-score[n], n))[:keep]
    # only what can enter the list is fetched (sections can be long); filters may still drop some
    joined = [
        _from_hit(hit, request.collection)
        for hit in store.fetch_hits(session, request, [n for n in best if n not in known])
    ]
    rescored = [
        replace(c, relevance_score=score[c.chunk_id], scores=replace(c.scores, graph=scaled.get(c.chunk_id, 0.0)))
        for c in [*chunks, *joined]
    ]
    ranked = dedupe(sorted(rescored, key=lambda c: (-c.relevance_score, c.chunk_id)))[:keep]
    added = sum(1 for c in ranked if c.chunk_id not in known)
    return ranked, added


def _from_hit(hit: SearchHit, collection: str) -> RetrievedChunk:
    parent = (
        (hit.parent_content, hit.parent_start, hit.parent_end)
        if hit.parent_content is not None and hit.parent_start is not None and hit.parent_end is not None
        else None
    )
    return from_fields(
        RetrievedChunk, hit, relevance_score=0.0, scores=ChunkScores(), collection=collection, parent=parent
    )
