"""Chunk keywords, document summaries and titles (issue 17 point 3) on the real database."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from rag_service.config import Settings
from rag_service.db.keywords import keywords_of
from rag_service.embed import HashingEmbedder
from rag_service.errors import UnknownFilterError
from rag_service.service import UniversalRAGService

RAY = """# Ray clusters

## Autoscaling

The Ray autoscaler adds worker nodes when tasks wait for resources and removes idle nodes after a
timeout. The autoscaler reads the cluster configuration file to learn which node types it may launch.

## Dashboard

The dashboard shows every actor, every task and the memory each node uses. Open it in a browser on
port 8265 of the head node; the dashboard refreshes its views every few seconds.
"""

SERVE = """---
title: "Serving models"
---

Serve deploys models behind HTTP endpoints. Each deployment scales its replicas with the traffic it
receives. Replicas run as actors on the cluster and share the head node's proxy. A deployment can be
updated in place: new replicas start before old ones stop. Requests queue at the proxy when every
replica is busy, and the proxy retries a request whose replica died. Logs of every replica go to the
same folder on each node.
"""

NOTES = "Plain notes about tuning garbage collection pauses in long running actors and their heap sizes."


@pytest.fixture
def docs_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "ray.md").write_text(RAY)
    (folder / "serve.md").write_text(SERVE)
    (folder / "notes.txt").write_text(NOTES)
    return folder


def _service(db, settings: Settings, **changes: object) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    return UniversalRAGService(dataclasses.replace(settings, **changes), database=db, embedder=HashingEmbedder())


@pytest.fixture
def service(db, settings, docs_dir) -> UniversalRAGService:
    svc = _service(db, settings)
    report = svc.index_paths([docs_dir])
    assert report.failed == [] and report.added == 3
    return svc


def _chunks(connection, source: str) -> list[dict]:
    rows = connection.execute(
        text(
            "SELECT c.metadata FROM document_chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.source = :s ORDER BY c.chunk_index"
        ),
        {"s": source},
    )
    return [row[0] for row in rows]


def test_every_chunk_gets_its_distinctive_words_as_keywords(service, connection):
    ray = _chunks(connection, "kb/ray.md")
    assert ray and all(0 < len(m["keywords"]) <= 8 for m in ray)
    autoscaling, dashboard = ray[0]["keywords"], ray[-1]["keywords"]
    assert "autoscaler" in autoscaling and "dashboard" in dashboard
    # surface words, not stems; no numbers alone; stop words never
    assert "8265" not in dashboard and "the" not in dashboard
    assert all(w == w.lower() for w in autoscaling)


def _keywords(db, content: str, *, count: int) -> list[str]:
    """The keywords ``content`` would get as a new chunk of the default collection (BM25 1.2 / 0.75)."""
    with db.transaction() as session:
        return keywords_of(
            session, content, collection="default", fts_config="english", keyword_count=count, bm25_k1=1.2, bm25_b=0.75
        )


def test_keywords_follow_the_collection_statistics(service, db):
    """A word in every document ranks below one only this text has (idf), at equal term frequency."""
    words = _keywords(db, "node dashboard quokka", count=3)
    assert words[0] == "quokka" and words[-1] == "node"


def test_ids_numbers_and_single_letters_are_no_keywords(db):
    """A lexeme needs a letter, 2-40 characters and no more digits than other characters (a hash or an id is
    no keyword); exactly half digits passes."""
    words = _keywords(db, "x 2024 1234abc5678 a1b2c3 deadbeef12 a1b2c3d4e5f6g7h88 quokka " + "y" * 41, count=10)
    assert sorted(words) == ["a1b2c3", "deadbeef12", "quokka"]


def test_a_compound_keyword_is_shown_as_written(db):
    """The parser's lexeme of a hyphenated or dotted compound (``per-ten``, ``ray.init``) is shown as the text
    wrote it; its parts keep their plain words."""
    words = _keywords(db, "Quotas are per-tenant. Call ray.init() first; tenant quotas apply.", count=10)
    assert "per-tenant" in words and "ray.init" in words and "tenant" in words and "quotas" in words
    assert not {"per-ten", "quota"} & set(words)


def test_a_word_of_several_lexemes_is_shown_once_and_a_plain_word_for_a_lexeme_it_has(db):
    """``rate_limit_error`` stems to ``rate``, ``limit`` and ``error``: shown once, not once per lexeme; where the
    text also has ``error`` alone, that lexeme shows it."""
    words = _keywords(db, "A rate_limit_error or a not_found_error comes back. Each error names its type.", count=10)
    assert len(words) == len(set(words)), words
    assert {"rate_limit_error", "not_found_error", "error"} <= set(words), words


def test_documents_get_an_extractive_summary_and_a_title(service, connection):
    rows = dict(
        connection.execute(text("SELECT source, metadata->>'summary' FROM documents WHERE collection='default'")).all()
    )
    titles = dict(connection.execute(text("SELECT source, title FROM documents")).all())
    assert titles == {"kb/ray.md": "Ray clusters", "kb/serve.md": "Serving models", "kb/notes.txt": "notes"}
    summary = rows["kb/serve.md"]
    sentences = [s for s in SERVE.replace("\n", " ").split(". ") if s]
    assert summary and summary.count(". ") <= 2, "three sentences at most"
    assert all(part.strip(". ") in " ".join(sentences) for part in summary.split(". ")), "sentences are copied"
    assert "title:" not in summary and rows["kb/notes.txt"] == NOTES, "a one-sentence text is its own summary"


def test_keywords_filter_through_retrieve(service):
    result = service.retrieve("nodes and their views", context="search", filters={"keywords": "dashboard"})
    assert result.chunks and all("dashboard" in c.metadata["keywords"] for c in result.chunks)
    # stemmed match: "dashboards" finds "dashboard"; several words must all be there
    plural = service.retrieve("nodes", context="search", filters={"keywords": ["dashboards"]})
    assert [c.chunk_id for c in plural.chunks] == [c.chunk_id for c in result.chunks]
    assert service.retrieve("nodes", context="search", filters={"keywords": ["dashboard", "autoscaler"]}).chunks == []
    with pytest.raises(UnknownFilterError, match="filter 'keywords' must be"):
        service.retrieve("nodes", filters={"keywords": 3})


def test_result_chunks_carry_keywords_and_summary(service):
    chunk = service.retrieve("replicas of a deployment", context="search").chunks[0]
    assert chunk.source == "kb/serve.md"
    assert chunk.summary.startswith("Serve deploys models") and chunk.metadata["keywords"]
    assert chunk.to_dict()["metadata"]["keywords"] == chunk.metadata["keywords"]


def test_formatter_shows_metadata_only_when_the_preset_asks(service):
    plain = service.retrieve("replicas of a deployment", context="search")
    assert "Summary:" not in plain.formatted_context and "keywords:" not in plain.formatted_context
    shown = service.retrieve("replicas of a deployment", context="search", show_metadata=True)
    chunk = shown.chunks[0]
    assert f"Summary: {chunk.summary}" in shown.formatted_context
    assert "· keywords: " + ", ".join(chunk.metadata["keywords"]) in shown.formatted_context
    assert shown.total_tokens <= 3000


def test_show_metadata_is_a_preset_column(service, db):
    with db.transaction() as session:
        session.execute(text("UPDATE rag_configurations SET show_metadata = true WHERE context_type = 'search'"))
    assert "Summary:" in service.retrieve("replicas of a deployment", context="search").formatted_context


def test_caller_metadata_survives_and_summary_is_not_part_of_it(db, settings, docs_dir, connection):
    svc = _service(db, settings)
    svc.index_paths([docs_dir], metadata={"team": "infra"})
    stored = connection.execute(text("SELECT metadata FROM documents WHERE source = 'kb/serve.md'")).scalar_one()
    assert stored["team"] == "infra" and stored["summary"] and stored["summary_source"] == "extractive"
    assert svc.index_paths([docs_dir], metadata={"team": "infra"}).unchanged == 3
    assert svc.retrieve("replicas", context="search", filters={"metadata": {"team": "infra"}}).chunks
    report = svc.reindex_all(collection="default")
    assert report.failed == []
    assert svc.index_paths([docs_dir], metadata={"team": "infra"}).unchanged == 3, "reindex --all kept the key"


def test_backfill_rebuilds_keywords_and_summaries_without_embedding(db, settings, docs_dir, connection):
    svc = _service(db, settings, chunk_keywords=0, summary_sentences=0)
    svc.index_paths([docs_dir])
    assert all("keywords" not in m for m in _chunks(connection, "kb/ray.md"))
    vectors = connection.execute(text("SELECT id, embedding::text, content_tsv::text FROM document_chunks")).all()

    report = _service(db, settings).build_metadata(collection="default")
    assert report.documents == 3 and report.summaries == 3 and report.chunks == len(vectors)
    assert all(m["keywords"] for m in _chunks(connection, "kb/ray.md"))
    summary = connection.execute(text("SELECT metadata->>'summary' FROM documents WHERE source='kb/serve.md'"))
    assert summary.scalar_one().startswith("Serve deploys models")
    after = connection.execute(text("SELECT id, embedding::text, content_tsv::text FROM document_chunks")).all()
    assert sorted(after) == sorted(vectors), "vectors and tsvectors untouched"


def test_the_citus_backfill_path_gives_the_keywords_of_the_one_statement_path(
    db, settings, docs_dir, connection, monkeypatch
):
    """On Citus the backfill's UPDATE is refused (a multi-shard correlated subquery), so it reads each chunk's
    keywords with a router SELECT and writes them: the same keywords, here on one node with that path forced."""
    from rag_service.db import keywords as keyword_module

    svc = _service(db, settings)
    svc.index_paths([docs_dir])
    svc.build_metadata(collection="default")
    one_statement = {m["id"]: m["keywords"] for m in _keywords_by_chunk(connection)}
    connection.execute(text("UPDATE document_chunks SET metadata = metadata - 'keywords'"))
    monkeypatch.setattr(keyword_module, "has_citus", lambda _connection: True)
    svc.build_metadata(collection="default")
    assert {m["id"]: m["keywords"] for m in _keywords_by_chunk(connection)} == one_statement
    assert all(one_statement.values())


def _keywords_by_chunk(connection) -> list[dict]:
    rows = connection.execute(text("SELECT id, metadata->'keywords' FROM document_chunks ORDER BY id")).all()
    return [{"id": chunk_id, "keywords": keywords} for chunk_id, keywords in rows]


def test_keywords_in_bm25_rewrite_the_tsvector_and_keep_vectors(db, settings, docs_dir, connection):
    _service(db, settings).index_paths([docs_dir])
    before = dict(
        connection.execute(
            text(
                "SELECT chunk_index || source, c.content_tsv::text FROM document_chunks c "
                "JOIN documents d ON d.id = c.document_id"
            )
        ).all()
    )
    report = _service(db, settings, keywords_in_bm25=True).index_paths([docs_dir])
    assert report.updated == 3 and report.chunks_embedded == 0, "a new index format, vectors reused"
    tf = connection.execute(
        text(
            "SELECT t.tf FROM chunk_terms t JOIN document_chunks c ON c.id = t.chunk_id JOIN documents d "
            "ON d.id = c.document_id WHERE d.source = 'kb/ray.md' AND c.chunk_index = 0 AND t.lexeme = 'autoscal'"
        )
    ).scalar_one()
    assert tf >= 2
    assert before != dict(
        connection.execute(
            text(
                "SELECT chunk_index || source, c.content_tsv::text FROM "
                "document_chunks c JOIN documents d ON d.id = c.document_id"
            )
        ).all()
    )


@pytest.mark.multiprocess
def test_metadata_build_cli(database_factory, docs_dir, tmp_path):
    env = dict(os.environ)
    env.update(
        RAG_DATABASE_URL=database_factory.create("rag_meta_cli"),
        RAG_EMBEDDING_MODEL="hashing",
        RAG_RERANK_MODEL="none",
        RAG_DATA_DIR=str(tmp_path / "data"),
        RAG_CHUNK_KEYWORDS="0",
    )

    def rag(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "rag_service.cli", *args]
        return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert rag("db", "upgrade").returncode == 0
    assert rag("reindex", "kb", "--collection", "kb", "--quiet").returncode == 0
    env["RAG_CHUNK_KEYWORDS"] = "8"
    built = rag("metadata", "build", "--collection", "kb", "--json")
    assert built.returncode == 0, built.stderr
    report = json.loads(built.stdout)
    assert report["collections"] == ["kb"] and report["documents"] == 3 and report["chunks"] > 0
    answer = json.loads(rag("query", "autoscaler nodes", "--collection", "kb", "--json").stdout)
    assert "autoscaler" in answer["chunks"][0]["metadata"]["keywords"]
    bad = rag("metadata", "build", "--collection", "")
    assert bad.returncode == 1 and bad.stderr.startswith("error: collection name")


_WORDS = ["actor", "autoscaler", "cluster", "dashboard", "deployment", "memory", "proxy", "quokka", "replica"]
_WORDS += ["scheduler", "tenant", "worker"]


def _reference_keywords(connection, content: str, *, count: int, k1: float = 1.2, b: float = 0.75) -> list[str]:
    """The best lexemes of ``content`` as a new chunk of ``default``, by db.keywords' formula written in Python."""
    n0, total0 = connection.execute(
        text("SELECT chunk_count, total_length FROM collection_stats WHERE collection = 'default'")
    ).one()
    df0 = dict(connection.execute(text("SELECT lexeme, doc_freq FROM lexeme_stats WHERE collection = 'default'")).all())
    terms = connection.execute(
        text("SELECT lexeme, cardinality(positions) FROM unnest(to_tsvector('english', :t))"), {"t": content}
    ).all()
    length = sum(tf for _, tf in terms)
    n, avglen = n0 + 1, max(total0 + length, 1.0) / (n0 + 1)

    def score(lexeme: str, tf: int) -> float:
        df = df0.get(lexeme, 0) + 1
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avglen))

    ranked = sorted(terms, key=lambda term: (-score(*term), term[0]))
    return [lexeme for lexeme, _ in ranked[:count]]


def test_keywords_are_the_bm25_best_terms_against_the_collection(db, settings, tmp_path, connection):
    """The keyword ranking equals the formula in db.keywords' docstring computed here, on texts whose terms differ in
    frequency, collection frequency and length (the bulk load is checked against the row path, which this checks)."""
    rng = random.Random(7)
    folder = tmp_path / "docs"
    folder.mkdir()
    for number in range(12):
        body = " ".join(rng.choices(_WORDS[: 4 + number % 8], k=rng.randint(5, 40)))
        (folder / f"doc{number}.txt").write_text(body + ".")
    assert _service(db, settings, chunk_size=4000).index_paths([folder]).failed == []
    for _ in range(25):
        content = " ".join(rng.choices(_WORDS, k=rng.randint(3, 60)))
        shown = [_lexeme(connection, word) for word in _keywords(db, content, count=4)]
        assert shown == _reference_keywords(connection, content, count=4), content


def test_a_chunks_keywords_read_each_terms_statistics_once(service, db, connection):
    """The document frequency of each term is read once and the collection's size a fixed number of times: the
    statistics' df ran twice per term (once for each use in the idf) and the size once per term."""
    content = "The dashboard shows each node of the cluster; a quokka node restarts the dashboard twice."
    terms = connection.execute(
        text(
            "SELECT count(*) FROM unnest(to_tsvector('english', CAST(:c AS text))) u WHERE length(u.lexeme) "
            "BETWEEN 2 AND 40 AND u.lexeme ~ '[[:alpha:]]'"
        ),
        {"c": content},
    ).scalar_one()
    scans = text(  # the reads of each table, by its index or whole (the test's tables are small)
        "SELECT pg_stat_get_xact_numscans(CAST('pk_lexeme_stats' AS regclass)) "
        "+ pg_stat_get_xact_numscans(CAST('lexeme_stats' AS regclass)), "
        "pg_stat_get_xact_numscans(CAST('collection_stats' AS regclass)) "
        "+ pg_stat_get_xact_numscans(CAST('collection_stats_pkey' AS regclass))"
    )
    before = connection.execute(scans).one()
    assert _keywords(db, content, count=4)
    after = connection.execute(scans).one()
    assert after[0] - before[0] == terms > 3
    assert after[1] - before[1] <= 3  # one read per use in the statistics (an InitPlan each), not one per term


def _lexeme(connection, word: str) -> str:
    return connection.execute(text("SELECT tsvector_to_array(to_tsvector('english', :w))"), {"w": word}).scalar_one()[0]
