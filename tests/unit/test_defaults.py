"""One default, one place: every layer that has a default for a knob has the same one."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from pathlib import Path

import pytest

import rag_service
from rag_service.config import Preset, Settings
from rag_service.db.embedded import start_embedded_server
from rag_service.db.search_request import SearchRequest
from rag_service.embed import HashingEmbedder
from rag_service.ingest.chunkers import DEFAULT_MIN_CHUNK_CHARS, DEFAULT_SIZES, STRATEGIES, make_chunker
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


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_chunker_built_alone_has_its_strategys_default_sizes(strategy: str) -> None:
    made = make_chunker(strategy, embedder=HashingEmbedder())
    alone = type(made)(embedder=HashingEmbedder()) if strategy == "semantic" else type(made)()  # type: ignore[call-arg]
    expected = (*DEFAULT_SIZES[strategy], DEFAULT_MIN_CHUNK_CHARS)
    assert (alone.chunk_size, alone.chunk_overlap, alone.min_chunk_chars) == expected  # type: ignore[attr-defined]
    assert (made.chunk_size, made.chunk_overlap, made.min_chunk_chars) == expected  # type: ignore[attr-defined]


#: (pattern, the one file allowed to hold it): defaults and limits that were once written in several places
_WRITTEN_ONCE = [
    (r"min_chunk_chars: int = \d", None),
    (r"chunk_(size|overlap): int = \d", None),
    (r"sentences: int = \d", None),
    (r"batch_size: int = \d", None),
    (r"max_length: int = \d", None),
    (r"timeout_s: float = \d", None),
    (r"KEYWORD_COUNT = \d", None),
    (r'"ms-marco-MiniLM-L-6-v2"', "knobs.py"),
    (r"MAX_QUERY_CHARS = \d", "knobs.py"),
    (r"MAX_COLLECTION_CHARS = \d", "knobs.py"),
    (r"len\(collection\) > \d", None),
    (r"splitlines\(\)\[0\]|splitlines\(\) or \[", "errors.py"),  # an exception's first line: errors.first_line
]


@pytest.mark.parametrize(("pattern", "home"), _WRITTEN_ONCE)
def test_each_default_is_written_in_one_place(pattern: str, home: str | None) -> None:
    package = Path(rag_service.__file__).parent
    found = sorted(
        path.name
        for path in package.rglob("*.py")
        if "migrations" not in path.parts and re.search(pattern, path.read_text(encoding="utf-8"))
    )
    assert found == ([home] if home else []), f"{pattern} is written in {found}"
