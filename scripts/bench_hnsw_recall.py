#!/usr/bin/env python3
"""HNSW recall@20 against exact search by collection size and ``hnsw.ef_search``, on realistic vectors (issue 27).

The synthetic corpus of ``bench_lib.corpus`` puts every vector at a cluster centre plus isotropic noise
in 384 dimensions, where a point's 20 nearest neighbours are barely nearer than the rest of its cluster:
a worst case for any graph index. Here the vectors have the geometry of real embeddings: each chunk of
``bench_lib.real_text`` (3-7 real sentences of one source) gets the normalised mean of its sentences'
MiniLM vectors (the default int8 model; ~65k sentences embedded once and cached under the data folder,
since embedding a million chunks would take hours here). Queries are the datasets' real questions,
embedded the same way. Each size is a table of its own (``id, embedding``) with the service's HNSW
index (``m`` 16, ``ef_construction`` 128, cosine) in database ``rag_hnsw_recall``, searched under the
settings ``db.search.configure_vector_scan`` sets; exact top 20 by numpy. Two scores: recall@20 (the
exact 20's ids returned) and the share of returned chunks at least as near as the exact 20th (the
corpus repeats sentences, so many chunks tie with the 20th and which of them is "the" 20th is arbitrary).

``--halfvec`` searches an index of the vectors cast to ``halfvec``; ``--binary`` one of their binary quantization
(``bit(384)``, Hamming distance), whose ``ef_search`` nearest are re-ranked by the full vectors' cosine
distance (pgvector's "binary quantization with re-ranking"): each ef_search value is then that candidate count.

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_hnsw_recall.py --sizes 100000,1000000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import bench
import numpy as np
import psycopg
from bench_lib import real_text, store
from bench_lib.measure import TIE
from pgvector.psycopg import register_vector
from psycopg import sql
from tqdm import tqdm

from rag_service.config import BUNDLED_MINILM, load_settings
from rag_service.db.admin import database_url
from rag_service.embed import embedder_for

DATASETS = bench.REPO.parent / "shared" / "datasets"
DATABASE = "rag_hnsw_recall"
TOP_K = 20


def _table(conn: psycopg.Connection, size: int, vectors: np.ndarray, m: int, construction: int) -> tuple[str, float]:
    """Table ``vectors_<size>`` (``_m<m>_efc<construction>`` for other build parameters than the service's) with
    its HNSW index (built unless it exists); returns its name and build seconds."""
    name = f"vectors_{store.size_label(size)}" + ("" if (m, construction) == (16, 128) else f"_m{m}_efc{construction}")
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    if exists and exists[0]:
        return name, 0.0
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, embedding vector(384))").format(sql.Identifier(name)))
    with conn.cursor().copy(
        sql.SQL("COPY {} (id, embedding) FROM STDIN WITH (FORMAT BINARY)").format(sql.Identifier(name))
    ) as copy:
        copy.set_types(["int8", "vector"])
        for row in tqdm(range(size), desc=f"COPY {name}", unit="row", mininterval=2):
            copy.write_row((row + 1, vectors[row]))
    started = time.perf_counter()
    conn.execute("SET maintenance_work_mem = '4GB'")
    conn.execute(
        sql.SQL(
            "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = {}, ef_construction = {})"
        ).format(sql.Identifier(f"{name}_hnsw"), sql.Identifier(name), sql.Literal(m), sql.Literal(construction))
    )
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
    return name, time.perf_counter() - started


#: the extra indexes ``--halfvec`` and ``--binary`` search: name suffix, indexed expression and operator class.
#: ``halfvec`` halves the index (the table keeps the full vectors); ``bit`` is the binary quantization (Hamming).
EXTRA_INDEXES = {
    "halfvec": ("_hnsw_half", "embedding::halfvec(384)", "halfvec_cosine_ops"),
    "binary": ("_hnsw_bit", "binary_quantize(embedding)::bit(384)", "bit_hamming_ops"),
}


def _extra_index(conn: psycopg.Connection, name: str, kind: str, m: int, construction: int) -> float:
    """The ``EXTRA_INDEXES[kind]`` HNSW index of ``name``, built unless it exists; returns its build seconds."""
    suffix, expression, opclass = EXTRA_INDEXES[kind]
    index = f"{name}{suffix}"
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (index,)).fetchone()
    if exists and exists[0]:
        return 0.0
    started = time.perf_counter()
    conn.execute("SET maintenance_work_mem = '4GB'")
    conn.execute(
        sql.SQL("CREATE INDEX {} ON {} USING hnsw (({}) {}) WITH (m = {}, ef_construction = {})").format(
            sql.Identifier(index),
            sql.Identifier(name),
            sql.SQL(expression),
            sql.SQL(opclass),
            sql.Literal(m),
            sql.Literal(construction),
        )
    )
    return time.perf_counter() - started


#: the binary index's nearest ``candidates`` (as many as ``hnsw.ef_search``), re-ranked by the full vectors
_BINARY_SELECT = (
    "SELECT id FROM (SELECT id, embedding FROM {} ORDER BY binary_quantize(embedding)::bit(384) <~> "
    "binary_quantize(%(q)s::vector) LIMIT %(candidates)s) c ORDER BY embedding <=> %(q)s LIMIT %(k)s"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--ef-search", default="40,100,200,400,800")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--m", type=int, default=16, help="HNSW build parameter m (the service's: 16)")
    parser.add_argument("--ef-construction", type=int, default=128, help="HNSW ef_construction (the service's: 128)")
    parser.add_argument(
        "--halfvec", action="store_true", help="search an index of the vectors cast to halfvec (built beside the other)"
    )
    parser.add_argument(
        "--binary", action="store_true", help="search an index of binary-quantized vectors, re-ranked (see above)"
    )
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "hnsw_recall.json")
    args = parser.parse_args()

    settings = load_settings()
    url = bench.server_url(settings)
    sizes = [int(s) for s in args.sizes.split(",")]
    efs = [int(e) for e in args.ef_search.split(",")]
    # the chunks of bench_bm25_real.py and bench_bulk_load.py --corpus real
    cache = settings.data_dir / "sentences.npy"
    vectors = real_text.realistic_corpus(DATASETS, size=max(sizes), seed=42, cache=cache).vectors
    questions = real_text.real_queries(DATASETS, per_set=args.queries, seed=11)[: args.queries]
    embedder = embedder_for(BUNDLED_MINILM, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models")
    queries = embedder.embed_documents(questions)
    if store.database_comment(url, DATABASE) is None:
        store.recreate_database(url, DATABASE)
        store.set_database_comment(url, DATABASE, "rag_service HNSW recall tables")
    out: dict[str, object] = {"measured_at": bench._now(), "queries": len(questions), "sizes": {}}
    with psycopg.connect(database_url(url, DATABASE).replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        for size in sizes:
            name, build_s = _table(conn, size, vectors, args.m, args.ef_construction)
            for kind in ("halfvec", "binary"):
                if getattr(args, kind):
                    build_s = _extra_index(conn, name, kind, args.m, args.ef_construction)
            select = sql.SQL(
                _BINARY_SELECT
                if args.binary
                else "SELECT id FROM {} ORDER BY embedding::halfvec(384) <=> %(q)s::vector::halfvec(384) LIMIT %(k)s"
                if args.halfvec
                else "SELECT id FROM {} ORDER BY embedding <=> %(q)s LIMIT %(k)s"
            ).format(sql.Identifier(name))
            similarity = queries @ vectors[:size].T
            exact = np.argsort(-similarity, axis=1)[:, :TOP_K] + 1
            # the 20th exact similarity: a returned chunk at least as similar is as good as the one it displaced
            # (the corpus holds near-duplicates, whose order among themselves is arbitrary)
            kth = np.take_along_axis(similarity, exact[:, -1:] - 1, axis=1)[:, 0]
            per_ef: dict[int, dict[str, float]] = {}
            for ef in efs:
                found, times = [], []
                for q in queries:
                    with conn.transaction():
                        conn.execute(
                            sql.SQL(
                                "SET LOCAL hnsw.ef_search = {}; SET LOCAL hnsw.iterative_scan = relaxed_order"
                            ).format(sql.Literal(max(ef, TOP_K)))
                        )
                        started = time.perf_counter()
                        rows = conn.execute(select, {"q": q, "k": TOP_K, "candidates": max(ef, TOP_K)}).fetchall()
                        times.append((time.perf_counter() - started) * 1000)
                    found.append({r[0] for r in rows})
                recall = float(np.mean([len(f & set(e.tolist())) / TOP_K for f, e in zip(found, exact, strict=True)]))
                as_near = [sum(similarity[i, c - 1] >= kth[i] - TIE for c in f) / TOP_K for i, f in enumerate(found)]
                per_ef[ef] = {
                    "recall_at_20": round(recall, 4),
                    "as_near_as_exact_20th": round(float(np.mean(as_near)), 4),
                    "p50_ms": round(float(np.percentile(times, 50)), 2),
                    "p95_ms": round(float(np.percentile(times, 95)), 2),
                }
                print(size, ef, per_ef[ef], flush=True)
            out["sizes"][str(size)] = {  # type: ignore[index]
                "table": name,
                "m": args.m,
                "ef_construction": args.ef_construction,
                "storage": "binary, re-ranked" if args.binary else "halfvec" if args.halfvec else "vector",
                "hnsw_build_s": round(build_s, 1),
                "by_ef_search": per_ef,
            }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
