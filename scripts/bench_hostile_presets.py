#!/usr/bin/env python3
"""Hostile queries on a real corpus, every stock preset: the slowest fuzzed query against the real questions.

Indexes a dataset with the bundled model into ``--data-dir`` (an embedded PostgreSQL kept between runs;
an indexed collection is reused), then runs the dataset's real questions and ``--fuzzed`` fuzzed
queries, shuffled together, each through ``retrieve()`` with every stock preset in turn (no
reranker). Fuzzed queries: half are random characters (``string.printable`` plus RTL, emoji and CJK
characters) of 500, 2,000, 8,000 or 20,000 characters, as in issue 23; half are words of the corpus
with ``-exclusions``, quoted phrases and unbalanced quotes, up to 20,000 characters.

Per preset: p95 of each stage over the real questions, the slowest fuzzed query, and their ratio. The
query vectors are cached (one query, same variants, in every preset): the embedding stage is timed
once per query, uncached, by the first preset (``chatbot``, 3 variants).

    .venv/bin/python scripts/bench_hostile_presets.py --dataset ../shared/datasets/anthropic-docs-qa \\
        --data-dir /tmp/hostile_work/data --fuzzed 1000 --markdown docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import string
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts_util import replace_section
from sqlalchemy import text as sql_text

from rag_service.config import DEFAULT_PRESETS, load_settings
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import make_engine
from rag_service.embed import Embedder, SentenceTransformerEmbedder
from rag_service.service import UniversalRAGService

PRESETS = [p.context_type for p in DEFAULT_PRESETS]
EXTRA = "مرحبا بالعالم שלום עולם 😀🚀🎉 漢字テスト中文검색"
LENGTHS = (500, 2000, 8000, 20_000)
STAGES = ("retrieval_time_ms", "expansion_time_ms", "parents_time_ms", "mmr_time_ms", "format_time_ms")


class CachedEmbedder:
    """The real embedder, each distinct text embedded once (every preset embeds the same variants)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.cache: dict[str, Any] = {}

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Any:
        if text not in self.cache:
            self.cache[text] = self.inner.embed_query(text)
        return self.cache[text]


def random_text(rng: random.Random, length: int) -> str:
    alphabet = string.printable + EXTRA
    return "".join(rng.choice(alphabet) for _ in range(length))


def worded_text(rng: random.Random, vocabulary: list[str], length: int) -> str:
    words = [rng.choice(vocabulary) for _ in range(length // 6 + 1)]
    kind = rng.randrange(3)
    if kind == 0:
        text = " ".join("-" + w if rng.random() < 0.3 else w for w in words)
    elif kind == 1:
        text = " ".join(f'"{w}' if rng.random() < 0.1 else w for w in words)
    else:
        text = " ".join(f'-"{w} {v}"' if rng.random() < 0.2 else w for w, v in zip(words, reversed(words), strict=True))
    return text[:length]


def fuzzed(rng: random.Random, index: int, vocabulary: list[str]) -> str:
    if index % 2 == 0:
        return random_text(rng, LENGTHS[(index // 2) % len(LENGTHS)])
    return worded_text(rng, vocabulary, rng.randint(1, 20_000))


def load_dataset(root: Path, docs: int) -> tuple[list[tuple[str, str, str]], list[str]]:
    """BEIR corpora: ``(source, title, text)`` of the test questions' documents plus random others up to
    ``docs``, and the test questions; a ``docs/`` folder of pages: no items (indexed as files)."""
    questions = {row["_id"]: row["text"] for row in map(json.loads, (root / "queries.jsonl").open())}
    if (root / "docs").is_dir():
        return [], list(questions.values())
    qrels: dict[str, set[str]] = {}
    for line in list((root / "qrels" / "test.tsv").open())[1:]:
        qid, doc_id, _ = line.split("\t")
        qrels.setdefault(qid, set()).add(doc_id)
    cited = set().union(*qrels.values())
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").open()]
    others = [d for d in corpus if d["_id"] not in cited]
    random.Random(7).shuffle(others)
    chosen = [d for d in corpus if d["_id"] in cited] + others[: max(docs - len(cited), 0)]
    items = [(d["_id"], d["title"], f"{d['title']}\n\n{d['text']}") for d in chosen]
    return items, [questions[q] for q in qrels if q in questions]


@dataclass
class Runs:
    ordinary: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    fuzzed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def corpus_size(service: UniversalRAGService, collection: str) -> str:
    with service.db.transaction() as session:
        docs, chunks = session.execute(
            sql_text(
                "SELECT (SELECT count(*) FROM documents WHERE collection = :c), "
                "(SELECT count(*) FROM document_chunks WHERE collection = :c)"
            ),
            {"c": collection},
        ).one()
    return f"{docs} documents, {chunks} chunks"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))]


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True, help="embedded PostgreSQL data (reused)")
    parser.add_argument("--collection", default=None, help="default: the dataset folder's name")
    parser.add_argument("--docs", type=int, default=800, help="BEIR corpora: documents indexed")
    parser.add_argument("--fuzzed", type=int, default=1000)
    parser.add_argument("--json", type=Path, default=None, help="write every query's metrics here")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()

    rng = random.Random(23)
    collection = args.collection or args.dataset.resolve().name.replace("-", "_")
    items, questions = load_dataset(args.dataset, args.docs)
    url = start_embedded_server(args.data_dir)
    settings = load_settings(database_url=url, data_dir=args.data_dir, rerank_model="none")
    embedder = CachedEmbedder(SentenceTransformerEmbedder())
    service = UniversalRAGService(settings, database=Database(make_engine(url, settings)), embedder=embedder)
    if items:
        report = service.index_texts(items, collection=collection)
    else:
        report = service.index_paths([args.dataset / "docs"], collection=collection)
    print(f"{collection}: {report.chunks_written} chunks written, {corpus_size(service, collection)}", flush=True)
    vocabulary = sorted({w for q in questions for w in re.findall(r"\w+", q)})

    for question in questions[:10]:  # warm-up: model, caches, plans
        for preset in PRESETS:
            service.retrieve(question, preset, collection=collection)
    embedder.cache.clear()
    queries = [("o", q) for q in questions] + [("f", fuzzed(rng, i, vocabulary)) for i in range(args.fuzzed)]
    rng.shuffle(queries)
    runs = Runs({p: [] for p in PRESETS}, {p: [] for p in PRESETS})
    load_start = load_average()
    for done, (kind, text) in enumerate(queries, start=1):
        for preset in PRESETS:
            metrics = service.retrieve(text, preset, collection=collection).metrics.to_dict()
            metrics["chars"] = len(text)
            metrics["text"] = text
            (runs.ordinary if kind == "o" else runs.fuzzed)[preset].append(metrics)
        embedder.cache.clear()
        if done % 100 == 0:
            print(f"{done}/{len(queries)} queries, load {load_average()}", flush=True)
    # the max of 1,000 timings on a shared machine catches scheduling hiccups: the 10 slowest fuzzed
    # queries of each preset are timed 3 more times, and a query's time is the least of its 4
    retimed: dict[str, float] = {}
    for preset in PRESETS:
        slowest = sorted(runs.fuzzed[preset], key=lambda m: -m["retrieval_time_ms"])[:10]
        retimed[preset] = max(
            min(
                [m["retrieval_time_ms"]]
                + [
                    service.retrieve(m["text"], preset, collection=collection).metrics.retrieval_time_ms
                    for _ in range(3)
                ]
            )
            for m in slowest
        )
    load_end = load_average()

    header = (
        "| preset | real questions: retrieval p95 | fuzzed: retrieval max (chars) | ratio | slowest fuzzed, "
        "least of 4 timings | ratio (< 10) | all stages but embedding: real p95 / fuzzed max | ratio |"
    )
    rows = [header, "|---|---|---|---|---|---|---|---|"]
    worst_ratio = 0.0
    for preset in PRESETS:
        ordinary, hostile = runs.ordinary[preset], runs.fuzzed[preset]
        o95 = p95([m["retrieval_time_ms"] for m in ordinary])
        slowest = max(hostile, key=lambda m: m["retrieval_time_ms"])
        without = [m["total_time_ms"] - m["embedding_time_ms"] for m in ordinary]
        f_without = max(m["total_time_ms"] - m["embedding_time_ms"] for m in hostile)
        ratio = retimed[preset] / o95
        worst_ratio = max(worst_ratio, ratio)
        rows.append(
            f"| `{preset}` | {o95:.1f} ms | {slowest['retrieval_time_ms']:.1f} ms ({slowest['chars']:,}) "
            f"| {slowest['retrieval_time_ms'] / o95:.1f} | {retimed[preset]:.1f} ms | {ratio:.1f} "
            f"| {p95(without):.1f} / {f_without:.1f} ms | {f_without / p95(without):.1f} |"
        )
    cold = PRESETS[0]
    e95 = p95([m["embedding_time_ms"] for m in runs.ordinary[cold]])
    emax = max(m["embedding_time_ms"] for m in runs.fuzzed[cold])
    stage_rows = [
        f"| {stage} | {p95([m[stage] for p in PRESETS for m in runs.ordinary[p]]):.1f} "
        f"| {max(m[stage] for p in PRESETS for m in runs.fuzzed[p]):.1f} |"
        for stage in STAGES
    ]
    table = "\n".join(rows)
    stages = "\n".join(
        [
            "| stage (all presets) | real questions p95 (ms) | fuzzed max (ms) |",
            "|---|---|---|",
            *stage_rows,
            f"| embedding (`{cold}`, 3 variants, uncached) | {e95:.1f} | {emax:.1f} |",
        ]
    )
    summary = (
        f"collection {collection} ({corpus_size(service, collection)}); "
        f"{len(questions)} real questions and {args.fuzzed} fuzzed queries, shuffled, each through all "
        f"{len(PRESETS)} presets; load average {load_start} at the start, {load_end} at the end; "
        f"worst ratio (re-timed) {worst_ratio:.1f}"
    )
    print(summary)
    print(table)
    print(stages)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"ordinary": runs.ordinary, "fuzzed": runs.fuzzed}))
    if args.markdown:
        command = f"scripts/bench_hostile_presets.py --dataset {args.dataset} --docs {args.docs} --fuzzed {args.fuzzed}"
        replace_section(
            args.markdown,
            f"hostile-presets-{collection}",
            f"### {collection}\n\nCommand: `{command}`. {summary}.\n\n{table}\n\n{stages}",
        )
    return 0 if worst_ratio < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
