"""``rag db status``'s lines for each collection: counts in words a reader expects."""

from __future__ import annotations

from typing import Any

from rag_service.db.shared_memory import SharedMemory, local_shmem_thp, selected_thp_mode
from rag_service.db.status import DatabaseStatus


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


def _memory(
    status: str | None, *, huge_pages: str = "try", needed: int | None = 3112, transparent: str | None = None
) -> SharedMemory:
    return SharedMemory(
        shared_buffers="6026MB", huge_pages=huge_pages, status=status, pages_needed=needed, transparent=transparent
    )


GIB = 1024**3


def test_shared_memory_on_4_kb_pages_names_both_ways_to_huge_pages_once_the_data_is_large():
    line = _memory("off", transparent="never").describe(data_bytes=20 * GIB)
    assert line.startswith("shared_buffers 6026MB on 4 kB pages; huge pages took up to 20% off")
    assert "`echo always > /sys/kernel/mm/transparent_hugepage/shmem_enabled` (reserves no memory)" in line
    assert line.endswith("or `sysctl -w vm.nr_hugepages=3112`, before the server's next start")
    assert _memory("off").describe(data_bytes=GIB // 2) == "shared_buffers 6026MB on 4 kB pages"


def test_shared_memory_on_huge_pages_or_without_them_by_choice_or_unknown_says_only_that():
    assert _memory("on").describe(data_bytes=20 * GIB) == "shared_buffers 6026MB on huge pages"
    off = _memory("off", huge_pages="off").describe(data_bytes=20 * GIB)
    assert off == "shared_buffers 6026MB on 4 kB pages (huge_pages = off)"
    assert _memory(None, needed=None).describe(data_bytes=20 * GIB) == "shared_buffers 6026MB"  # before PG 17
    assert _memory("off", needed=-1).describe(data_bytes=20 * GIB) == "shared_buffers 6026MB on 4 kB pages"


def test_transparent_huge_pages_count_whatever_postgresql_reports():
    for mode in ("always", "within_size", "force"):
        for status, setting in (("off", "try"), ("off", "off"), (None, "try")):
            line = _memory(status, huge_pages=setting, transparent=mode).describe(data_bytes=20 * GIB)
            assert line == f"shared_buffers 6026MB on transparent huge pages (shmem_enabled = {mode})"
    advised = _memory("off", transparent="advise").describe(data_bytes=20 * GIB)  # PostgreSQL never advises
    assert advised.startswith("shared_buffers 6026MB on 4 kB pages; huge pages took")


def test_the_kernels_selected_mode_is_the_one_in_brackets(tmp_path):
    assert selected_thp_mode("always within_size advise [never] deny force\n") == "never"
    assert selected_thp_mode("[within_size] always never") == "within_size"
    assert selected_thp_mode("always never") is None
    setting = tmp_path / "shmem_enabled"
    setting.write_text("[always] within_size advise never deny force\n")
    assert local_shmem_thp(setting) == "always"
    assert local_shmem_thp(tmp_path / "missing") is None  # not Linux, or no THP in the kernel


def test_the_memory_line_sits_before_the_sizes():
    status = _status(sizes=(("table", "document_chunks", 2 * GIB),), memory=_memory("off"))
    lines = status.lines()
    assert lines[-2].startswith("memory:     shared_buffers 6026MB on 4 kB pages; huge pages took")
    assert lines[-1] == "size:       document_chunks (table): 2048.0 MB"


def test_a_model_recorded_by_a_write_that_stored_nothing_is_not_called_stored():
    """A first reindex whose files all failed recorded its model; status showed it as the database's embeddings."""
    empty = _status(collections={}).lines()
    assert (
        "embeddings: none stored yet (m was recorded by a write that stored nothing; the next write records its own)"
        in empty
    )
    assert "embeddings: m (384-d), fts 'english'" in _status(collections={"kb": (1, 3)}).lines()
    assert "embeddings: none stored yet" in _status(embedding_model=None, collections={}).lines()


def test_a_collection_name_with_control_characters_stays_on_its_line_and_is_not_obeyed():
    """A collection is named by whoever indexes into it (HTTP, MCP): ``rag db status`` printed ``\\x1b[2J`` (the
    terminal cleared the screen) and a newline split a collection's line in two."""
    lines = _status(collections={"\x1b[2Jx": (1, 1), "a\nb": (1, 2), "tab\there": (1, 3)}).lines()
    shown = [line for line in lines if line.startswith("collection: ")]
    assert shown == [
        "collection: \\x1b[2Jx: 1 document, 1 chunk",
        "collection: a\\x0ab: 1 document, 2 chunks",
        "collection: tab\\x09here: 1 document, 3 chunks",
    ]
    assert not any("\x1b" in line or "\n" in line for line in lines)


def test_the_metadata_report_quotes_the_collections_it_names():
    from rag_service.ingest.backfill import BackfillReport

    lines = BackfillReport(collections=["kb", "\x1b[2Jx"]).lines()
    assert lines[0] == "collections: 'kb', '\\x1b[2Jx'"
