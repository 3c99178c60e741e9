"""Benchmark databases on one PostgreSQL server: created, migrated, bulk-loaded with COPY, indexed, reused.

A loaded database carries the corpus fingerprint as its ``COMMENT`` (set only after the last step,
ANALYZE, succeeded), so a later run reuses it when the fingerprint matches and rebuilds it otherwise
or with ``--rebuild``. The chunk ids are ``1..size`` in corpus order, so results can be compared with
exact search.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from sqlalchemy import Engine
from tqdm import tqdm

from bench_lib.corpus import Corpus, documents
from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.admin import admin_params, database_url
from rag_service.db.engine import make_engine
from rag_service.ingest.fingerprint import chunker_fingerprint, content_hash
from rag_service.tokens import get_encoding

COLLECTION = "bench"
HNSW_INDEX = "ix_document_chunks_embedding_hnsw"
GIN_INDEX = "ix_document_chunks_content_tsv"
# the definitions of rag_service/migrations/versions/0001_initial_schema.py, recreated after bulk loading
HNSW_DDL = (
    "CREATE INDEX ix_document_chunks_embedding_hnsw ON document_chunks "
    "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
)
GIN_DDL = "CREATE INDEX ix_document_chunks_content_tsv ON document_chunks USING gin (content_tsv)"
COPY_BATCH = 2000
_VECTOR_LITERAL = re.compile(r"'\[[-+0-9.eE,]{200,}\]'::vector")


def shorten_vectors(plan: str) -> str:
    """A query plan with its 384-float vector literals replaced by ``'[...]'::vector``."""
    return _VECTOR_LITERAL.sub("'[...]'::vector", plan)


def size_label(size: int) -> str:
    """``10000`` -> ``10k``; used in database names and reports."""
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    if size % 1000 == 0:
        return f"{size // 1000}k"
    return str(size)


def database_comment(server_url: str, name: str) -> str | None:
    """The database's comment, or None when the database does not exist or has none."""
    with psycopg.connect(**admin_params(server_url, database="postgres")) as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (name,)
        ).fetchone()
    return None if row is None else row[0]


def recreate_database(server_url: str, name: str) -> None:
    """Drop database ``name`` if it exists and create it empty."""
    with psycopg.connect(**admin_params(server_url, database="postgres")) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def set_database_comment(server_url: str, name: str, comment: str) -> None:
    """Mark database ``name`` (e.g. with the fingerprint of what it holds)."""
    with psycopg.connect(**admin_params(server_url, database="postgres")) as conn:
        conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(comment)))


def ensure_loaded(server_url: str, name: str, corpus: Corpus, settings: Settings, *, rebuild: bool) -> dict[str, Any]:
    """Database ``name`` holding ``corpus`` (migrated, loaded, indexed, analysed); returns build timings.

    The comment is ``<marker> <timings as JSON>``: a reused database still reports how long it took to build.
    """
    marker = f"rag_service bench corpus {corpus.fingerprint} schema {migrate.head_revision()}"
    comment = database_comment(server_url, name) or ""
    if not rebuild and (comment == marker or comment.startswith(marker + " ")):
        stored = json.loads(comment[len(marker) :] or "{}")
        return {"reused": True, **stored}
    older = re.fullmatch(rf"rag_service bench corpus {re.escape(corpus.fingerprint)} schema (\S+)( .*)?", comment)
    if not rebuild and older:  # the same corpus under an older schema: migrated forward, as a user's would be
        stored = json.loads(older[2] or "{}")
        engine = make_engine(database_url(server_url, name), settings)
        started = time.perf_counter()
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        stored[f"migrate_{older[1]}_to_{migrate.head_revision()}_s"] = round(time.perf_counter() - started, 1)
        set_database_comment(server_url, name, f"{marker} {json.dumps(stored, sort_keys=True)}")
        return {"reused": True, **stored}
    recreate_database(server_url, name)
    engine = make_engine(database_url(server_url, name), settings)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    timings = load_corpus(database_url(server_url, name), corpus)
    set_database_comment(server_url, name, f"{marker} {json.dumps(timings, sort_keys=True)}")
    return {"reused": False, **timings}


def _chunk_rows(corpus: Corpus) -> list[tuple[int, int, int, int, int]]:
    """(chunk id, document id, chunk_index, start_char, end_char): documents join chunks with a blank line."""
    rows = []
    for doc_index, chunk_ids in documents(corpus):
        offset = 0
        for position, chunk in enumerate(chunk_ids):
            length = len(corpus.texts[chunk])
            rows.append((chunk + 1, doc_index + 1, position, offset, offset + length))
            offset += length + 2
    return rows


def load_corpus(url: str, corpus: Corpus) -> dict[str, float]:
    """COPY documents and chunks (tsvector computed in SQL from a staging table), then index and ANALYZE."""
    timings: dict[str, float] = {}
    encoding = get_encoding()
    fingerprint = chunker_fingerprint("recursive", chunk_size=500, chunk_overlap=100)
    with psycopg.connect(**admin_params(url)) as conn:
        register_vector(conn)
        # the HNSW graph must fit (about 2 kB per 384-d vector), else the build crawls
        memory = f"{corpus.size // 400_000 + 1}GB"
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(memory)))
        started = time.perf_counter()
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(HNSW_INDEX)))
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(GIN_INDEX)))
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy(
                "COPY documents (id, collection, source, title, content, content_hash, chunker, chunk_count) FROM STDIN"
            ) as copy:
                for doc_index, chunk_ids in tqdm(documents(corpus), desc="COPY documents", unit="doc"):
                    text = "\n\n".join(corpus.texts[c] for c in chunk_ids)
                    copy.write_row(
                        (
                            doc_index + 1,
                            COLLECTION,
                            f"synthetic/{doc_index + 1:07d}.txt",
                            f"Synthetic document {doc_index + 1}",
                            text,
                            content_hash(text),
                            fingerprint,
                            len(chunk_ids),
                        )
                    )
            cur.execute(
                "CREATE TEMP TABLE chunk_stage (id bigint, document_id bigint, chunk_index int, content text, "
                "start_char int, end_char int, token_count int, content_hash text, embedding vector(384))"
            )
            rows = _chunk_rows(corpus)
            with cur.copy(
                "COPY chunk_stage (id, document_id, chunk_index, content, start_char, end_char, token_count, "
                "content_hash, embedding) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["bigint", "bigint", "int4", "text", "int4", "int4", "int4", "text", "vector"])
                for start in tqdm(range(0, len(rows), COPY_BATCH), desc="COPY chunks", unit="batch"):
                    batch = rows[start : start + COPY_BATCH]
                    texts = [corpus.texts[r[0] - 1] for r in batch]
                    tokens = encoding.encode_ordinary_batch(texts)
                    for (chunk_id, doc_id, position, lo, hi), text, toks in zip(batch, texts, tokens, strict=True):
                        copy.write_row(
                            (
                                chunk_id,
                                doc_id,
                                position,
                                text,
                                lo,
                                hi,
                                len(toks),
                                content_hash(text),
                                corpus.vectors[chunk_id - 1],
                            )
                        )
            timings["copy_s"] = time.perf_counter() - started
            started = time.perf_counter()
            cur.execute(
                "INSERT INTO document_chunks (id, document_id, collection, chunk_index, chunk_type, content, "
                "start_char, end_char, token_count, content_hash, embedding, content_tsv) "
                "SELECT id, document_id, %s, chunk_index, 'text', content, start_char, end_char, token_count, "
                "content_hash, embedding, to_tsvector('english'::regconfig, content) FROM chunk_stage ORDER BY id",
                (COLLECTION,),
            )
            cur.execute("SELECT setval(pg_get_serial_sequence('documents', 'id'), (SELECT max(id) FROM documents))")
            cur.execute(
                "SELECT setval(pg_get_serial_sequence('document_chunks', 'id'), (SELECT max(id) FROM document_chunks))"
            )
            timings["tsvector_insert_s"] = time.perf_counter() - started
        print("building the GIN index on content_tsv ...", flush=True)
        started = time.perf_counter()
        conn.execute(GIN_DDL)
        timings["gin_build_s"] = time.perf_counter() - started
        print(f"building the HNSW index on {corpus.size} vectors (m=16, ef_construction=64) ...", flush=True)
        started = time.perf_counter()
        conn.execute(HNSW_DDL)
        timings["hnsw_build_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE documents")
        conn.execute("VACUUM ANALYZE document_chunks")
        timings["analyze_s"] = time.perf_counter() - started
    return timings


def server_info(url: str) -> dict[str, Any]:
    """Server version, pgvector version and the settings that matter for these timings."""
    with psycopg.connect(**admin_params(url)) as conn:
        info: dict[str, Any] = {
            "postgres": conn.execute("SHOW server_version").fetchone()[0],  # type: ignore[index]
            # the version CREATE EXTENSION installs: known in any database, before anything created it there
            "pgvector": conn.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()[0],  # type: ignore[index]
        }
        for name in ("shared_buffers", "work_mem", "effective_cache_size", "jit", "max_parallel_workers_per_gather"):
            info[name] = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()[0]  # type: ignore[index]
    return info


def relation_sizes(url: str) -> dict[str, str]:
    """Pretty sizes of the chunk table and its two search indexes, the BM25 postings (``chunk_terms`` and
    ``context_terms`` with their indexes), the whole database and the packed postings (migration 0014)."""
    with psycopg.connect(**admin_params(url)) as conn:
        row = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('document_chunks')), "
            "pg_size_pretty(pg_relation_size(%s::regclass)), pg_size_pretty(pg_relation_size(%s::regclass)), "
            "pg_size_pretty(pg_total_relation_size('chunk_terms') + pg_total_relation_size('context_terms')), "
            "pg_size_pretty(pg_database_size(current_database())), "
            "pg_size_pretty(coalesce(pg_total_relation_size(to_regclass('bm25_packed_lists')), 0))",
            (HNSW_INDEX, GIN_INDEX),
        ).fetchone()
    assert row is not None
    keys = ("document_chunks_total", "hnsw_index", "gin_index", "postings_total", "database_total", "packed_lists")
    return dict(zip(keys, row, strict=True))


def engine_for(server_url: str, name: str, settings: Settings) -> Engine:
    """A pooled engine on database ``name`` (statement timeout from the settings)."""
    return make_engine(database_url(server_url, name), settings)


# In this order: at 1M the list is ~17 GB against 6 GB of shared_buffers, so what comes last stays in them and
# what comes first may leave the OS cache too (~12 GB beside the server and this process). First what a query
# reads in order or little of, then what it probes at random, then the chunk rows every arm's hits are read from
# (heap and TOAST: 3.5 GB at 1M; read before the postings' keys, their pages came from disk during the timing,
# ~30 blocks a query), and the HNSW graph last (every vector search walks ~3,500 of its pages at 1M; evicted by
# the relations read after it, it made the vector arm 2x slower). The impact index serves the bounded keyword
# arm only: a collection with packed postings (``db.packed_postings``) reads it for filtered searches alone.
_HOT = (
    "ix_chunk_terms_impact",
    "document_contexts",
    "ix_document_chunks_content_tsv",
    "pk_document_contexts",
    "documents",
    "documents_pkey",
    "document_chunks_pkey",
    "collection_stats",
    "lexeme_stats",
    "pk_lexeme_stats",
    "context_stats",
    "pk_chunk_terms",
    "pk_context_terms",  # the context BM25 (migration 0013): index-only scans
    "bm25_packed_lists",  # the exact keyword arm's lists (migration 0014), read whole through their TOAST table
    "pk_bm25_packed_lists",
    "document_chunks",
    "ix_document_chunks_embedding_hnsw",
)
PACKED_IDLE = frozenset({"ix_chunk_terms_impact"})


def hot_relations(conn: psycopg.Connection[Any]) -> tuple[str, ...]:
    """``_HOT``, less what a database whose collections all have packed postings does not read per query."""
    row = conn.execute("SELECT to_regclass('bm25_packed_snapshots') IS NOT NULL").fetchone()
    packed = (
        row is not None
        and row[0]
        and conn.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM collection_stats s WHERE NOT EXISTS "
            "(SELECT 1 FROM bm25_packed_snapshots p WHERE p.collection = s.collection AND p.ready))"
        ).fetchone()
    )
    return tuple(r for r in _HOT if not (packed and packed[0] and r in PACKED_IDLE))


def prewarm(conn: psycopg.Connection[Any], relations: Sequence[str] = _HOT) -> int:
    """Read ``relations`` (by default what a search uses; on a worker: their shards), each with its TOAST table,
    into shared_buffers in that order; returns blocks read."""
    blocks = 0
    conn.execute("SET citus.override_table_visibility = off")  # on a worker, shards are hidden from pg_class
    for base in relations:
        rows = conn.execute(
            "SELECT c.oid::regclass::text, c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relname ~ %s AND pg_relation_size(c.oid) > 0",
            (f"^{base}(_[0-9]+)?$",),
        ).fetchall()
        for relation, toast in rows:
            for oid in (toast, relation) if toast else (relation,):
                blocks += int(conn.execute("SELECT pg_prewarm(%s::regclass)", (oid,)).fetchone()[0])  # type: ignore[index]
    return blocks
