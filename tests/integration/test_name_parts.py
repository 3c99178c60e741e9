"""Code is found by the parts of its names (audit 56a D7, audit 56b D2): the parser keeps ``ds.repartition`` and
``ScalingConfig`` whole and drops ``<T>``, so ``repartition``, ``scaling config`` and a type parameter never met
them. Documentation keeps its names whole (its code blocks' names are the prose's words: docs/benchmarks.md,
"Session 57") and reads its bare ``<name>``s."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from rag_service.embed import HashingEmbedder
from rag_service.service import UniversalRAGService

CODE = [
    ("data.py", "", "def shuffle(ds):\n    return ds.repartition(8).write_parquet(path)\n"),
    ("train.py", "", "def workers():\n    return ScalingConfig(num_workers=4)\n"),
    ("encoder.js", "", "function encode(value) {\n  return this.getBitsBase2(value);\n}\n"),
    ("queue.ts", "", "function make(): Queue<Widget> {\n  return new Queue();\n}\n"),
    ("other.py", "", "def kites():\n    return 'only kites and tides and gardens'\n"),
]
DOCS = [
    ("guide.md", "Guide", "# Shuffling\n\nCall `ds.repartition(8)` on a dataset before writing it out.\n"),
    ("client.md", "Client", "# Connect\n\nRun `ray.init(\"ray://<head_node_host>:10001\")` from your laptop.\n"),
]


@pytest.fixture
def service(db, settings) -> UniversalRAGService:
    svc = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    assert svc.index_texts(CODE, collection="code", strategy="code").added == len(CODE)
    assert svc.index_texts(DOCS, collection="docs", strategy="markdown").added == len(DOCS)
    return svc


def _keyword_hits(service: UniversalRAGService, query: str, collection: str = "code") -> list[str]:
    result = service.retrieve(query, "search", collection=collection, vector_weight=0.0, keyword_weight=1.0)
    return [chunk.source for chunk in result.chunks]


@pytest.mark.parametrize(
    ("query", "source"),
    [
        ("repartition", "data.py"),  # a part of a dotted name
        ("ds.repartition", "data.py"),  # the name as written
        ("write parquet", "data.py"),  # a method after a call
        ("how do I set the scaling config?", "train.py"),  # the parts of a CamelCase word
        ("scalingconfig", "train.py"),  # the word whole, typed in lower case
        ("getBitsBase2", "encoder.js"),  # a method named without its object
        ("bits base", "encoder.js"),
        ("widget", "queue.ts"),  # a type parameter
        ('"ds.repartition(8)"', "data.py"),  # a quoted phrase stands where it was written
    ],
)
def test_code_is_found_by_its_names_parts_and_as_written(service, query, source):
    assert _keyword_hits(service, query)[:1] == [source], query


def test_documentation_keeps_its_names_whole_and_reads_its_bare_tags(service):
    assert _keyword_hits(service, "ds.repartition", "docs") == ["guide.md"]
    assert _keyword_hits(service, "repartition", "docs") == []  # a documentation's names are not cut
    assert _keyword_hits(service, "head_node_host", "docs") == ["client.md"]  # a placeholder, a tag to the parser


def test_a_section_context_reads_its_bare_tags(service, connection):
    held = connection.execute(
        text("SELECT count(*) FROM context_terms WHERE collection = 'docs' AND lexeme IN ('head', 'node', 'host')")
    ).scalar_one()
    assert held == 3  # the context BM25 (a section's words) reads the placeholder as the chunk does
