"""The graph phase of ``scripts/bench.py``: build the chunk graph of the synthetic corpus, then time
``retrieve()`` with ``graph_weight`` 0 (off) and > 0 on the same queries, interleaved in one run."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sqlalchemy import text

from bench_lib import corpus as synth
from bench_lib import measure, store
from bench_lib.store import COLLECTION
from rag_service.config import Settings
from rag_service.db import documents as repo
from rag_service.db.database import Database
from rag_service.embed import Embedder
from rag_service.ingest.graph import GraphBuilder, timed_rebuild
from rag_service.service import UniversalRAGService

#: graph_weight of the timed "on" arm
GRAPH_WEIGHT = 0.3


def ensure_edges(database: Database, builder: GraphBuilder) -> dict[str, Any]:
    """Build the corpus' graph once (the edges stay in the bench database); returns the build's numbers."""
    with database.transaction() as session:
        stored = session.execute(text("SELECT count(*) FROM chunk_edges")).scalar_one()
        chunks = session.execute(text("SELECT count(*) FROM document_chunks")).scalar_one()
    if stored:
        return {"reused": True, "edges": int(stored), "chunks": int(chunks)}
    with database.transaction() as session:
        documents = [(d.id, d.source, d.content) for d in repo.iter_stored_texts(session, collection=COLLECTION)]
        built = timed_rebuild(session, builder, collection=COLLECTION, documents=documents)
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE chunk_edges"))
    return {
        "reused": False,
        "edges": built.edges_written,
        "chunks": int(chunks),
        "documents": built.documents,
        "seconds": round(built.seconds, 1),
        "ms_per_chunk": round(1000 * built.seconds / max(int(chunks), 1), 2),
    }


def run_graph(
    size: int, *, url: str, settings: Settings, vocabulary: synth.Vocabulary, embedder: Embedder, args: Any
) -> dict[str, Any]:
    """Edges of the ``size``-chunk corpus, and ``retrieve()`` p50/p95 with the graph off and on."""
    label = store.size_label(size)
    corpus = synth.make_corpus(vocabulary, size=size, seed=args.seed)
    name = f"rag_bench_{label}"
    store.ensure_loaded(url, name, corpus, settings, rebuild=args.rebuild)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    print(f"building the chunk graph of {size:,} chunks (once) ...", flush=True)
    build = ensure_edges(database, GraphBuilder())
    print(f"graph: {build}", flush=True)
    count = args.warmup + args.queries
    work, _ = measure.make_workload(engine, corpus, vocabulary.words, count=count, seed=args.seed)
    service = UniversalRAGService(settings, database=database, embedder=embedder, reranker=None)
    stages: dict[str, list[tuple[float, float, int]]] = {"off": [], "on": []}

    def arm(key: str, weight: float):  # type: ignore[no-untyped-def]
        def retrieve(i: int) -> list[int]:
            started = time.perf_counter()
            result = service.retrieve(
                work.queries.texts[i],
                "workflow",
                collection=COLLECTION,
                rerank_enabled=False,
                expand_query=False,
                graph_weight=weight,
            )
            wall = (time.perf_counter() - started) * 1000
            stages[key].append((wall, result.metrics.graph_time_ms, result.metrics.graph_added))
            return [c.chunk_id for c in result.chunks]

        return retrieve

    recorder, _, _ = measure.time_retrievers(
        {"graph_off": arm("off", 0.0), "graph_on": arm("on", GRAPH_WEIGHT)},
        warmup=args.warmup,
        queries=args.queries,
        desc=f"graph {label}",
        seed=args.seed,
    )
    service.close()
    latency = measure.latency_summary(recorder, digits=3)
    timed = {k: v[-args.queries :] for k, v in stages.items()}
    graph_ms = [g for _, g, _ in timed["on"]]
    return {
        "chunks": size,
        "graph_weight": GRAPH_WEIGHT,
        "build": build,
        "latency": latency,
        "overhead_ms": {s: round(latency["graph_on"][s] - latency["graph_off"][s], 3) for s in ("p50", "p95")},
        "graph_stage_ms": {
            "p50": round(float(np.percentile(graph_ms, 50)), 3),
            "p95": round(float(np.percentile(graph_ms, 95)), 3),
        },
        "graph_added_mean": round(float(np.mean([a for _, _, a in timed["on"]])), 2),
    }
