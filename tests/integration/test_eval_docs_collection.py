"""A documentation set's eval collection holds exactly its current ``docs/``; sources map to its files exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_service.embed import HashingEmbedder
from rag_service.errors import DocumentReadError
from rag_service.evaluation.docrun import docset_collection, index_docset, section_mapper
from rag_service.evaluation.docset import load_docset
from rag_service.service import UniversalRAGService

ERRORS = "# Errors\n\nTimeouts and retries of the client explained.\n\n## Codes\n\nCode 42 means the quota ran out.\n"
GUIDE = "# Guide\n\nInstall the package, then run the server with its default settings.\n"


def make_set(root: Path, pages: dict[str, str]) -> Path:
    (root / "docs").mkdir(parents=True)
    for name, text in pages.items():
        (root / "docs" / name).write_text(text)
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "what does code 42 mean"}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\terrors.md#2\t1\n")
    return root


def stored_sources(service: UniversalRAGService, collection: str) -> set[str]:
    from rag_service.db.documents import documents_in_scope

    with service.db.transaction() as session:
        return {d.source for d in documents_in_scope(session, collection=collection, prefixes=None)}


def test_eval_collection_holds_exactly_the_current_docs(fresh_database, settings, tmp_path):
    service = UniversalRAGService(settings, database=fresh_database, embedder=HashingEmbedder(), reranker=None)
    ev = make_set(tmp_path / "a" / "ev", {"errors.md": ERRORS, "guide.md": GUIDE})
    other = make_set(tmp_path / "b" / "ev", {"errors.md": ERRORS.replace("42", "43")})
    collection = docset_collection(ev)
    assert collection == docset_collection(other) == "docs-ev"  # the name existing eval data is stored under

    first = index_docset(service, load_docset(ev), collection=collection, strategy=None, progress=False)
    assert first.added == 2
    again = index_docset(service, load_docset(ev), collection=collection, strategy=None, progress=False)
    assert again.unchanged == 2 and again.added == 0  # a re-run only queries

    index_docset(service, load_docset(other), collection=collection, strategy=None, progress=False)
    assert stored_sources(service, collection) == {(other / "docs" / "errors.md").resolve().as_posix()}

    (ev / "docs" / "guide.md").unlink()  # a file removed from docs/ is no longer indexed
    back = index_docset(service, load_docset(ev), collection=collection, strategy=None, progress=False)
    assert back.deleted == 1
    assert stored_sources(service, collection) == {(ev / "docs" / "errors.md").resolve().as_posix()}


def test_mapper_takes_only_this_sets_sources(tmp_path):
    ev = make_set(tmp_path / "a" / "ev", {"errors.md": ERRORS})
    mapper = section_mapper(load_docset(ev), max_bytes=1 << 20)
    own = (ev / "docs" / "errors.md").resolve().as_posix()
    assert mapper.section_id(own, 60) == "errors.md#2"
    assert mapper.section_id((tmp_path / "b" / "ev" / "docs" / "errors.md").as_posix(), 60) is None
    assert mapper.section_id("errors.md", 0) is None


def test_qrels_must_name_a_section_the_file_has(tmp_path):
    ev = make_set(tmp_path / "ev", {"errors.md": ERRORS + "\n## Retries\n\nBack off.\n", "intro.md": "Intro.\n# A\n"})
    qrels = ev / "qrels" / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\terrors.md#9\t1\n")
    with pytest.raises(DocumentReadError) as past_the_end:
        load_docset(ev)
    expected = "qrels/test.tsv: 'errors.md#9' (query q1): errors.md has sections 1-3; fix the row"
    assert str(past_the_end.value) == expected
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\terrors.md#0\t1\n")  # starts with a header: no section 0
    with pytest.raises(DocumentReadError, match=r"'errors.md#0' \(query q1\): errors.md has sections 1-3; fix"):
        load_docset(ev)
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\tintro.md#0\t1\nq1\tintro.md#1\t1\nq1\terrors.md#3\t1\n")
    assert load_docset(ev).qrels == {"q1": {"intro.md#0": 1, "intro.md#1": 1, "errors.md#3": 1}}
