"""``rag eval``: index a BEIR corpus once, run every query of a split, score the document ranking.

Documents are indexed as ``title + "\\n\\n" + text`` into their own collection (``beir-<dir name>``),
chunked with the recursive strategy (500/100 characters, the settings peers were measured with). A
second run finds every document unchanged and embeds nothing. Each query goes through the chosen
pipeline (expansion, embedding, hybrid SQL, optional reranking); documents are ranked by their best
chunk. Per-stage latency is recorded for every query.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rag_service.config import MAX_CANDIDATE_K
from rag_service.errors import ConfigurationError
from rag_service.evaluation.aggregate import rank_documents_by_best_chunk
from rag_service.evaluation.beir import BeirDataset, doc_text
from rag_service.evaluation.latency import LatencyRecorder
from rag_service.evaluation.metrics import DEFAULT_MEASURES, evaluate_per_query, evaluate_run
from rag_service.ingest.report import IngestReport
from rag_service.result import NO_RERANKER
from rag_service.service import UniversalRAGService

RETRIEVERS = ("hybrid", "vector", "fulltext")
SCHEMA_VERSION = 1


def each_query(queries: dict[str, str], *, progress: bool) -> Iterator[tuple[str, str]]:
    """``queries``' items, with a bar on a terminal (``progress``), none elsewhere: a bar's carriage-return
    redraws filled ``rag eval ... 2>log`` with copies, and the queries are the short part of a run."""
    shown = progress and sys.stderr is not None and sys.stderr.isatty()
    return iter(tqdm(queries.items(), desc="queries", unit="q", disable=not shown))


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """What to evaluate and how deep to look."""

    context: str = "search"
    retriever: str = "hybrid"
    rerank: bool = True
    #: candidates per arm (``candidate_k``); None keeps the preset's
    depth: int | None = 300
    top_k: int = 100
    strategy: str | None = "recursive"
    overrides: dict[str, Any] = field(default_factory=dict)

    def retrieval_overrides(self) -> dict[str, Any]:
        """Preset overrides for this configuration (arm weights, depth, rerank, parents)."""
        if self.retriever not in RETRIEVERS:
            raise ConfigurationError(f"--retriever {self.retriever!r} must be one of {', '.join(RETRIEVERS)}")
        if self.depth is not None and not 1 <= self.depth <= MAX_CANDIDATE_K:
            raise ConfigurationError(f"--depth ({self.depth}) must be between 1 and {MAX_CANDIDATE_K}")
        out: dict[str, Any] = {"rerank_enabled": self.rerank}
        if self.depth is not None:
            out["candidate_k"] = self.depth
        if self.retriever == "vector":
            out.update(vector_weight=1.0, keyword_weight=0.0)
        elif self.retriever == "fulltext":
            out.update(vector_weight=0.0, keyword_weight=1.0)
        out.update(self.overrides)
        return out


@dataclass(slots=True)
class EvalResult:
    """Scores, latency and the run itself."""

    dataset: str
    split: str
    collection: str
    config: EvalConfig
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    latency: dict[str, dict[str, float]]
    run: dict[str, dict[str, float]]
    queries: int
    reranker: str
    degraded: list[str]
    ingest: dict[str, Any] | None = None
    #: further per-query averages (e.g. results and tokens per answer), when the runner keeps them
    stats: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON form (no per-query run)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "dataset": self.dataset,
            "split": self.split,
            "collection": self.collection,
            "config": {
                "context": self.config.context,
                "retriever": self.config.retriever,
                "rerank": self.reranked,
                "depth": self.config.depth,
                "strategy": self.config.strategy,
                "overrides": dict(sorted(self.config.overrides.items())),
            },
            "queries": self.queries,
            "metrics": dict(sorted(self.metrics.items())),
            "latency_ms": {k: self.latency[k] for k in sorted(self.latency)},
            "reranker": self.reranker,
            "degraded": self.degraded,
            "stats": dict(sorted(self.stats.items())),
            "ingest": self.ingest,
        }

    @property
    def reranked(self) -> bool:
        """Whether a reranker ran: asked for (no ``--no-rerank``) and one configured (not ``RAG_RERANK_MODEL=none``)."""
        return self.config.rerank and self.reranker != NO_RERANKER

    def lines(self) -> list[str]:
        """Human-readable summary."""
        c = self.config
        rerank = f"rerank on ({self.reranker})" if self.reranked else "rerank off"
        if c.rerank and not self.reranked:
            rerank += " (no reranker ran)"
        out = [f"{self.dataset} ({self.split}, {self.queries} queries) - {c.retriever}, context {c.context}, {rerank}"]
        out += [f"  {name:<11} {value:.4f}" for name, value in self.metrics.items()]
        out += [f"  {name:<20} {value:.1f}" for name, value in self.stats.items()]
        for stage, s in self.latency.items():
            out.append(f"  {stage + ' ms':<20} p50 {s['p50']:8.1f}  p95 {s['p95']:8.1f}")
        out += [f"  degraded: {d}" for d in self.degraded]
        return out


def collection_for(dataset_dir: Path) -> str:
    """The collection a BEIR dataset is indexed into."""
    return f"beir-{dataset_dir.resolve().name}"


def ensure_indexed(
    service: UniversalRAGService, dataset: BeirDataset, *, collection: str, strategy: str, progress: bool
) -> IngestReport:
    """Index the corpus (documents already stored unchanged are skipped without embedding)."""
    items = ((doc.doc_id, doc.title, doc_text(doc)) for doc in dataset.corpus.values())
    return service.index_texts(
        items, collection=collection, strategy=strategy, progress=progress, total=len(dataset.corpus)
    )


def run_queries(
    service: UniversalRAGService,
    dataset: BeirDataset,
    config: EvalConfig,
    *,
    collection: str,
    name: str,
    progress: bool,
) -> EvalResult:
    """Run every query of the split and score the document rankings."""
    overrides = config.retrieval_overrides()
    recorder = LatencyRecorder()
    run: dict[str, dict[str, float]] = {}
    reranker, degraded = "none", set()
    for qid, query in each_query(dataset.queries, progress=progress):
        chunks, metrics = service.ranked_candidates(query, config.context, collection=collection, **overrides)
        for stage in ("embedding", "retrieval", "graph", "rerank", "total"):
            recorder.record(stage, getattr(metrics, f"{stage}_time_ms"))
        reranker = metrics.reranker
        degraded.update(metrics.degraded)
        hits = [(c.source, c.scores.rerank if c.scores.rerank is not None else c.relevance_score) for c in chunks]
        run[qid] = dict(rank_documents_by_best_chunk(hits, top_k=config.top_k))
    return EvalResult(
        dataset=name,
        split=dataset.split,
        collection=collection,
        config=config,
        metrics=evaluate_run(run, dataset.qrels, measures=DEFAULT_MEASURES),
        per_query=evaluate_per_query(run, dataset.qrels, measures=DEFAULT_MEASURES),
        latency=recorder.summary(),
        run=run,
        queries=len(dataset.queries),
        reranker=reranker,
        degraded=sorted(degraded),
    )
