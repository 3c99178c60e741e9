"""One default, one place: every layer that has a default for a knob has the same one."""

from __future__ import annotations

import inspect
from dataclasses import fields

from rag_service.config import Preset, Settings
from rag_service.db.embedded import start_embedded_server
from rag_service.db.search_request import SearchRequest
from rag_service.ingest.chunkers import DEFAULT_SIZES
from rag_service.ingest.recursive import RecursiveChunker
from rag_service.ingest.sentence import SentenceChunker


def _setting(name: str) -> object:
    return next(f.default for f in fields(Settings) if f.name == name)


def test_search_request_defaults_are_the_presets_and_the_settings():
    request = SearchRequest(
        collection="c", query_vector=None, any_terms="", required_terms="", vector_weight=0.6, keyword_weight=0.4
    )
    preset = Preset("p", expand_query=False, return_parents=False, diversity=0.0, max_chunks=1, max_tokens=1)
    assert (request.rrf_k, request.fusion_method, request.candidate_k, request.keyword_scorer) == (
        preset.rrf_k,
        preset.fusion_method,
        preset.candidate_k,
        preset.keyword_scorer,
    )
    for knob in ("bm25_k1", "bm25_b", "bm25_max_postings", "fts_config"):
        assert getattr(request, knob) == _setting(knob), knob
    assert request.ef_search == _setting("hnsw_ef_search")


def test_chunk_sizes_and_shared_buffers_have_one_default():
    sizes = (_setting("chunk_size"), _setting("chunk_overlap"))
    assert DEFAULT_SIZES["markdown"] == DEFAULT_SIZES["recursive"] == DEFAULT_SIZES["sentence"] == sizes
    assert (RecursiveChunker().chunk_size, RecursiveChunker().chunk_overlap) == sizes
    assert (SentenceChunker().chunk_size, SentenceChunker().chunk_overlap) == sizes
    default_buffers = inspect.signature(start_embedded_server).parameters["shared_buffers"].default
    assert default_buffers == _setting("embedded_shared_buffers")
