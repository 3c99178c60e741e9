"""``rag eval`` on a documentation set: index ``docs/``, ask every question through ``retrieve()``.

Unlike BEIR runs, which rank documents from the fused candidates, this measures what a user gets:
the whole pipeline of the chosen preset (parents, MMR, the token budget), with ``max_chunks`` 10
unless overridden, so that nDCG@10 sees ten results. Sections are ranked as ``docset`` describes.
"""

from __future__ import annotations

from pathlib import Path

from rag_service.db.documents import documents_in_scope
from rag_service.evaluation.docset import DocSet, SectionMapper, rank_sections
from rag_service.evaluation.latency import LatencyRecorder
from rag_service.evaluation.metrics import evaluate_per_query, evaluate_run
from rag_service.evaluation.runner import EvalConfig, EvalResult, each_query
from rag_service.ingest.loaders import load_document
from rag_service.ingest.report import IngestReport
from rag_service.ingest.source_keys import source_for
from rag_service.service import UniversalRAGService

DOC_MEASURES: tuple[str, ...] = ("ndcg@10", "recall@10", "mrr@10")
#: results asked for per question unless ``max_chunks`` is overridden
DOC_MAX_CHUNKS = 10
_STAGES = ("embedding", "retrieval", "graph", "rerank", "parents", "mmr", "format", "total")


def docset_collection(dataset_dir: Path) -> str:
    """The collection a documentation set is indexed into (by default: ``index_docset`` keeps it to this set)."""
    return f"docs-{dataset_dir.resolve().name}"


def docset_sources(docset: DocSet) -> dict[str, str]:
    """The source key each file of ``docs/`` is stored under (as ``index_paths`` keys it), to its name."""
    known: dict[Path, Path | None] = {}
    return {source_for(path, known=known): name for name, path in docset.files.items()}


def index_docset(
    service: UniversalRAGService, docset: DocSet, *, collection: str, strategy: str | None, progress: bool
) -> IngestReport:
    """Index ``docs/`` (unchanged files are skipped without embedding) and delete what it no longer holds.

    In the set's own collection (``docset_collection``) every other document goes too: a folder of the
    same name elsewhere shares that name, and its documents would take this set's result slots. In a
    collection given by name only documents under ``docs/`` whose files are gone are deleted.
    """
    report = service.index_paths(
        [docset.docs_dir], collection=collection, strategy=strategy, progress=progress, prune=True
    )
    if collection == docset_collection(docset.root):
        report.deleted += _delete_foreign(service, collection, keep=set(docset_sources(docset)))
    return report


def _delete_foreign(service: UniversalRAGService, collection: str, *, keep: set[str]) -> int:
    """Delete the documents of ``collection`` whose source is not in ``keep``; returns how many."""
    with service.db.transaction() as session:
        stored = [d.source for d in documents_in_scope(session, collection=collection, prefixes=None)]
    return sum(service.delete_document(source, collection=collection) for source in stored if source not in keep)


def section_mapper(docset: DocSet, *, max_bytes: int) -> SectionMapper:
    """A mapper over the files' texts as the loader stores them (offsets refer to those texts), matching
    stored sources exactly to this set's files (a same-named file of another folder is none of them)."""
    texts = {name: load_document(path, max_bytes=max_bytes).text for name, path in docset.files.items()}
    return SectionMapper(texts, sources=docset_sources(docset))


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
    for qid, query in each_query(docset.queries, progress=progress):
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
