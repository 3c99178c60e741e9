"""Reranking: rescore the fused candidates with a cross-encoder and keep the best.

A ``Reranker`` scores ``(query, document)`` pairs in one batched call; ``rerank`` sorts by that score.
A score is the model's raw relevance logit (higher is more relevant, unbounded; for a two-label
model ``logit[1] - logit[0]``), the same scale for every backend. Map it to 0..1 with a sigmoid.

``load_reranker(spec)`` reads ``RAG_RERANK_MODEL``:

====================================  ==========================================================
``none``                              reranking off: ``None``
``ms-marco-MiniLM-L-6-v2`` (default)  ``onnx:cross-encoder/ms-marco-MiniLM-L-6-v2`` - the very
                                      model, exported once to int8 ONNX (design budget: 20
                                      candidates in 300 ms p95 on 2 cores; torch fp32 misses it)
``onnx:<name or path>``               a Hugging Face cross-encoder (hub name or local directory)
                                      exported once to int8 ONNX under ``cache_dir/onnx`` and run
                                      by onnxruntime; a directory holding ``model.onnx`` (or an
                                      ``.onnx`` file) with its tokenizer is run as it is
``cross-encoder:<name or path>``      sentence-transformers ``CrossEncoder``, torch, fp32
``flashrank:<name>``                  a FlashRank ONNX model kept in ``cache_dir/flashrank``
any other name or path                as ``cross-encoder:``
====================================  ==========================================================

Models come from a local path, the local cache (Hugging Face's for hub names, ``cache_dir`` for
FlashRank and the ONNX exports), or are downloaded on first use. Loading never hangs offline: with
``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` set nothing is fetched, and otherwise one short probe
(``PROBE_TIMEOUT_S``) must reach the hub before a download starts, so an offline machine gets a
``ModelLoadError`` in seconds rather than after the hub client's retries (about 47 s per model here).

Torch's global thread count is never changed; onnxruntime sessions use their own pools.

Modules: ``base`` (protocol, scores, ordering), ``hub`` (finding model files), one per backend
(``cross_encoder``, ``onnx_model``, ``flashrank_model``) and ``loading`` (specs and the cache).
"""

from rag_service.retrieve.rerank.base import FunctionReranker, Reranker, RerankScore, ranked_order, rerank
from rag_service.retrieve.rerank.cross_encoder import CrossEncoderReranker
from rag_service.retrieve.rerank.flashrank_model import FlashRankReranker
from rag_service.retrieve.rerank.hub import PROBE_TIMEOUT_S
from rag_service.retrieve.rerank.loading import DEFAULT_RERANK_MODEL, RerankerCache, default_cache_dir, load_reranker
from rag_service.retrieve.rerank.onnx_model import OnnxReranker, export_onnx

__all__ = [
    "DEFAULT_RERANK_MODEL",
    "PROBE_TIMEOUT_S",
    "CrossEncoderReranker",
    "FlashRankReranker",
    "FunctionReranker",
    "OnnxReranker",
    "RerankScore",
    "Reranker",
    "RerankerCache",
    "default_cache_dir",
    "export_onnx",
    "load_reranker",
    "ranked_order",
    "rerank",
]
