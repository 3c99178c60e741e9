#!/usr/bin/env python3
"""What each HNSW graph costs the row path: INSERTs into graphs built with ef_construction 64 and 128.

Two tables of ``BEFORE`` realistic vectors (``bench_lib.real_text``: real-text chunks, each the mean of its
sentences' vectors) with an HNSW index each (m 16, cosine), then ``INSERTED`` more rows into both, 10 a
statement (a document's chunks), in blocks of 200 rows alternating between the tables so both see the
same machine. Prints milliseconds a row for each graph. Uses database ``rag_hnsw_recall``.

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_hnsw_insert.py 20000 4000
"""

from __future__ import annotations

import json
import sys
import time

import bench
import psycopg
from bench_lib import real_text
from pgvector.psycopg import register_vector
from psycopg import sql

from rag_service.config import load_settings
from rag_service.db.admin import database_url

GRAPHS = (64, 128)
BLOCK = 200
PER_STATEMENT = 10


def main() -> int:
    before, inserted = int(sys.argv[1]), int(sys.argv[2])
    settings = load_settings()
    corpus = real_text.realistic_corpus(
        bench.REPO.parent / "shared" / "datasets",
        size=before + inserted,
        seed=42,
        cache=settings.data_dir / "sentences.npy",
    )
    url = database_url(bench.server_url(settings), "rag_hnsw_recall").replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        for efc in GRAPHS:
            table = sql.Identifier(f"insert_efc{efc}")
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, embedding vector(384))").format(table))
            copy = sql.SQL("COPY {} (id, embedding) FROM STDIN WITH (FORMAT BINARY)").format(table)
            with conn.cursor().copy(copy) as rows:
                rows.set_types(["int8", "vector"])
                for i in range(before):
                    rows.write_row((i + 1, corpus.vectors[i]))
            conn.execute("SET maintenance_work_mem = '2GB'")
            conn.execute(
                sql.SQL(
                    "CREATE INDEX ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = {})"
                ).format(table, sql.Literal(efc))
            )
        seconds = dict.fromkeys(GRAPHS, 0.0)
        for start in range(before, before + inserted, BLOCK):
            for efc in GRAPHS if start // BLOCK % 2 else GRAPHS[::-1]:
                insert = sql.SQL("INSERT INTO {} (id, embedding) VALUES (%s, %s)").format(
                    sql.Identifier(f"insert_efc{efc}")
                )
                started = time.perf_counter()
                with conn.transaction():
                    for first in range(start, min(start + BLOCK, before + inserted), PER_STATEMENT):
                        last = min(first + PER_STATEMENT, before + inserted)
                        conn.cursor().executemany(insert, [(j + 1, corpus.vectors[j]) for j in range(first, last)])
                seconds[efc] += time.perf_counter() - started
        for efc in GRAPHS:
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(f"insert_efc{efc}")))
    ms = {f"ef_construction_{efc}": round(s / inserted * 1000, 3) for efc, s in seconds.items()}
    print(json.dumps({"before": before, "inserted": inserted, "ms_per_row": ms}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
