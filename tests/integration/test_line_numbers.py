"""Results carry their lines (audit 56b D13): ``start_line``/``end_line`` (1-based, inclusive) stored with each chunk
at ingest, the text output cites a code result as ``path:L12-40`` and fences it with its language; chunks stored
before lines were say unknown (None), never a wrong number."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from rag_service.db.documents import INDEX_FORMAT
from rag_service.embed import HashingEmbedder
from rag_service.result import RetrievedChunk
from rag_service.service import UniversalRAGService

NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def _module(newline: str = "\n", *, trailing: bool = True) -> str:
    """A module of eight functions, each too long to share a ``code`` chunk (1,500 characters) with two others."""
    parts: list[str] = []
    for name in NAMES:
        parts += [f"def {name}_handler(value):", f'    """Handle {name} values."""']
        parts += [f"    {name}_{i} = value + {i}  # step {i} of the {name} handler" for i in range(12)]
        parts += [f"    return {name}_11", "", ""]
    body = newline.join(parts).rstrip()
    return body + newline if trailing else body


@pytest.fixture
def service(db, settings) -> UniversalRAGService:
    return UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)


def _hits(service: UniversalRAGService, query: str, collection: str = "code") -> list[RetrievedChunk]:
    return service.retrieve(query, "search", collection=collection, vector_weight=0.0, keyword_weight=1.0).chunks


def _check_lines(chunk: RetrievedChunk, stored: str) -> None:
    """The chunk's lines are those its offsets span in the stored text (LF), and hold its text."""
    assert chunk.start_line == stored.count("\n", 0, chunk.start_char) + 1
    assert chunk.end_line == stored.count("\n", 0, max(chunk.end_char - 1, chunk.start_char)) + 1
    shown = "\n".join(stored.split("\n")[chunk.start_line - 1 : chunk.end_line])
    assert chunk.content.strip() in shown


@pytest.mark.parametrize(("newline", "trailing"), [("\n", True), ("\r\n", True), ("\n", False), ("\r\n", False)])
def test_a_code_file_s_chunks_know_their_lines_first_middle_and_last(service, tmp_path: Path, newline, trailing):
    source = tmp_path / "app.py"
    source.write_bytes(_module(newline, trailing=trailing).encode())
    assert service.index_paths([source], collection="code").added == 1
    stored = _module("\n", trailing=trailing)  # CRLF is stored as LF, one line for one line
    seen = set()
    for name in NAMES:
        chunk = next(c for c in _hits(service, f"{name}_handler") if f"def {name}_handler" in c.content)
        _check_lines(chunk, stored)
        seen.add((chunk.start_line, chunk.end_line))
        assert (chunk.match_start_line, chunk.match_end_line) == (chunk.start_line, chunk.end_line)
    lines = sorted(seen)
    assert lines[0][0] == 1  # the first chunk starts on the first line
    assert lines[-1][1] == len(stored.rstrip("\n").split("\n"))  # and the last ends on the last, newline or not
    assert len(lines) > 2  # a middle chunk was checked too


def test_the_text_output_cites_code_by_lines_in_a_fence_and_the_json_has_them(service):
    module = _module()
    service.index_texts([("src/app.py", "", module)], collection="code", strategy="code")
    result = service.retrieve("delta_handler", "search", collection="code", vector_weight=0.0, keyword_weight=1.0)
    chunk = next(c for c in result.chunks if "def delta_handler" in c.content)
    body = chunk.content.strip()
    top = module.count("\n", 0, module.index(body, chunk.start_char)) + 1
    bottom = top + body.count("\n")
    assert f"§ src/app.py:L{top}-{bottom}" in result.formatted_context
    assert f"```python\n{body}\n```" in result.formatted_context
    data = next(c for c in result.to_dict()["chunks"] if c["chunk_id"] == chunk.chunk_id)
    assert (data["start_line"], data["end_line"]) == (chunk.start_line, chunk.end_line)
    assert data["match_start_line"] == chunk.start_line
    assert "start_line" not in data["metadata"]  # stored there, shown once


def test_prose_keeps_its_citation_and_gets_no_fence_but_its_lines(service):
    para = "This paragraph says a few plain things about the topic at hand, in words.\n"
    install = "".join(f"Step {i}: run the installer with care.\n{para}\n" for i in range(12))
    usage = "".join(f"Use {i}: call the gadget.\n{para}\n" for i in range(12)) + "Last: call the widget.\n"
    doc = f"# Guide\n\nIntro words.\n\n## Install\n\n{install}## Usage\n\n{usage}"
    service.index_texts([("guide.md", "Guide", doc)], collection="docs", strategy="markdown")
    result = service.retrieve(
        "widget", "search", collection="docs", vector_weight=0.0, keyword_weight=1.0, return_parents=True
    )
    chunk = result.chunks[0]
    assert chunk.is_parent and chunk.start_char > 0 and chunk.match_start > chunk.start_char
    assert chunk.start_line == doc.count("\n", 0, chunk.start_char) + 1
    assert chunk.end_line == doc.count("\n", 0, chunk.end_char - 1) + 1
    assert chunk.match_start_line == doc.count("\n", 0, chunk.match_start) + 1
    assert "```" not in result.formatted_context and ":L" not in result.formatted_context
    assert "§ Guide > Usage (relevance" in result.formatted_context


def test_chunks_stored_before_lines_say_unknown(service, connection):
    service.index_texts([("src/app.py", "", _module())], collection="code", strategy="code")
    connection.execute(text("UPDATE document_chunks SET metadata = metadata - 'start_line' - 'end_line'"))
    result = service.retrieve("delta_handler", "search", collection="code", vector_weight=0.0, keyword_weight=1.0)
    chunk = result.chunks[0]
    assert (chunk.start_line, chunk.end_line, chunk.match_start_line) == (None, None, None)
    assert result.to_dict()["chunks"][0]["start_line"] is None
    assert "§ src/app.py · " in result.formatted_context or "§ src/app.py (relevance" in result.formatted_context
    assert ":L" not in result.formatted_context


def test_the_next_run_gives_chunks_stored_before_lines_their_lines(service, connection):
    """``INDEX_FORMAT`` tsv5: a document indexed under tsv4 is rewritten by the next run (its vectors reused)."""
    service.index_texts([("src/app.py", "", _module())], collection="code", strategy="code")
    connection.execute(text("UPDATE document_chunks SET metadata = metadata - 'start_line' - 'end_line'"))
    before = {"now": f":{INDEX_FORMAT}", "then": ":tsv4"}
    connection.execute(text("UPDATE documents SET chunker = replace(chunker, :now, :then)"), before)
    assert service.index_texts([("src/app.py", "", _module())], collection="code", strategy="code").updated == 1
    chunk = _hits(service, "delta_handler")[0]
    _check_lines(chunk, _module())
