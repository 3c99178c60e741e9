"""``rag db status``'s lines for each collection: counts in words a reader expects."""

from __future__ import annotations

from typing import Any

from rag_service.db.status import DatabaseStatus, SharedMemory


def _status(**given: Any) -> DatabaseStatus:
    values: dict[str, Any] = {
        "url": "postgresql+psycopg://u@/rag",
        "server_version": "18.6",
        "pgvector_version": "0.8.6",
        "revision": "0018",
        "head": "0018",
        "embedding_model": "m",
        "embedding_dim": 384,
        "fts_config": "english",
        "collections": {},
    }
    return DatabaseStatus(**{**values, **given})


def test_a_collection_of_one_document_says_so_in_the_singular():
    lines = _status(collections={"kb": (2, 208), "web": (1, 1)}, packed=frozenset({"kb"})).lines()
    assert "collection: kb: 2 documents, 208 chunks, postings packed (exact BM25)" in lines
    assert "collection: web: 1 document, 1 chunk" in lines


def _memory(status: str | None, *, huge_pages: str = "try", needed: int | None = 3112) -> SharedMemory:
    return SharedMemory(shared_buffers="6026MB", huge_pages=huge_pages, status=status, pages_needed=needed)


GIB = 1024**3


def test_shared_memory_on_4_kb_pages_names_the_huge_pages_to_reserve_once_the_data_is_large():
    line = _memory("off").describe(data_bytes=20 * GIB)
    assert line.startswith("shared_buffers 6026MB on 4 kB pages; huge pages took up to 20% off")
    assert line.endswith("as root `sysctl -w vm.nr_hugepages=3112` before the server's next start")
    assert _memory("off").describe(data_bytes=GIB // 2) == "shared_buffers 6026MB on 4 kB pages"


def test_shared_memory_on_huge_pages_or_without_them_by_choice_or_unknown_says_only_that():
    assert _memory("on").describe(data_bytes=20 * GIB) == "shared_buffers 6026MB on huge pages"
    off = _memory("off", huge_pages="off").describe(data_bytes=20 * GIB)
    assert off == "shared_buffers 6026MB on 4 kB pages (huge_pages = off)"
    assert _memory(None, needed=None).describe(data_bytes=20 * GIB) == "shared_buffers 6026MB"  # before PG 17
    assert _memory("off", needed=-1).describe(data_bytes=20 * GIB) == "shared_buffers 6026MB on 4 kB pages"


def test_the_memory_line_sits_before_the_sizes():
    status = _status(sizes=(("table", "document_chunks", 2 * GIB),), memory=_memory("off"))
    lines = status.lines()
    assert lines[-2].startswith("memory:     shared_buffers 6026MB on 4 kB pages; huge pages took")
    assert lines[-1] == "size:       document_chunks (table): 2048.0 MB"
