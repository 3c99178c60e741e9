"""``service.index_texts`` stores metadata like ``index_paths`` does, and refuses malformed items and metadata."""

from __future__ import annotations

import datetime

import pytest
from sqlalchemy import text

from rag_service.embed import HashingEmbedder
from rag_service.errors import ConfigurationError
from rag_service.ingest.metadata_policy import user_metadata
from rag_service.service import UniversalRAGService


def test_index_texts_stores_metadata(db, settings, connection):
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    item = ("notes/a", "A", "Logical replication slots keep WAL until every subscriber has confirmed it. " * 2)
    report = service.index_texts([item], collection="m", metadata={"team": "storage"})
    assert report.added == 1
    stored = connection.execute(text("SELECT metadata FROM documents WHERE collection = 'm'")).scalar_one()
    assert user_metadata(stored) == {"team": "storage"}
    assert stored["summary_source"] == "extractive", "ingestion adds its summary beside the caller's keys"


def _documents(connection, collection: str) -> int:
    query = text("SELECT count(*) FROM documents WHERE collection = :c")
    return int(connection.execute(query, {"c": collection}).scalar_one())


GOOD = ("good.md", "", "# Good\n\nA document that comes before the malformed one.\n")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (("w.md", "# W\n\ntext\n"), "items[1] has 2 values; pass a (source, title, text) tuple"),
        ("w.md", "items[1] is a str; pass a (source, title, text) tuple"),
        ({"source": "w.md", "title": "", "text": "x"}, "items[1] is a dict; pass a (source, title, text) tuple"),
    ],
)
def test_a_malformed_item_is_one_line_before_anything_is_written(db, settings, connection, bad, message):
    """D9: a 2-tuple raised Python's "not enough values to unpack (expected 3, got 2)"."""
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    with pytest.raises(ConfigurationError) as raised:
        service.index_texts([GOOD, bad], collection="t9")
    assert str(raised.value) == message
    assert _documents(connection, "t9") == 0, "the good item before it is not written either"
    lazy = (item for item in [("w.md", "text")])
    with pytest.raises(ConfigurationError, match=r"^items\[0\] has 2 values"):
        service.index_texts(lazy, collection="t9")


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"when": datetime.date(2024, 1, 1)}, "metadata['when'] (date) is not JSON; pass strings, numbers"),
        ({"tags": {1, 2}}, "metadata['tags'] (set) is not JSON; pass strings"),
        ({"a": [1, {"b": float("nan")}]}, "metadata['a'][1]['b'] (nan) is not JSON; pass a finite number"),
        ({"a": {1: "x"}}, "metadata['a'] key 1 (int) is not JSON; use string keys"),
    ],
)
def test_metadata_that_is_not_json_is_refused_up_front(db, settings, connection, tmp_path, metadata, message):
    """D10: every document failed as "could not be indexed (TypeError: ...): a bug; report it", and the call
    returned normally."""
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    with pytest.raises(ConfigurationError) as raised:
        service.index_texts([GOOD], collection="t4", metadata=metadata)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    (tmp_path / "a.md").write_text("# A\n\ntext\n")
    with pytest.raises(ConfigurationError, match=r"^metadata\["):
        service.index_paths([tmp_path / "a.md"], collection="t4", metadata=metadata)
    assert _documents(connection, "t4") == 0
    cycle: dict = {}
    cycle["self"] = cycle
    with pytest.raises(ConfigurationError, match=r"^metadata\['self'\] contains itself"):
        service.index_texts([GOOD], collection="t4", metadata=cycle)


def test_a_nul_in_a_source_or_a_path_is_one_line_before_anything_is_written(db, settings, connection, tmp_path):
    """Audit 51a item 2: a NUL in a source reached the SQL (a raw DataError; MCP said "Error executing tool
    index_text" and printed a 400-line traceback), one in a path raised Python's "embedded null byte"."""
    from rag_service import NewDocument

    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    calls = {
        "items[1]: source 'm\\x003.md' holds a NUL, which a source cannot; remove it": lambda: service.index_texts(
            [GOOD, ("m\x003.md", "", "text")], collection="t9"
        ),
        "documents[0]: source 'm\\x003.md' holds a NUL, which a source cannot; remove it": lambda: (
            service.index_documents([NewDocument("m\x003.md", "text")], collection="t9")
        ),
        "paths[1] 'docs/a\\x00b.md' holds a NUL byte, which no file name has; remove it": lambda: (
            service.index_paths([tmp_path, "docs/a\x00b.md"], collection="t9")
        ),
    }
    for message, call in calls.items():
        with pytest.raises(ConfigurationError) as raised:
            call()
        assert str(raised.value) == message
    assert _documents(connection, "t9") == 0


def test_html_given_as_text_is_stored_as_the_same_html_file_is(db, settings, connection, tmp_path):
    """Audit 51a: HTML posted as text (HTTP, MCP's index_text, ``index_documents``) was stored and shown with its
    tags, as one chunk; a file of the same markup is stored as its visible text with ATX headings."""
    from rag_service import NewDocument

    html = (
        "<html><head><title>Zoo</title></head><body><h1>Zebras</h1><p>Zebra stripes are unique to each animal.</p>"
        "<h2>Food</h2><p>Zebras eat <b>grass</b>.</p></body></html>"
    )
    (tmp_path / "zoo.html").write_text(html)
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    assert service.index_paths([tmp_path / "zoo.html"], collection="html-file").added == 1
    assert service.index_documents([NewDocument("zoo.html", html)], collection="html-doc").added == 1
    assert service.index_texts([("zoo.html", "", html)], collection="html-text", strategy="html").added == 1
    stored = connection.execute(
        text("SELECT collection, title, content FROM documents WHERE collection LIKE 'html-%' ORDER BY collection")
    ).all()
    assert len(stored) == 3 and len({(title, content) for _, title, content in stored}) == 1, stored
    assert stored[0].title == "Zoo" and "<" not in stored[0].content and "## Food" in stored[0].content
    found = service.retrieve("what do zebras eat", "search", collection="html-doc").chunks
    assert found and all("<" not in chunk.content for chunk in found)


def test_a_given_text_is_normalised_as_the_same_file_is(db, settings, connection, tmp_path):
    """Audit 54a (12): a text sent with a leading BOM (a Windows file read as 'utf-8', not 'utf-8-sig') kept it, so
    its ``# Title`` was no header: the title fell back to the name and the h1 was missing from every header path;
    the same file indexed by path drops the BOM and turns CRLF into LF."""
    from rag_service import NewDocument

    raw = "\ufeff# Руководство\r\n\r\n## Резервное копирование\r\nБазы данных копируются ежедневно.\r\n"
    (tmp_path / "guide.md").write_bytes(raw.encode("utf-8"))
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    assert service.index_paths([tmp_path / "guide.md"], collection="bom-file").added == 1
    assert service.index_documents([NewDocument("guide.md", raw)], collection="bom-doc").added == 1
    assert service.index_texts([("guide.md", "", raw)], collection="bom-text").added == 1
    stored = connection.execute(
        text("SELECT collection, title, content FROM documents WHERE collection LIKE 'bom-%' ORDER BY collection")
    ).all()
    assert {(title, content) for _, title, content in stored} == {
        ("Руководство", "# Руководство\n\n## Резервное копирование\nБазы данных копируются ежедневно.\n")
    }, stored
    paths = connection.execute(
        text(
            "SELECT c.header_path, c.start_char, c.end_char, d.content, c.content AS piece FROM document_chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE d.collection = 'bom-doc'"
        )
    ).all()
    assert paths and all(row.header_path.startswith("Руководство") for row in paths), paths
    assert all(row.content[row.start_char : row.end_char] == row.piece for row in paths)
