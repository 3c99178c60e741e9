"""The token strategy: windows in tokens, exact character offsets, multi-byte characters kept whole."""

from __future__ import annotations

from itertools import pairwise

import pytest

from rag_service.errors import ChunkingError
from rag_service.ingest.tokenchunk import TokenChunker, token_windows
from rag_service.tokens import count_tokens, get_encoding
from tests.complexity import assert_linear
from tests.unit.test_chunker_properties import assert_chunks_valid, uncovered

ENGLISH = " ".join(f"The quick brown fox number {i} jumps over the lazy dog." for i in range(40))


def test_windows_are_chunk_size_tokens_with_overlap() -> None:
    doc = TokenChunker(chunk_size=32, chunk_overlap=8).split(ENGLISH)
    assert_chunks_valid(ENGLISH, doc)
    assert len(doc.chunks) == -(-(count_tokens(ENGLISH) - 8) // 24)
    assert all(c.token_count <= 33 for c in doc.chunks)
    for a, b in pairwise(doc.chunks):
        assert b.start_char < a.end_char  # overlapping
    assert doc.chunks[-1].end_char == len(ENGLISH)


def test_windows_cover_the_text_exactly() -> None:
    spans = token_windows(ENGLISH, chunk_size=16, chunk_overlap=0, encoding="cl100k_base")
    assert "".join(ENGLISH[s:e] for s, e in spans) == ENGLISH


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_emoji_and_cjk_are_never_cut(size: int) -> None:
    text = "😀👍🏽 漢字テスト、日本語の文章です。Ünïcödé façade 🇺🇳 " * 12
    enc = get_encoding()
    tokens = enc.encode(text)
    assert any(len(enc.decode_single_token_bytes(t).decode("utf-8", "ignore")) == 0 for t in tokens)
    doc = TokenChunker(chunk_size=size, chunk_overlap=size // 2, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, doc)
    assert uncovered(text, doc, [i for i, ch in enumerate(text) if not ch.isspace()]) == []
    spans = token_windows(text, chunk_size=size, chunk_overlap=0, encoding="cl100k_base")
    assert "".join(text[s:e] for s, e in spans) == text


def test_encoding_is_configurable() -> None:
    text = "Ein kurzer Text auf Deutsch, der in Token zerlegt wird. " * 20
    doc = TokenChunker(chunk_size=20, chunk_overlap=0, encoding="o200k_base").split(text)
    assert_chunks_valid(text, doc)
    o200k = get_encoding("o200k_base")
    assert all(len(o200k.encode(c.content)) <= 21 for c in doc.chunks)


def test_unknown_encoding_is_a_chunking_error() -> None:
    with pytest.raises(ChunkingError, match="'nope'"):
        TokenChunker(encoding="nope")


def test_one_megabyte_line_grows_linearly() -> None:
    text = "q" * 1_000_000
    doc = TokenChunker().split(text)
    assert_linear(lambda n: "q" * n, TokenChunker().split, n=1_000_000)
    assert doc.chunks[0].start_char == 0 and doc.chunks[-1].end_char == len(text)


def test_another_thread_shares_the_encoding_and_gets_the_same_tokens() -> None:
    """No copy is built on the way (it holds the GIL ~0.2 s); ``own_encoding`` makes one (test_token_threads)."""
    import threading

    text = "Per-thread encodings: tiktoken's regex is fastest in the thread that used it first."
    here = get_encoding()
    assert get_encoding() is here
    seen: dict[str, object] = {}

    def work() -> None:
        mine = get_encoding()
        seen["same"] = mine is get_encoding()
        seen["shared"] = mine is here
        seen["tokens"] = mine.encode(text)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == {"same": True, "shared": True, "tokens": here.encode(text)}
