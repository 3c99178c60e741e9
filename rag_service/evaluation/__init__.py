"""Offline evaluation on BEIR datasets: loading, measures, run files, latency, document ranking.

Everything here is pure (no database, no model); ``rag eval`` wires it to a retriever.
"""

from __future__ import annotations

from rag_service.evaluation.aggregate import rank_documents_by_best_chunk
from rag_service.evaluation.beir import BeirDataset, BeirDoc, doc_text, load_beir
from rag_service.evaluation.latency import LatencyRecorder
from rag_service.evaluation.metrics import (
    DEFAULT_MEASURES,
    Qrels,
    Run,
    evaluate_per_query,
    evaluate_run,
    mrr_at_k,
    ndcg_at_k,
    rank_scores,
    recall_at_k,
)
from rag_service.evaluation.trec import read_trec_run, write_trec_run

__all__ = [
    "DEFAULT_MEASURES",
    "BeirDataset",
    "BeirDoc",
    "LatencyRecorder",
    "Qrels",
    "Run",
    "doc_text",
    "evaluate_per_query",
    "evaluate_run",
    "load_beir",
    "mrr_at_k",
    "ndcg_at_k",
    "rank_documents_by_best_chunk",
    "rank_scores",
    "read_trec_run",
    "recall_at_k",
    "write_trec_run",
]
