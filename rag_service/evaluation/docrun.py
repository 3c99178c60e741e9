"""``rag eval`` on a documentation set: index ``docs/``, ask every question through ``retrieve()``.

Unlike BEIR runs, which rank documents from the fused candidates, this measures what a user gets:
the whole pipeline of the chosen preset (parents, MMR, the token budget), with ``max_chunks`` 10
unless overridden, so that nDCG@10 sees ten results. Sections are ranked as ``docset`` describes.
"""

from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from rag_service.evaluation.docset import DocSet, SectionMapper, rank_sections
from rag_service.evaluation.latency import LatencyRecorder
from rag_service.evaluation.metrics import evaluate_per_query, evaluate_run
from rag_service.evaluation.runner import EvalConfig, EvalResult
from rag_service.ingest.loaders import load_document
from rag_service.ingest.report import IngestReport
from rag_service.service import UniversalRAGService

DOC_MEASURES: tuple[str, ...] = ("ndcg@10", "recall@10", "mrr@10")
#: results asked for per question unless ``max_chunks`` is overridden
DOC_MAX_CHUNKS = 10
_STAGES = ("embedding", "retrieval", "graph", "rerank", "parents", "mmr", "format", "total")


def docset_collection(dataset_dir: Path) -> str:
    """The collection a documentation set is indexed into."""
    return f"docs-{dataset_dir.resolve().name}"


def index_docset(
    service: UniversalRAGService, docset: DocSet, *, collection: str, strategy: str | None, progress: bool
) -> IngestReport:
    """Index ``docs/`` (unchanged files are skipped without embedding)."""
    return service.index_paths([docset.docs_dir], collection=collection, strategy=strategy, progress=progress)


def section_mapper(docset: DocSet, *, max_bytes: int) -> SectionMapper:
    """A mapper over the files' texts as the loader stores them (offsets refer to those texts)."""
    return SectionMapper({name: load_document(path, max_bytes=max_bytes).text for name, path in docset.files.items()})


def run_docset(
    service: UniversalRAGService,
    docset: DocSet,
    config: EvalConfig,
    *,
    collection: str,
    name: str,
    progress: bool,
) -> EvalResult:
    """Ask every question through ``retrieve()`` and score the section rankings."""
    overrides = {"max_chunks": DOC_MAX_CHUNKS, **config.retrieval_overrides()}
    mapper = section_mapper(docset, max_bytes=service.settings.max_file_bytes)
    recorder = LatencyRecorder()
    run: dict[str, dict[str, float]] = {}
    results = tokens = 0
    reranker, degraded = "none", set()
    for qid, query in tqdm(docset.queries.items(), desc="queries", unit="q", disable=not progress):
        result = service.retrieve(query, config.context, collection=collection, **overrides)
        metrics = result.metrics
        for stage in _STAGES:
            recorder.record(stage, getattr(metrics, f"{stage}_time_ms"))
        reranker = metrics.reranker
        degraded.update(metrics.degraded)
        ranked = sorted(enumerate(result.chunks), key=lambda item: (-item[1].relevance_score, item[0]))
        run[qid] = rank_sections(((c.source, c.match_start) for _, c in ranked), mapper)
        results += len(result.chunks)
        tokens += result.total_tokens
    queries = max(len(docset.queries), 1)
    return EvalResult(
        dataset=name,
        split=docset.split,
        collection=collection,
        config=config,
        metrics=evaluate_run(run, docset.qrels, measures=DOC_MEASURES),
        per_query=evaluate_per_query(run, docset.qrels, measures=DOC_MEASURES),
        latency=recorder.summary(),
        run=run,
        queries=len(docset.queries),
        reranker=reranker,
        degraded=sorted(degraded),
        stats={"results per query": results / queries, "tokens per query": tokens / queries},
    )
