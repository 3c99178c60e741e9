"""Benchmarks: retrieval latency at 10k and 100k chunks against baselines, ingestion throughput, reranking.

One command measures everything and rewrites the generated section of docs/benchmarks.md:

    .venv/bin/python scripts/bench.py                  # --sizes 10000,100000 --queries 200
    .venv/bin/python scripts/bench.py --quick          # smoke run: 2k chunks, 30 queries, bench_out/ only

1. Synthetic corpora (no model): Zipfian text over SciFact's vocabulary, clustered 384-d unit vectors,
   loaded with COPY into ``rag_bench_<size>`` on the embedded server (or the server of
   ``RAG_DATABASE_URL``), HNSW built after loading; databases are reused while the corpus is the same.
2. p50/p95 per query after warm-up, retrievers interleaved: our vector arm, fulltext arm (also with
   queries of only the 20 most frequent terms), hybrid SQL and ``retrieve()`` with the real MiniLM
   query embedding and no rerank; numpy exact search, bm25s, LangChain's EnsembleRetriever.
3. Ingestion with the real model against the model alone, and the re-run of unchanged documents.
4. The reranking stage (``scripts/bench_rerank.py``).

Outputs: ``--json`` (default bench_out/bench.json), the plot (bench_out/bench_latency.png, copied to
docs/ next to the markdown) and ``--markdown`` (default docs/benchmarks.md, between its markers).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# numpy's OpenBLAS (the exact-cosine baseline) runs 2 threads that spin after each product; on 2
# cores they stole the CPU from the retriever timed next (load average 2.9 during a run)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json

import numpy as np
from bench_lib import corpus as synth
from bench_lib import measure, report, retrievers, store
from bench_lib.graph import run_graph
from bench_lib.ingestion import measure_ingestion

from rag_service.config import BUNDLED_MINILM, Settings, load_settings
from rag_service.db.admin import database_url
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import normalise_url
from rag_service.db.presets import load_preset
from rag_service.db.search import explain
from rag_service.embed import Embedder, SentenceTransformerEmbedder, embedder_for
from rag_service.errors import first_line
from rag_service.service import UniversalRAGService

REPO = Path(__file__).resolve().parents[1]
PHASES = ("latency", "ingestion", "rerank", "graph")
PRESET = "workflow"  # no query expansion, no diversity; reranking is switched off per call
PRESET_FIELDS = ("vector_weight", "keyword_weight", "rrf_k", "fusion_method", "candidate_k", "keyword_scorer")
DEFAULT_SCIFACT = Path(os.environ.get("RAG_BENCH_SCIFACT", "/work/shared/datasets/scifact"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; ``--quick`` changes the defaults of the others."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", help="corpus sizes in chunks, comma-separated (default 10000,100000)")
    parser.add_argument("--queries", type=int, help="timed queries per size (default 200)")
    parser.add_argument("--warmup", type=int, help="untimed warm-up queries per size (default 20)")
    parser.add_argument(
        "--json", type=Path, help="results file (default bench_out/bench.json; --quick: bench-quick.json)"
    )
    parser.add_argument("--markdown", type=Path, help="markdown file to update (default docs/benchmarks.md)")
    parser.add_argument("--quick", action="store_true", help="small smoke run; writes to bench_out/ only")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the benchmark databases")
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT, help="BEIR SciFact folder (corpus.jsonl)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--ingest-documents", type=int, help="SciFact documents to ingest (default 300)")
    parser.add_argument("--rerank-repetitions", type=int, help="rounds of the rerank bench (default 50)")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="LOAD",
        help="before each timed phase, wait (up to 30 min) until the 1-minute load average is below LOAD",
    )
    parser.add_argument("--skip-langchain", action="store_true", help="leave out the LangChain baselines")
    parser.add_argument(
        "--compare-torch",
        action="store_true",
        help="also time retrieve() with the query embedded by torch (interleaved), when the backend is not torch",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="measure nothing: redraw the plot and markdown from --json"
    )
    parser.add_argument(
        "--only",
        default=",".join(PHASES),
        help=f"measure only these phases ({', '.join(PHASES)}); the others are kept from the existing --json",
    )
    args = parser.parse_args(argv)
    args.only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(args.only) - set(PHASES))
    if unknown:
        parser.error(f"--only: unknown phase(s) {', '.join(unknown)}; choose from {', '.join(PHASES)}")
    quick = args.quick
    args.sizes = [int(s) for s in (args.sizes or ("2000" if quick else "10000,100000")).split(",")]
    args.queries = args.queries or (30 if quick else 200)
    args.warmup = args.warmup if args.warmup is not None else (5 if quick else 20)
    args.ingest_documents = args.ingest_documents or (30 if quick else 300)
    args.rerank_repetitions = args.rerank_repetitions or (5 if quick else 50)
    if args.json is None:  # a smoke run must not leave its sizes in the full run's results
        args.json = REPO / "bench_out" / ("bench-quick.json" if quick else "bench.json")
    if args.markdown is None:
        args.markdown = REPO / ("bench_out/benchmarks-quick.md" if quick else "docs/benchmarks.md")
    return args


def server_url(settings: Settings) -> str:
    """The configured server, or the embedded one under ``RAG_DATA_DIR``."""
    if settings.database_url:
        return normalise_url(settings.database_url)
    return start_embedded_server(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)


def wait_for_quiet(max_load: float, *, timeout_s: float = 1800.0) -> None:
    """Wait until the 1-minute load average is below ``max_load`` (0: do not wait), at most ``timeout_s``."""
    if max_load <= 0:
        return
    deadline = time.monotonic() + timeout_s
    while os.getloadavg()[0] >= max_load and time.monotonic() < deadline:
        print(f"waiting for the machine to be quiet (load {os.getloadavg()[0]:.2f} >= {max_load}) ...", flush=True)
        time.sleep(15)


def machine_info(url: str) -> dict[str, Any]:
    """Cores, Python, library and server versions, the server settings that matter, the load."""
    import bm25s
    import sqlalchemy
    import torch

    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sqlalchemy": sqlalchemy.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "bm25s": bm25s.__version__,
        "loadavg_at_start": measure.load_average(),
    }
    for package in ("pgvector", "langchain-postgres", "langchain-community", "rank-bm25"):
        try:
            from importlib.metadata import version

            info[f"{package}_python"] = version(package)
        except Exception:
            info[f"{package}_python"] = None
    info.update(store.server_info(url))
    return info


def bench_size(
    size: int,
    *,
    args: argparse.Namespace,
    url: str,
    settings: Settings,
    vocabulary: synth.Vocabulary,
    embedder: Embedder,
    stop_words: frozenset[str],
) -> dict[str, Any]:
    """Build (or reuse) the corpus of ``size`` chunks and time every retriever on it."""
    label = store.size_label(size)
    print(f"\n== {size:,} chunks ==", flush=True)
    corpus = synth.make_corpus(vocabulary, size=size, seed=args.seed)
    name = f"rag_bench_{label}"
    build = store.ensure_loaded(url, name, corpus, settings, rebuild=args.rebuild)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    count = args.warmup + args.queries
    work, terms = measure.make_workload(engine, corpus, vocabulary.words, count=count, seed=args.seed)
    service = UniversalRAGService(settings, database=database, embedder=embedder, reranker=None)
    with database.transaction() as session:
        preset = load_preset(session, PRESET)
    stages: list[dict[str, float]] = []
    fns: dict[str, retrievers.RetrieverFn] = retrievers.ours(database, settings, preset, work, service, stages)
    torch_stages: list[dict[str, float]] = []
    torch_service = None
    if args.compare_torch and settings.embedding_backend != "torch":
        # the same retrieve() with the query embedded by torch, interleaved with the one above
        torch_embedder = SentenceTransformerEmbedder(batch_size=64)
        torch_service = UniversalRAGService(settings, database=database, embedder=torch_embedder, reranker=None)
        fns["ours_retrieve_torch"] = retrievers.retrieve_fn(torch_service, preset, work, torch_stages)
    fns["numpy_exact"] = retrievers.numpy_exact(corpus, work)
    print("indexing bm25s ...", flush=True)
    fns["bm25s"] = retrievers.bm25s_retriever(corpus, work, stop_words)
    langchain: dict[str, Any] = {}
    side = None
    if not args.skip_langchain:
        try:
            side = retrievers.langchain_side(
                url, f"rag_bench_lc_{label}", corpus, work, stop_words, rebuild=args.rebuild
            )
            fns.update(side.retrievers)
            langchain = {"build": side.build, "plans": side.plans}
        except Exception as exc:  # reported in the JSON and the markdown, not hidden
            langchain = {"error": first_line(exc, typed=True)}
            print(f"LangChain side could not run: {langchain['error']}", flush=True)

    wait_for_quiet(args.wait_idle)
    gc.collect()
    gc.freeze()  # the corpus, indexes and models are long-lived: keep collector pauses out of the timings
    load_before = measure.load_average()
    recorder, results, order = measure.time_retrievers(
        fns, warmup=args.warmup, queries=args.queries, desc=label, seed=args.seed
    )
    load_after = measure.load_average()
    gc.unfreeze()

    measured = range(args.warmup, count)
    sources = [work.queries.source_chunks[i] + 1 for i in measured]
    latency = measure.latency_summary(recorder, digits=3)
    hits = {
        key: measure.hit_rate(found, sources)
        for key, found in results.items()
        if "frequent" not in key and key != "ours_retrieve"
    }
    first = args.warmup
    q = work.queries
    with database.transaction() as session:
        plan = store.shorten_vectors(
            explain(session, retrievers.search_request(settings, preset, q.vectors[first], work.parts[first]))
        )

    def slowest(key: str) -> int:
        worst: int = order[key][int(np.argmax(recorder.samples(key)))]
        return worst

    analyses: dict[str, str] = {}
    i = slowest("ours_hybrid")
    analyses[f"hybrid, the slowest query ({q.texts[i]!r})"] = measure.explain_analyze(
        database, retrievers.search_request(settings, preset, q.vectors[i], work.parts[i])
    )
    for key, scorer in (("ours_fulltext_frequent", "bm25"), ("ours_fulltext_tsrank_frequent", "ts_rank_cd")):
        i = slowest(key)
        request = retrievers.search_request(
            settings, preset, None, work.frequent_parts[i], vector_weight=0.0, keyword_weight=1.0, keyword_scorer=scorer
        )
        analyses[f"keyword arm ({scorer}), slowest top-20-terms query ({work.frequent.texts[i]!r})"] = (
            measure.explain_analyze(database, request)
        )
    sample = list(measured)[:100]
    result = {
        "label": label,
        "chunks": size,
        "measured_at": _now(),
        "corpus_fingerprint": corpus.fingerprint,
        "build": {k: round(v, 2) if isinstance(v, float) else v for k, v in build.items()},
        "relation_sizes": store.relation_sizes(database_url(url, name)),
        "latency": latency,
        "retrieve_stages_ms": stage_summary(stages[-args.queries :]),
        "embedding_backend": settings.embedding_backend,
        "retrieve_stages_ms_torch": stage_summary(torch_stages[-args.queries :]),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "frequent_terms": terms,
        "keyword_matches": measure.keyword_match_counts(engine, [work.parts[i].any_terms for i in sample]),
        "keyword_matches_frequent": measure.keyword_match_counts(
            engine, [work.frequent_parts[i].any_terms for i in sample]
        ),
        "preset": {"name": PRESET, **{k: getattr(preset, k) for k in PRESET_FIELDS}},
        "hnsw_recall_at_20": measure.overlap_at_k(results["ours_vector"], results["numpy_exact"]),
        "source_hit_at_20": hits,
        "example_queries": work.queries.texts[first : first + 5],
        "example_frequent_queries": work.frequent.texts[first : first + 5],
        "explain": plan,
        "explain_uses_hnsw": "Index Scan using ix_document_chunks_embedding_hnsw" in plan,
        "explain_analyze": analyses,
        "langchain": langchain,
    }
    if side is not None:
        side.close()
    service.close()
    if torch_service is not None:
        torch_service.close()
    return result


def stage_summary(stages: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """p50/p95 of each stage of the timed ``retrieve()`` calls, from their ``metrics``."""
    if not stages:
        return {}
    return {
        name: {
            "p50": round(float(np.percentile([s[name] for s in stages], 50)), 3),
            "p95": round(float(np.percentile([s[name] for s in stages], 95)), 3),
        }
        for name in stages[0]
    }


def run_rerank(args: argparse.Namespace) -> dict[str, Any]:
    """``scripts/bench_rerank.py`` in its own process (its torch and onnxruntime threads stay its own)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rerank.json"
        command = [
            sys.executable,
            str(REPO / "scripts" / "bench_rerank.py"),
            "--json",
            str(out),
            "--repetitions",
            str(args.rerank_repetitions),
            "--warmup",
            "1" if args.quick else "5",
        ]
        print("\n== reranking stage (scripts/bench_rerank.py) ==", flush=True)
        completed = subprocess.run(command, cwd=REPO, check=False, text=True, capture_output=True)
        print(completed.stdout, flush=True)
        if completed.returncode != 0:
            tail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"scripts/bench_rerank.py exited with {completed.returncode}: {tail}"}
        loaded: dict[str, Any] = json.loads(out.read_text())
        return loaded


def write_report(path: Path, out: dict[str, Any]) -> None:
    """Write a benchmark's results to ``path`` (its folder made if need be) as JSON, and print them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _previous(args: argparse.Namespace) -> dict[str, Any]:
    """The existing results file when only some phases are measured (the rest is kept from it)."""
    if set(args.only) == set(PHASES) or not args.json.exists():
        return {}
    loaded: dict[str, Any] = json.loads(args.json.read_text())
    return loaded


def main(argv: list[str] | None = None) -> int:
    """Run every measurement, then write the JSON, the plot and the markdown section."""
    args = parse_args(argv)
    if args.report_only:
        write_reports(args, json.loads(args.json.read_text()))
        return 0
    started = time.perf_counter()
    settings = load_settings()
    url = server_url(settings)
    machine = machine_info(url)
    if machine["loadavg_at_start"][0] > 0.75 * (os.cpu_count() or 1):
        print(f"warning: load average {machine['loadavg_at_start']} — timings will be noisy", flush=True)
    corpus_jsonl = args.scifact / "corpus.jsonl"
    vocabulary = synth.load_vocabulary(corpus_jsonl)
    embedder = embedder_for(  # RAG_EMBEDDING_BACKEND's, as the service runs it
        BUNDLED_MINILM, batch_size=64, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models"
    )
    stop_words = retrievers.english_stop_words()

    previous = _previous(args)
    sizes: dict[str, Any] = dict(previous.get("sizes", {}))
    if "latency" in args.only:
        sizes.update(
            {
                str(size): bench_size(
                    size,
                    args=args,
                    url=url,
                    settings=settings,
                    vocabulary=vocabulary,
                    embedder=embedder,
                    stop_words=stop_words,
                )
                for size in args.sizes
            }
        )
    ratios = {
        s: {
            key: {
                stat: round(r["latency"][key][stat] / r["latency"]["ours_hybrid"][stat], 2) for stat in ("p50", "p95")
            }
            for key in r["latency"]
            if key != "ours_hybrid"
        }
        for s, r in sizes.items()
    }
    ingestion: dict[str, Any] = previous.get("ingestion", {})
    if "ingestion" in args.only:
        print("\n== ingestion with the real model ==", flush=True)
        wait_for_quiet(args.wait_idle)
        load = [round(x, 2) for x in os.getloadavg()]
        ingestion = measure_ingestion(url, embedder, corpus_jsonl, documents=args.ingest_documents)
        ingestion.update(measured_at=_now(), loadavg_before=load)
    rerank: dict[str, Any] = previous.get("rerank", {})
    if "rerank" in args.only:
        wait_for_quiet(args.wait_idle)
        load = [round(x, 2) for x in os.getloadavg()]
        rerank = run_rerank(args)
        rerank.update(measured_at=_now(), loadavg_before=load)
    graph: dict[str, Any] = previous.get("graph", {})
    if "graph" in args.only:
        for size in args.sizes:
            print(f"\n== graph retrieval, {size:,} chunks ==", flush=True)
            wait_for_quiet(args.wait_idle)
            load = [round(x, 2) for x in os.getloadavg()]
            one = run_graph(size, url=url, settings=settings, vocabulary=vocabulary, embedder=embedder, args=args)
            graph[str(size)] = {**one, "measured_at": _now(), "loadavg_before": load}
            print(json.dumps(graph[str(size)], indent=2), flush=True)
    machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]

    results: dict[str, Any] = {
        "generated_at": _now(),
        "phases_measured": args.only,
        "command": " ".join(["scripts/bench.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine,
        "settings": {
            "quick": args.quick,
            "queries": args.queries,
            "warmup": args.warmup,
            "top_k": retrievers.TOP_K,
            "ef_search": settings.hnsw_ef_search,
            "bm25_max_postings": settings.bm25_max_postings,
            "seed": args.seed,
            "vocabulary_words": len(vocabulary.words),
            "words_per_chunk": list(synth.WORDS_PER_CHUNK),
            "chunks_per_document": synth.CHUNKS_PER_DOCUMENT,
            "clusters": 200,
            "gc_frozen_while_timing": True,
        },
        "retrievers": {s.key: s.label for s in retrievers.SPECS},
        "sizes": sizes,
        "ratios": ratios,
        "ingestion": ingestion,
        "rerank": rerank,
        "graph": graph,
        "seconds": round(time.perf_counter() - started, 1),
    }
    results["targets"] = report.targets(results) if sizes else []  # ``--only graph`` on a fresh checkout
    report.write_json(args.json, results)
    if sizes:
        write_reports(args, results)
    print(f"\nwrote {args.json} in {results['seconds']:.0f} s")
    for t in results["targets"]:
        print(f"  {'MET ' if t['met'] else 'MISS' if t['met'] is False else '  ? '} {t['target']}: {t['shown']}")
    return 0


def write_reports(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """The plot (next to the JSON, copied next to the markdown) and the markdown section."""
    plot_path = args.json.parent / "bench_latency.png"
    report.plot(results, plot_path)
    if plot_path.parent.resolve() != args.markdown.parent.resolve():
        shutil.copyfile(plot_path, args.markdown.parent / plot_path.name)
    report.write_markdown(args.markdown, report.markdown_section(results, plot_name=plot_path.name))
    print(f"wrote {plot_path} and {args.markdown}")


if __name__ == "__main__":
    sys.exit(main())
