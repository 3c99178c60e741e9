#!/usr/bin/env python3
"""Kill ``rag reindex`` with SIGKILL at random moments and check that nothing is lost or half-written.

Each round rewrites every file of a corpus to the other of two versions, starts ``rag reindex`` on
the embedded server (its own data dir), kills it after a random delay (the first round: between the
commits of its first and last batch, so at least one kill lands mid-write), and then checks:

* every document row is entirely version A or entirely version B of its file: its text is one of the
  two, and its chunks are exactly what chunking that text gives (texts, offsets, count);
* no chunk without its document, and BM25 statistics equal a recount from the stored tsvectors;
* no graph edge without both its chunks, and every document's section edges are those of its chunks;
* the next run completes (checked after the last round, and the lock is free again).

    .venv/bin/python scripts/crash_test.py --kills 25 --markdown docs/reliability.md
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from rag_service.db.embedded import start_embedded_server, stop_embedded_server
from rag_service.db.graph import document_chunks
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.graph import structure_edges

STATS_CHECKS = {
    "postings": (
        "SELECT count(*) FROM (SELECT c.id, u.lexeme, greatest(coalesce(cardinality(u.positions),0),1) AS tf, "
        "c.lexeme_count FROM document_chunks c, unnest(c.content_tsv) u "
        "EXCEPT SELECT chunk_id, lexeme, tf, doc_len FROM chunk_terms) x"
    ),
    "extra postings": (
        "SELECT count(*) FROM (SELECT chunk_id, lexeme FROM chunk_terms EXCEPT "
        "SELECT c.id, u.lexeme FROM document_chunks c, unnest(c.content_tsv) u) x"
    ),
    "document frequencies": (
        "SELECT count(*) FROM (SELECT c.collection, u.lexeme, count(*) FROM document_chunks c, "
        "unnest(c.content_tsv) u GROUP BY 1, 2 EXCEPT SELECT collection, lexeme, doc_freq FROM lexeme_stats) x"
    ),
    "stale frequencies": (
        "SELECT count(*) FROM (SELECT collection, lexeme, doc_freq FROM lexeme_stats EXCEPT "
        "SELECT c.collection, u.lexeme, count(*) FROM document_chunks c, unnest(c.content_tsv) u GROUP BY 1, 2) x"
    ),
    "collection sizes": (
        "SELECT count(*) FROM (SELECT collection, count(*), sum(lexeme_count) FROM document_chunks GROUP BY 1 "
        "EXCEPT SELECT collection, chunk_count, total_length FROM collection_stats) x"
    ),
    "orphan chunks": (
        "SELECT count(*) FROM document_chunks c LEFT JOIN documents d ON d.id = c.document_id WHERE d.id IS NULL"
    ),
    "dangling graph edges": (
        "SELECT count(*) FROM chunk_edges e WHERE NOT EXISTS (SELECT 1 FROM document_chunks c "
        "WHERE c.id = e.source_chunk_id AND c.collection = e.collection) OR NOT EXISTS "
        "(SELECT 1 FROM document_chunks c WHERE c.id = e.target_chunk_id AND c.collection = e.collection)"
    ),
}
STRUCTURE_KINDS = ("sibling", "parent", "child")


def version_text(index: int, version: str) -> str:
    """Document ``index`` in version A or B: same structure, different words, so every chunk changes."""
    rng = random.Random(f"{index}-{version}")
    words = [
        "replica",
        "backup",
        "index",
        "vector",
        "query",
        "fusion",
        "parent",
        "header",
        "chunk",
        "token",
        "model",
        "cluster",
    ]
    sections = []
    for s in range(rng.randint(2, 5)):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(60, 220)))
        sections.append(f"## Section {s} {version}\n\n{body.capitalize()}.\n")
    return f"# Document {index} version {version}\n\n" + "\n".join(sections)


@dataclass
class Findings:
    kills: list[float] = field(default_factory=list)
    documents_checked: int = 0
    versions_seen: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 0, "missing": 0})
    violations: list[str] = field(default_factory=list)
    recovery_seconds: float = 0.0
    mid_run_kills: int = 0  # kills after which some documents were new and some old


def check(engine: Engine, corpus: Path, findings: Findings, chunker) -> None:  # type: ignore[no-untyped-def]
    # one snapshot for every read: documents, their chunks, edges and statistics are compared as of one moment
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        docs = conn.execute(
            text("SELECT id, source, content, chunk_count FROM documents WHERE collection='crash'")
        ).all()
        seen = {d.source for d in docs}
        for path in sorted(corpus.glob("*.md")):
            if f"corpus/{path.name}" not in seen:
                findings.versions_seen["missing"] += 1
        for doc in docs:
            findings.documents_checked += 1
            index = int(Path(doc.source).stem.split("_")[1])
            version = next((v for v in "AB" if doc.content == version_text(index, v)), None)
            if version is None:
                findings.violations.append(f"{doc.source}: text is neither version")
                continue
            findings.versions_seen[version] += 1
            rows = conn.execute(
                text(
                    "SELECT content, start_char, end_char FROM document_chunks WHERE document_id=:d ORDER BY chunk_index"
                ),
                {"d": doc.id},
            ).all()
            expected = [(c.content, c.start_char, c.end_char) for c in chunker.split(doc.content).chunks]
            if [tuple(r) for r in rows] != expected or doc.chunk_count != len(rows):
                findings.violations.append(f"{doc.source}: chunks do not match its version {version}")
            stored = document_chunks(Session(bind=conn), collection="crash", document_id=doc.id)
            edges = conn.execute(
                text(
                    "SELECT source_chunk_id, target_chunk_id, kind FROM chunk_edges WHERE collection = 'crash' "
                    "AND source_chunk_id = ANY(:ids) AND kind = ANY(:kinds)"
                ),
                {"ids": [c.id for c in stored], "kinds": list(STRUCTURE_KINDS)},
            ).all()
            if {tuple(e) for e in edges} != {(a, b, kind) for a, b, kind, _ in structure_edges(stored)}:
                findings.violations.append(f"{doc.source}: its section edges do not match its chunks")
        for name, sql in STATS_CHECKS.items():
            bad = conn.execute(text(sql)).scalar()
            if bad:
                findings.violations.append(f"{name}: {bad} rows off")


def kill_mid_write(engine: Engine, proc: subprocess.Popen[bytes], *, version: str, documents: int) -> float:
    """SIGKILL ``proc`` after its first batch committed and before its last one can: a kill mid-write.

    A row lock on the last document holds back the batch that rewrites it (the corpus must span more
    than one embedding batch); once the first document shows ``version``, the kill cannot come too late.
    Returns the seconds from start to kill.
    """
    started = time.perf_counter()
    first, last = "corpus/doc_000.md", f"corpus/doc_{documents - 1:03d}.md"
    with engine.connect() as holder, engine.connect() as watcher:
        holder.execute(
            text("SELECT 1 FROM documents WHERE collection = 'crash' AND source = :s FOR UPDATE"), {"s": last}
        )
        deadline = time.monotonic() + 300
        while watcher.execute(
            text("SELECT content FROM documents WHERE collection = 'crash' AND source = :s"), {"s": first}
        ).scalar() != version_text(0, version):
            watcher.rollback()  # a new snapshot for the next look
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(
                    f"reindex never committed its first batch (exit {proc.returncode}); the corpus must span more "
                    "than one embedding batch (batch.EMBED_BATCH_CHUNKS): pass more --documents"
                )
            time.sleep(0.05)  # polling a condition: the commit shows up when it shows up
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        holder.rollback()
    return time.perf_counter() - started


def wait_for_the_killed_client(engine: Engine, timeout: float = 60.0) -> None:
    """Wait until the server has finished with the killed client: none of its backends is left and no reindex
    advisory lock is held. The lock lives on its own connection: its backend could exit while the write
    connection's backend still committed a batch whose COMMIT left before the kill (a fsync under load), and a
    check reading meanwhile saw a document row of one version beside chunks of the other (a checker race, seen
    once in a full suite run). ``engine`` must not pool (its own idle connections would count)."""
    deadline = time.monotonic() + timeout
    others = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
    locks = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
    with engine.connect() as conn:
        while conn.execute(text(others)).scalar() or conn.execute(text(locks)).scalar():
            conn.rollback()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the killed reindex's backends or lock were still there after {timeout:g} s")
            time.sleep(0.05)


def run(kills: int, documents: int, seed: int) -> Findings:
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="rag_crash_", dir="/tmp"))
    corpus = workdir / "corpus"
    corpus.mkdir()
    (workdir / ".git").mkdir()  # a checkout: sources are corpus/doc_NNN.md, as check() looks them up
    url = start_embedded_server(workdir / "data")  # this process keeps the server up between kills
    engine = create_engine(url, poolclass=NullPool)  # no idle connection of ours for the wait to count
    env = dict(os.environ, RAG_DATA_DIR=str(workdir / "data"), RAG_EMBEDDING_MODEL="hashing", RAG_RERANK_MODEL="none")
    env.pop("RAG_DATABASE_URL", None)
    command = [sys.executable, "-m", "rag_service.cli", "reindex", "corpus", "--collection", "crash", "--quiet"]
    chunker = make_chunker("markdown", chunk_size=500, chunk_overlap=100)
    findings = Findings()

    def write(version: str) -> None:
        for i in range(documents):
            (corpus / f"doc_{i:03d}.md").write_text(version_text(i, version))

    write("A")
    started = time.perf_counter()
    subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True)
    full_run = time.perf_counter() - started
    try:
        for round_ in range(kills):
            version = "B" if round_ % 2 == 0 else "A"
            write(version)
            proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if round_ == 0:
                delay = kill_mid_write(engine, proc, version=version, documents=documents)
            else:
                delay = rng.uniform(0.2, full_run)
                time.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            findings.kills.append(round(delay, 3))
            wait_for_the_killed_client(engine)
            before = dict(findings.versions_seen)
            check(engine, corpus, findings, chunker)
            if all(findings.versions_seen[v] > before[v] for v in "AB"):
                findings.mid_run_kills += 1
            print(f"kill {round_ + 1}/{kills} after {delay:.2f}s: {len(findings.violations)} violations", flush=True)
        started = time.perf_counter()
        final = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
        findings.recovery_seconds = time.perf_counter() - started
        if final.returncode != 0:
            findings.violations.append(f"the run after the kills failed: {final.stderr.strip()[:200]}")
        violations_before = len(findings.violations)
        check(engine, corpus, findings, chunker)
        latest = "B" if (kills - 1) % 2 == 0 else "A"
        with engine.connect() as conn:
            texts = conn.execute(text("SELECT source, content FROM documents WHERE collection='crash'")).all()
        stale = [s for s, c in texts if c != version_text(int(Path(s).stem.split("_")[1]), latest)]
        if stale or len(texts) != documents or len(findings.violations) != violations_before:
            findings.violations.append(f"after recovery: {len(stale)} stale documents, {len(texts)} stored")
        findings.full_run_seconds = full_run  # type: ignore[attr-defined]
    finally:
        engine.dispose()
        stop_embedded_server(workdir / "data")
        shutil.rmtree(workdir, ignore_errors=True)
    return findings


def markdown(findings: Findings, *, documents: int, command: str) -> str:
    ok = "none" if not findings.violations else "; ".join(findings.violations[:5])
    return "\n".join(
        [
            "## Crash safety (SIGKILL during `rag reindex`)",
            "",
            f"Command: `{command}`",
            "",
            "| figure | value |",
            "|---|---|",
            f"| corpus | {documents} markdown documents, every round rewrites all of them |",
            f"| uninterrupted run | {getattr(findings, 'full_run_seconds', 0):.2f} s |",
            f"| SIGKILLs | {len(findings.kills)}, at {min(findings.kills):.2f}-{max(findings.kills):.2f} s into the run |",
            f"| kills that landed mid-write (old and new documents side by side) | {findings.mid_run_kills} |",
            f"| document states checked | {findings.documents_checked} |",
            f"| seen as version A / B / not yet indexed | {findings.versions_seen['A']} / {findings.versions_seen['B']} / "
            f"{findings.versions_seen['missing']} |",
            f"| violations (mixed versions, orphan chunks, off statistics) | {ok} |",
            f"| run after the last kill | completed in {findings.recovery_seconds:.2f} s, all documents current |",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=25)
    parser.add_argument("--documents", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--markdown", type=Path, default=None, help="write the section into this file")
    args = parser.parse_args()
    findings = run(args.kills, args.documents, args.seed)
    section = markdown(
        findings,
        documents=args.documents,
        command=f"scripts/crash_test.py --kills {args.kills} --documents {args.documents}",
    )
    print(section)
    if args.markdown:
        from scripts_util import replace_section

        replace_section(args.markdown, "crash", section)
    return 0 if not findings.violations else 1


if __name__ == "__main__":
    sys.exit(main())
