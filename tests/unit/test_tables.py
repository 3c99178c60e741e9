"""Pipe tables: where they are, and a markdown section's table cut into children between its rows."""

from __future__ import annotations

from rag_service.db.chunk_text import search_prefix
from rag_service.ingest.children import MAX_PARENT_CHARS
from rag_service.ingest.markdown import MarkdownChunker
from rag_service.ingest.tables import find_tables
from tests.complexity import assert_linear
from tests.unit.test_chunker_properties import assert_chunks_valid

HEADER = "| variable | meaning | default |"
ROWS = [
    "| `RAG_DATABASE_URL` | any PostgreSQL server with pgvector, as a SQLAlchemy URL | embedded |",
    "| `RAG_RERANK_MODEL` | cross-encoder name or local path; `none` turns reranking off | MiniLM |",
    "| `RAG_FTS_CONFIG` | Postgres text-search configuration | `english` |",
]
INTRO = ["# Guide", "", "## Configuration", "", "Every setting is an environment variable.", ""]
CONFIGURATION = "\n".join([*INTRO, HEADER, "|---|---|---|", *ROWS])


def test_a_table_is_its_header_delimiter_and_rows_up_to_a_line_without_a_pipe() -> None:
    text = "intro\n| a | b |\n| :-- | --: |\n| 1 | 2 |\n| 3 | 4 |\nafter\n| 5 | 6 |\n"
    (table,) = find_tables(text)
    assert text[slice(*table.header)] == "| a | b |"
    assert text[slice(*table.delimiter)] == "| :-- | --: |"
    assert [text[slice(*row)] for row in table.rows] == ["| 1 | 2 |", "| 3 | 4 |"]


def test_pipes_without_a_delimiter_row_or_inside_code_are_no_table() -> None:
    assert find_tables("a | b\nc | d\n") == []
    assert find_tables("```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\n") == []
    assert len(find_tables("a | b\n--|--\n1 | 2\n")) == 1  # the outer pipes are optional


def test_each_row_of_a_table_is_a_child_under_the_tables_header_row() -> None:
    doc = MarkdownChunker(table_rows=True).split(CONFIGURATION)
    assert_chunks_valid(CONFIGURATION, doc)
    rows = [c for c in doc.chunks if "RAG_" in c.content]
    assert [c.content for c in rows] == [f"{HEADER}\n|---|---|---|\n{ROWS[0]}", ROWS[1], ROWS[2]]
    assert [c.lead for c in rows] == ["", HEADER, HEADER]
    assert {c.header_path for c in rows} == {"Guide > Configuration"}
    assert all(c.parent_content == CONFIGURATION[CONFIGURATION.index("## Configuration") :] for c in rows)
    (intro,) = [c for c in doc.chunks if c not in rows]
    assert intro.content.endswith("Every setting is an environment variable.") and intro.lead == ""


def test_short_rows_join_and_a_row_longer_than_a_child_is_cut_under_the_header_row() -> None:
    text = "# T\n\n| k | v |\n|---|---|\n| a | 1 |\n| b | 2 |\n| c | 3 |\n| d | " + "word " * 40 + "|\n"
    doc = MarkdownChunker(chunk_size=120, chunk_overlap=0, min_chunk_chars=15, table_rows=True).split(text)
    assert_chunks_valid(text, doc)
    contents = [c.content for c in doc.chunks]
    assert contents[0] == "| k | v |\n|---|---|\n| a | 1 |"
    assert contents[1] == "| b | 2 |\n| c | 3 |"  # each alone is under 15 characters
    assert len(contents) > 3 and all(c.startswith("| d |") is (i == 2) for i, c in enumerate(contents[2:], 2))
    assert [c.lead for c in doc.chunks] == ["", *["| k | v |"] * (len(contents) - 1)]


def test_the_lead_is_matched_after_the_header_path() -> None:
    assert search_prefix("Guide", "Guide > Configuration", HEADER) == f"Guide > Configuration\n{HEADER}"
    assert search_prefix("Notes", "", HEADER) == f"Notes\n{HEADER}"
    assert search_prefix("Notes", "Setup") == "Notes\nSetup"


def _long_table(rows: int) -> str:
    row = "| key {} | a value long enough to stand alone as a row |\n"
    return "# T\n\n| k | v |\n|---|---|\n" + "".join(row.format(i) for i in range(rows))


def test_a_long_table_grows_linearly() -> None:
    chunker = MarkdownChunker(table_rows=True)
    assert len(chunker.split(_long_table(20_000)).chunks) == 20_000
    assert_linear(_long_table, chunker.split, n=20_000)


def _sections_with_tables(sections: int) -> str:
    section = "## S{0}\n\n| k | v |\n|---|---|\n| key {0} | a value long enough to stand alone |\n\n"
    return "".join(section.format(i) for i in range(sections))


def test_many_sections_with_tables_grow_linearly() -> None:
    assert_linear(_sections_with_tables, MarkdownChunker(table_rows=True).split, n=10_000)


def test_a_table_cut_by_a_parent_bound_keeps_its_header_row_as_every_later_rows_lead() -> None:
    row = "| key {} | a value long enough to stand alone as a row of its own |"
    rows = [row.format(i) for i in range(MAX_PARENT_CHARS // 40)]
    text = "# T\n\n| k | v |\n|---|---|\n" + "\n".join(rows) + "\n"
    doc = MarkdownChunker(table_rows=True).split(text)
    assert_chunks_valid(text, doc)
    assert len({c.parent_start for c in doc.chunks}) > 1  # the table is longer than one parent
    assert [c.content for c in doc.chunks[1:]] == rows[1:]
    assert {c.lead for c in doc.chunks[1:]} == {"| k | v |"} and doc.chunks[0].lead == ""
