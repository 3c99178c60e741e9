#!/usr/bin/env python3
"""Time loading precomputed chunks (text + vector) through the product's write paths (issue 27 point 3).

``--path bulk`` (default): ``rag_service.db.bulk.BulkLoad``, what ``rag index`` runs for a new collection:
documents upserted and chunks COPYed into staging in one transaction, then one INSERT computing the
tsvectors, postings and statistics counted set-based, and on a first index (empty table) the indexes
built after the load, then ANALYZE and the postings packed (``db.packed_postings``) as the indexer does after
a run. ``--populated`` first writes one small document into another collection, so the
table is not empty and the indexes are kept (a new collection beside others). ``--path row``:
``documents.replace_document`` per document (INSERT per chunk through the BM25 triggers, indexes
maintained), 100 documents a transaction, as the row path writes them. Keywords (``--keywords``) are
off by default, as in the issue-18 build this is compared with; no graph edges. The corpus is the
synthetic one of ``scripts/bench_one_node.py`` (10 chunks a document), in a database of its own, or with
``--corpus real`` the real-text chunks of ``bench_lib.real_text`` with realistic vectors (the mean of their
sentences' vectors; database ``rag_bulk_<size>_bulk_real``): real term statistics (60M postings at 1M) and
an HNSW graph built on vectors with the geometry of real embeddings.

``--reindex`` then writes the same documents again as ``rag reindex --all`` writes them into a collection
it rewrites whole (``BulkLoad(replace=True)``, ``db.bulk_replace``: ids kept, the chunk tables truncated,
the indexes rebuilt) and times that load on its own (database ``..._reindex``); the re-embedding a real
reindex does first is not included (~45 chunks/s with the bundled model here).

    RAG_DATA_DIR=$PWD/bench-data .venv/bin/python scripts/bench_bulk_load.py --size 100000
"""

from __future__ import annotations

import argparse
import json
import os
import time

import bench
import psycopg
from bench_lib import corpus as synth
from bench_lib import reads, real_text, store
from sqlalchemy import text
from tqdm import tqdm

from rag_service.config import Settings, load_settings
from rag_service.db import documents as repo
from rag_service.db import migrate, packed_postings
from rag_service.db.admin import database_url
from rag_service.db.bulk import BulkLoad, StagedDocument
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.statistics import refresh_after_write, settle_after_write
from rag_service.ingest.fingerprint import chunker_fingerprint, content_hash
from rag_service.tokens import get_encoding

COLLECTION = "bench"
DATASETS = bench.REPO.parent / "shared" / "datasets"
BATCH_DOCUMENTS = 100


def _documents(corpus: synth.Corpus):  # type: ignore[no-untyped-def]
    """(source, title, text, chunk rows) per document of the corpus, token counts from tiktoken."""
    encoding = get_encoding()
    for doc_index, chunk_ids in synth.documents(corpus):
        texts = [corpus.texts[c] for c in chunk_ids]
        tokens = [encoding.encode_ordinary(t) for t in texts]  # the batch call starts a thread pool per call
        rows, offset = [], 0
        for position, (chunk, content, toks) in enumerate(zip(chunk_ids, texts, tokens, strict=True)):
            rows.append(
                repo.ChunkRow(
                    chunk_index=position,
                    chunk_type="text",
                    content=content,
                    start_char=offset,
                    end_char=offset + len(content),
                    token_count=len(toks),
                    content_hash=content_hash(content),
                    embedding=corpus.vectors[chunk],
                )
            )
            offset += len(content) + 2
        yield f"synthetic/{doc_index + 1:07d}.txt", f"Synthetic document {doc_index + 1}", "\n\n".join(texts), rows


def _after_the_run(db: Database, settings: Settings, *, size: int) -> dict[str, float]:
    """What the indexer does after a run that wrote a whole collection (``Indexer._refresh_statistics``): the
    planner statistics, the VACUUM of the tables read index-only, the packed postings; each timed."""
    timings: dict[str, float] = {}
    mark = time.perf_counter()
    with db.transaction() as session:
        refresh_after_write(session, collection=COLLECTION, chunks_written=size)
    timings["ANALYZE"] = time.perf_counter() - mark
    mark = time.perf_counter()
    settle_after_write(db, COLLECTION)
    timings["VACUUM (tables read index-only)"] = time.perf_counter() - mark
    mark = time.perf_counter()  # rag_bm25 missing: "unavailable"
    packed = packed_postings.refresh(db, COLLECTION, min_chunks=settings.bm25_packed_min_chunks)
    timings[f"packed postings ({packed.action})"] = time.perf_counter() - mark
    return timings


def _bulk_load(db, pending, keywords, chunker, *, size: int, replace: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """One bulk load of the precomputed documents (``replace``: rewriting them, as ``rag reindex --all``)."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    with db.transaction() as session:
        repo.commit_synchronously(session)
        load = BulkLoad(session, collection=COLLECTION, fts_config="english", keywords=keywords, replace=replace)
        load.start()
        bar = tqdm(total=size, desc="rows reloaded" if replace else "rows loaded", unit="chunk", mininterval=2)
        for start in range(0, len(pending), BATCH_DOCUMENTS):  # an ingest batch: ~1,000 chunks
            batch = [
                StagedDocument(source, title, content, content_hash(content), chunker, rows)
                for source, title, content, rows in pending[start : start + BATCH_DOCUMENTS]
            ]
            load.add_documents(batch)
            bar.update(sum(len(d.chunks) for d in batch))
        bar.close()
        timings["stage (COPY documents and chunks)"] = time.perf_counter() - started
        timings.update(
            load.finish(lambda phase: print(f"[{time.perf_counter() - started:7.1f} s] {phase}", flush=True))
        )
        mark = time.perf_counter()
    timings["commit"] = time.perf_counter() - mark
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--path", choices=("bulk", "row"), default="bulk")
    parser.add_argument("--populated", action="store_true", help="another collection holds a document first")
    parser.add_argument("--keywords", type=int, default=0)
    parser.add_argument("--corpus", choices=("synthetic", "real"), default="synthetic")
    parser.add_argument("--reindex", action="store_true", help="then load the same documents again, replacing them")
    args = parser.parse_args()
    if args.reindex and args.path != "bulk":
        parser.error("--reindex times the bulk path's reindex: use it with --path bulk")

    settings = load_settings()
    url = bench.server_url(settings)
    vocabulary = synth.load_vocabulary(bench.DEFAULT_SCIFACT / "corpus.jsonl")
    corpus = real_text.benchmark_corpus(
        args.corpus, size=args.size, datasets=DATASETS, data_dir=settings.data_dir, vocabulary=vocabulary
    )
    name = f"rag_bulk_{store.size_label(args.size)}_{args.path}{'_populated' if args.populated else ''}"
    name += "_real" if args.corpus == "real" else ""
    name += "_reindex" if args.reindex else ""
    store.recreate_database(url, name)
    engine = make_engine(database_url(url, name), settings)
    migrate.upgrade(engine)
    db = Database(engine)
    keywords = repo.ChunkKeywords(count=args.keywords)
    chunker = chunker_fingerprint("recursive", chunk_size=500, chunk_overlap=100)
    if args.populated:
        one = next(iter(_documents(synth.make_corpus(vocabulary, size=10, seed=7))))
        with db.transaction() as session:
            repo.replace_document(
                session, collection="other", source=one[0], title=one[1], content=one[2],
                content_hash=content_hash(one[2]), chunker=chunker, fts_config="english", chunks=one[3],
                keywords=keywords,
            )  # fmt: skip
    mark = time.perf_counter()
    pending = list(tqdm(_documents(corpus), total=len(synth.documents(corpus)), desc="precomputing rows", unit="doc"))
    prepared_s = time.perf_counter() - mark  # the chunker's work in the product (token counts, hashes): not timed
    load_before = os.getloadavg()
    monitor = psycopg.connect(database_url(url, name).replace("+psycopg", ""), autocommit=True)
    written_before, cpu_before = reads.write_counters(monitor), reads.snapshot(monitor)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    if args.path == "bulk":
        timings.update(_bulk_load(db, pending, keywords, chunker, size=args.size, replace=False))
    else:
        for start in range(0, len(pending), 100):
            with db.transaction() as session:
                repo.commit_synchronously(session)
                for source, title, content, rows in pending[start : start + 100]:
                    repo.replace_document(
                        session, collection=COLLECTION, source=source, title=title, content=content,
                        content_hash=content_hash(content), chunker=chunker, fts_config="english", chunks=rows,
                        keywords=keywords,
                    )  # fmt: skip
        timings["row path (INSERT per chunk, triggers, indexes maintained)"] = time.perf_counter() - started
    timings.update(_after_the_run(db, settings, size=args.size))
    total = time.perf_counter() - started
    reindex: dict[str, float] = {}
    if args.reindex:
        mark = time.perf_counter()
        reindex.update(_bulk_load(db, pending, keywords, chunker, size=args.size, replace=True))
        reindex.update(_after_the_run(db, settings, size=args.size))
        reindex["total"] = time.perf_counter() - mark
    time.sleep(2)  # backends report their I/O when idle
    written = reads.write_difference(written_before, reads.write_counters(monitor))
    steal = reads.difference(cpu_before, reads.snapshot(monitor))["cpu_steal_share"]
    monitor.close()
    with db.transaction() as session:
        stored = session.execute(text("SELECT chunk_count, total_length FROM collection_stats WHERE collection = :c"), {"c": COLLECTION}).one()  # fmt: skip
    out = {
        "chunks": args.size,
        "path": args.path + (" (populated table)" if args.populated else ""),
        "keywords": args.keywords,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "seconds": {k: round(v, 1) for k, v in timings.items()},
        "total_s": round(total, 1),
        "reindex_seconds": {k: round(v, 1) for k, v in reindex.items()},
        "rows_precomputed_untimed_s": round(prepared_s, 1),
        "collection_stats": list(stored),
        "relation_sizes": store.relation_sizes(database_url(url, name)),
        "cpu_steal_share": steal,
        "written_blocks_evicted_fsynced_extended": written,
    }
    print(json.dumps(out, indent=1))
    engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
