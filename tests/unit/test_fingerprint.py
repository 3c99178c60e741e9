"""The document fingerprint: what earlier versions stored stays the same string (else every document of
every collection would be chunked and embedded again after an upgrade), and each setting in it counts."""

from __future__ import annotations

from typing import Any

import pytest

from rag_service.config import Settings
from rag_service.embed import HashingEmbedder
from rag_service.errors import ChunkingError
from rag_service.ingest.chunking import Chunking
from rag_service.ingest.fingerprint import content_hash, fingerprint_strategy
from rag_service.ingest.strategies import STRATEGIES

METADATA = {"team": "db", "tags": ["a", "b"]}


def _chunking(**settings: Any) -> Chunking:
    values: dict[str, Any] = {
        "chunk_size": 500,
        "chunk_overlap": 100,
        "embed_headers": False,
        "chunk_keywords": 0,
        "keywords_in_bm25": False,
        **settings,
    }
    return Chunking(Settings(**values), HashingEmbedder())


@pytest.mark.parametrize(
    ("settings", "strategy", "metadata", "stored"),
    [
        ({}, "markdown", {}, "markdown:500:100:50:v10:tsv5"),
        ({"embed_headers": True}, "recursive", {}, "recursive:500:100:50:v10:tsv5:eh"),
        ({"chunk_keywords": 5, "keywords_in_bm25": True}, "markdown", {}, "markdown:500:100:50:v10:tsv5:kw"),
        ({"chunk_keywords": 0, "keywords_in_bm25": True}, "markdown", {}, "markdown:500:100:50:v10:tsv5"),
        ({"chunk_keywords": 5, "keywords_in_bm25": False}, "markdown", {}, "markdown:500:100:50:v10:tsv5"),
        ({"table_rows": True}, "markdown", {}, "markdown:500:100:50:v10:tsv5:tr"),
        ({"table_rows": True}, "html", {}, "html:500:100:50:v10:tsv5:tr"),
        ({"table_rows": True}, "recursive", {}, "recursive:500:100:50:v10:tsv5"),
        (
            {"embed_headers": True, "chunk_keywords": 5, "keywords_in_bm25": True},
            "markdown",
            METADATA,
            "markdown:500:100:50:v10:tsv5:eh:kw:febe0f0c9d57",
        ),
        ({"chunk_size": 300, "chunk_overlap": 30}, "sentence", {}, "sentence:300:30:50:v10:tsv5"),
        ({"chunk_size": 300, "chunk_overlap": 30}, "token", {}, "token:256:32:50:cl100k_base:v10:tsv5"),
        # session 57: tsv4 (a bare <name> read), :np (code's names' parts): stored documents are written once again
        # session 58: the code strategy's revision 1 (JS/TS regex literals): only code documents are chunked again
        # audit 58: the code strategy's revision 2 (Go's and Rust's items): only code documents are chunked again
        # the code strategy's revision 3 (JS/TS classes assigned, object methods, long doc comments): code documents
        # fix-code: its revision 4 (Rust macro_rules! in parens, TS interface members, key: function after a value)
        ({"chunk_size": 300, "chunk_overlap": 30}, "code", {}, "code:1500:0:50:v10.4:tsv5:np"),
        # audit 58c: the config strategy's revision 1 (documents, values, entries, indentation): only config documents
        # fix-cfg2: its revision 2 (list items and [[array]] tables named, merged sections name their parts)
        ({}, "config", {}, "config:500:100:50:v10.2:tsv5"),
        ({}, "recursive", {}, "recursive:500:100:50:v10:tsv5"),
    ],
)
def test_the_stored_fingerprint_is_what_earlier_versions_stored(
    settings: dict[str, Any], strategy: str, metadata: dict[str, Any], stored: str
) -> None:
    assert _chunking(**settings).fingerprint(strategy, metadata) == stored


def test_metadata_keys_order_does_not_count_but_values_do() -> None:
    chunking = _chunking()
    shuffled = dict(reversed(list(METADATA.items())))
    assert chunking.fingerprint("markdown", shuffled) == chunking.fingerprint("markdown", METADATA)
    assert chunking.fingerprint("markdown", {**METADATA, "team": "web"}) != chunking.fingerprint("markdown", METADATA)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_reindex_reads_the_strategy_back_from_the_fingerprint(strategy: str) -> None:
    assert fingerprint_strategy(_chunking().fingerprint(strategy, METADATA)) == strategy


def test_a_strategy_that_cannot_chunk_is_refused_before_any_document() -> None:
    with pytest.raises(ChunkingError, match="unknown chunking strategy 'nope'"):
        _chunking().check("nope")
    with pytest.raises(ChunkingError, match=r"chunk_overlap \(600\)"):
        _chunking(chunk_overlap=600).check("recursive")


def test_content_hash_is_sha256_hex() -> None:
    assert content_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
