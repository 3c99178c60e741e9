"""The structure-aware strategies on generated inputs: json, code, latex; and examples for html,
semantic-markdown and semantic. Offsets are exact everywhere (``text[start:end] == content``)."""

from __future__ import annotations

import json
import keyword
import re
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_service.embed import HashingEmbedder
from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import ChunkedDocument
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.latex import math_spans
from rag_service.tokens import count_tokens
from tests.unit.test_chunker_properties import PROPERTY_SETTINGS, assert_chunks_valid, uncovered

# --- json ------------------------------------------------------------------------------------------

_keys = st.text(st.sampled_from(list("abcxyz_ 9.é\"\\")), min_size=0, max_size=6)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.sampled_from(list("ab c\n\"\\漢😀")), max_size=30),
)  # fmt: skip
json_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_keys, inner, max_size=6), max_leaves=40
)


def resolve(document: Any, path: str) -> Any:
    """Follow a chunk's JSON path (``$.a["b c"][3]``) in the parsed document."""
    assert path.startswith("$")
    node, rest = document, path[1:]
    step = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
    while rest:
        match = step.match(rest)
        assert match, rest
        if match[1] is not None:
            node = node[match[1]]
        elif match[2] is not None:
            node = node[int(match[2])]
        else:
            node = node[json.loads(match[3])]
        rest = rest[match.end() :]
    return node


_STEP = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
_ARRAY_RUN = re.compile(r"^(.*)\[(\d+)\.\.(\d+)\]$")
_OBJECT_RUN = re.compile(r"^(.*) \(\+(\d+) more\)$")


def _parent(path: str) -> str:
    """``path`` without its last step."""
    ends, rest = [1], path[1:]
    while rest:
        match = _STEP.match(rest)
        assert match, rest
        ends.append(ends[-1] + match.end())
        rest = rest[match.end() :]
    return path[: ends[-2]]


def at_path(document: Any, content: str, path: str) -> tuple[Any, Any]:
    """What a chunk's path names in the parsed document, and the chunk parsed (a run of members inside its
    container's brackets)."""
    if match := _ARRAY_RUN.match(path):
        first, last = int(match[2]), int(match[3])
        assert last > first
        return resolve(document, match[1])[first : last + 1], json.loads(f"[{content}]")
    if match := _OBJECT_RUN.match(path):
        run = json.loads(f"{{{content}}}")
        assert len(run) == int(match[2]) + 1
        parent = resolve(document, _parent(match[1]))
        return {key: parent[key] for key in run}, run
    return resolve(document, path), json.loads(content)


def leaves(value: Any) -> int:
    if isinstance(value, dict):
        return sum(leaves(v) for v in value.values())
    if isinstance(value, list):
        return sum(leaves(v) for v in value)
    return 1


@PROPERTY_SETTINGS
@given(value=json_values, indent=st.sampled_from([None, 0, 2]), size=st.integers(8, 200))
def test_json_chunks_are_valid_json_at_their_path(value: Any, indent: int | None, size: int) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    doc = make_chunker("json", chunk_size=size).split(text)
    assert_chunks_valid(text, doc)
    assert [c.start_char for c in doc.chunks] == sorted(c.start_char for c in doc.chunks)
    assert all(a.end_char <= b.start_char for a, b in zip(doc.chunks, doc.chunks[1:], strict=False))
    parsed = []
    for chunk in doc.chunks:
        expected, found = at_path(value, chunk.content, chunk.headers["h1"])
        assert expected == found
        parsed.append(found)
    # every leaf value is in exactly one chunk (empty containers count as one leaf)
    assert sum(leaves(found) for found in parsed) == leaves(value)


@PROPERTY_SETTINGS
@given(records=st.lists(json_values, min_size=2, max_size=6), size=st.integers(8, 120))
def test_jsonl_paths_name_the_line(records: list[Any], size: int) -> None:
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n"
    doc = make_chunker("json", chunk_size=size).split(text)
    assert_chunks_valid(text, doc)
    for chunk in doc.chunks:
        line, path = chunk.headers["h1"].split(": ", 1)
        record = records[int(line.removeprefix("line ")) - 1]
        expected, found = at_path(record, chunk.content, path)
        assert expected == found


def test_json_chunk_example() -> None:
    text = '{\n  "name": "rag",\n  "servers": [\n    {"host": "a.example", "port": 5432},\n    {"host": "b"}\n  ]\n}'
    doc = make_chunker("json", chunk_size=40).split(text)
    assert [(c.header_path, c.content) for c in doc.chunks] == [
        ("$.name", '"rag"'),
        ("$.servers[0]", '{"host": "a.example", "port": 5432}'),
        ("$.servers[1]", '{"host": "b"}'),
    ]


def test_consecutive_members_that_fit_together_are_one_chunk() -> None:
    # a 300-number vector was 300 chunks of one number each
    document = {"model": "m", "description": "the widget's vector", "vector": [i / 1000 for i in range(300)]}
    doc = make_chunker("json", chunk_size=500).split(json.dumps(document, indent=2))
    paths = [c.header_path for c in doc.chunks]
    assert paths[0] == "$.model (+1 more)" and doc.chunks[0].content.startswith('"model": "m",')
    assert paths[1].startswith("$.vector[0..") and paths[-1].endswith("..299]") and len(doc.chunks) <= 9


def test_json_strategy_on_text_that_is_not_json() -> None:
    with pytest.raises(ChunkingError, match=r"not valid JSON at line 2 column 7 \(.*\); fix it or use another"):
        make_chunker("json").split('{"a": 1,\n "b": nope}')


@pytest.mark.parametrize(
    "text",
    [
        "[" + ",".join(str(i % 97) for i in range(100_000)) + "]",  # a long flat array
        "[" * 400 + ",".join(["1"] * 150_000) + "]" * 400,  # nested 400 deep around it
        "[" + ",".join(["[" * 200 + "1" + "]" * 200] * 400) + "]",  # many values nested 200 deep
    ],
    ids=["flat", "nested-around", "nested-many"],
)
def test_json_is_chunked_in_memory_a_small_multiple_of_its_size(text: str) -> None:
    """The value tree held an object and two lists per value: ~150-230 bytes a character at the peak (a 20 MiB
    file ~4 GB); members are offsets in arrays now and a container that fits is its span alone."""
    import tracemalloc

    chunker = make_chunker("json")
    count_tokens("loaded")  # the tokenizer's tables, loaded once per process, are not the split's
    tracemalloc.start()
    try:
        doc = chunker.split(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    kept = sum(sys.getsizeof(c) + sys.getsizeof(c.content) + sys.getsizeof(c.headers) for c in doc.chunks)
    assert (peak - kept) / len(text) < 30, f"{(peak - kept) / len(text):.0f} bytes a character beyond the chunks"


def test_deeply_nested_json_is_chunked_without_the_collector_traversing_its_tree() -> None:
    """The cyclic collector ran again and again over the growing value tree, which has no cycles: 4 MB of arrays
    nested 400 deep took 17 s to chunk, 3.4 s without it. Counted as work: no collection during the split."""
    import gc

    text = "[" + ",".join(["[" * 400 + "1" + "]" * 400] * 300) + "]"
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    chunker = make_chunker("json")  # building it may meet a collection: only the split is counted
    gc.callbacks.append(count)
    try:
        doc = chunker.split(text)
    finally:
        gc.callbacks.remove(count)
    assert collections == []
    assert gc.isenabled()
    assert len(doc.chunks) == 300 and doc.chunks[1].headers["h1"].startswith("$[1][0]")


# --- code ------------------------------------------------------------------------------------------

_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))


@st.composite
def python_function(draw: st.DrawFn, indent: str = "") -> tuple[str, str]:
    name = draw(_names)
    body = draw(st.lists(st.tuples(_names, st.integers(0, 10**6)), min_size=1, max_size=8))
    decorator = draw(st.sampled_from(["", "", f"{indent}@staticmethod\n"]))
    lines = [f"{indent}    {var} = {num}" for var, num in body]
    return name, f"{decorator}{indent}def {name}(x):\n" + "\n".join(lines) + f"\n{indent}    return x\n"


@st.composite
def python_module(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A module of imports, functions and classes; returns the text and the names of definitions."""
    parts = ['"""Module docstring."""\n', "import os\n"]
    names: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            name, code = draw(python_function())
            parts.append(code)
            names.append(name)
        else:
            cls = draw(_names).capitalize()
            methods = draw(st.lists(python_function(indent="    "), min_size=1, max_size=4))
            parts.append(f"class {cls}:\n    attr = 1\n\n" + "\n".join(code for _, code in methods))
            names.append(cls)
            names.extend(name for name, _ in methods)
        parts.append(draw(st.sampled_from(["\n", "\n\n", "\nCONSTANT = 3\n\n"])))
    return "\n".join(parts), names


@PROPERTY_SETTINGS
@given(module=python_module(), size=st.integers(40, 600))
def test_python_definitions_are_whole_where_they_fit(module: tuple[str, list[str]], size: int) -> None:
    text, _ = module
    doc = make_chunker("code", source="pkg/mod.py", chunk_size=size).split(text)
    assert_chunks_valid(text, doc, indented=True)
    assert uncovered(text, doc, [i for i, ch in enumerate(text) if not ch.isspace()]) == []
    assert all(len(c.content) <= size for c in doc.chunks)
    assert all(c.headers["h1"] == "mod" for c in doc.chunks)
    for match in re.finditer(r"^( *)(?:@staticmethod\n *)?def (\w+)\(x\):\n(?:\1    .*\n)*", text, re.MULTILINE):
        start, end = match.start(), match.end() - 1  # chunks keep the first line's indent, not the last newline
        if end - start <= size and not _in_whole_class(text, doc, start):
            holders = [c for c in doc.chunks if c.start_char <= start and end <= c.end_char]
            assert len(holders) == 1, match[0]
            assert holders[0].header_path.endswith(match[2])


def _in_whole_class(text: str, doc: ChunkedDocument, start: int) -> bool:
    """Whether the definition at ``start`` is a method inside a class that is one chunk."""
    return any(c.start_char <= start < c.end_char and c.content.startswith("class ") for c in doc.chunks)


def test_python_header_path_module_class_function() -> None:
    text = (
        "import os\n\n\nclass AgentFactory:\n    \"\"\"Builds agents.\"\"\"\n\n"
        + "".join(f"    def method_{i}(self):\n        return {i} + {i} * {i}\n\n" for i in range(30))
        + "\ndef create_agent(name):\n    return AgentFactory()\n"
    )
    doc = make_chunker("code", source="src/agents/factory.py", chunk_size=200).split(text)
    assert_chunks_valid(text, doc, indented=True)
    paths = [c.header_path for c in doc.chunks]
    assert paths[0] == "factory"
    assert paths[1] == "factory > AgentFactory > method_0"  # the class line and docstring go with its first method
    assert doc.chunks[1].content.startswith('class AgentFactory:\n    """Builds agents."""\n\n    def method_0')
    assert "factory > AgentFactory > method_7" in paths
    assert paths[-1] == "factory > create_agent"
    assert doc.chunks[-1].content == "def create_agent(name):\n    return AgentFactory()"


@pytest.mark.parametrize(
    ("source", "size", "text", "expected"),
    [
        (
            "Store.java",
            70,
            "package x;\n\npublic class Store {\n    private int size;\n\n"
            "    public int size() {\n        return size;\n    }\n\n"
            "    public void clear() {\n        size = 0;\n    }\n}\n",
            ["Store > Store", "Store > Store > size", "Store > Store > clear"],  # `package x;` joins the class
        ),
        (
            "server.go",
            40,
            "package main\n\nimport \"fmt\"\n\nfunc handle(w int) {\n\tfmt.Println(w)\n}\n\n"
            "func main() {\n\thandle(1)\n}\n",
            ["server", "server > handle", "server > main"],
        ),
        (
            "schema.sql",
            70,
            "CREATE TABLE users (\n  id serial PRIMARY KEY,\n  email text NOT NULL\n);\n\n"
            "CREATE INDEX users_email ON users (email);\n",
            ["schema > users", "schema > users_email"],
        ),
        (
            "api.proto",
            70,
            'syntax = "proto3";\n\nmessage SearchRequest {\n  string query = 1;\n  int32 page = 2;\n}\n\n'
            "service Search {\n  rpc Find(SearchRequest) returns (SearchReply);\n}\n",
            ["api", "api > SearchRequest", "api > Search"],
        ),
        (
            "cart.ex",
            50,
            "defmodule Shop.Cart do\n  def add(cart, item) do\n    [item | cart]\n  end\n\n"
            "  defp total(cart) do\n    Enum.sum(cart)\n  end\nend\n",
            ["cart > Shop.Cart", "cart > Shop.Cart > add", "cart > Shop.Cart > total"],
        ),
        (
            "init.lua",
            60,
            'local M = {}\n\nfunction M.greet(name)\n  return "hi " .. name\nend\n\n'
            'function M.bye(name)\n  return "bye " .. name\nend\n\nreturn M\n',
            ["init", "init > M.greet", "init > M.bye"],
        ),
    ],
)
def test_other_languages_cut_at_definitions(source: str, size: int, text: str, expected: list[str]) -> None:
    doc = make_chunker("code", source=source, chunk_size=size).split(text)
    assert_chunks_valid(text, doc, indented=True)
    assert uncovered(text, doc, [i for i, ch in enumerate(text) if not ch.isspace()]) == []
    assert [c.header_path for c in doc.chunks][-len(expected) :] == expected


@pytest.mark.parametrize("source", ["a.py", "a.js", "a.rs", "a.sql", "a.sh", "unknown"])
@PROPERTY_SETTINGS
@given(text=st.text(st.sampled_from(list("def class fn(x){};:\n\t =漢😀#\"'")), max_size=400), data=st.data())
def test_code_offsets_exact_on_any_text(source: str, text: str, data: st.DataObject) -> None:
    size = data.draw(st.integers(5, 200))
    overlap = data.draw(st.integers(0, size - 1))
    doc = make_chunker("code", source=source, chunk_size=size, chunk_overlap=overlap, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, doc, indented=True)
    assert uncovered(text, doc, [i for i, ch in enumerate(text) if not ch.isspace()]) == []


def test_a_python_module_too_large_to_parse_is_split_by_its_definition_lines() -> None:
    """``ast`` held 150-230 bytes per character of a generated module (10 MB: 1.9 GB); past ``MAX_PARSED_CHARS``
    a module is split as other languages are, in a few dozen bytes per character."""
    import tracemalloc

    from rag_service.ingest.code import MAX_PARSED_CHARS

    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(MAX_PARSED_CHARS // 30))
    assert len(text) > MAX_PARSED_CHARS
    tracemalloc.start()
    try:
        doc = make_chunker("code", source="gen.py").split(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60 * len(text), f"{peak / len(text):.0f} bytes per character"
    assert_chunks_valid(text, doc, indented=True)
    assert doc.chunks[0].content.startswith("def f0(x):") and doc.chunks[0].header_path == "gen > f0"


# --- latex -----------------------------------------------------------------------------------------

_words = st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=1, max_size=12).map(" ".join)
_math = st.one_of(
    _words.map(lambda w: f"\\begin{{equation}}\n  {w} = {w}\n\\end{{equation}}"),
    _words.map(lambda w: f"\\begin{{align*}}\n  a &= {w} \\\\\n  b &= c\n\\end{{align*}}"),
    _words.map(lambda w: f"\\[ {w} \\]"),
    _words.map(lambda w: f"$$ {w} $$"),
)


@st.composite
def latex_document(draw: st.DrawFn) -> str:
    blocks = ["\\documentclass{article}\n\\begin{document}"]
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["section", "subsection", "para", "para", "math"]))
        if kind == "math":
            blocks.append(draw(_math))
        elif kind == "para":
            blocks.append(draw(_words) + ". " + draw(_words) + ".")
        else:
            blocks.append(f"\\{kind}{{{draw(_words)}}}")
    blocks.append("\\end{document}")
    return "\n\n".join(blocks) + "\n"


@PROPERTY_SETTINGS
@given(text=latex_document(), size=st.integers(20, 300), data=st.data())
def test_latex_never_splits_math(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    doc = make_chunker("latex", chunk_size=size, chunk_overlap=overlap, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, doc)
    assert uncovered(text, doc, [i for i, ch in enumerate(text) if not ch.isspace()]) == []
    for start, end in math_spans(text):
        for chunk in doc.chunks:
            inside = start < chunk.start_char < end or start < chunk.end_char < end
            assert not inside, (text[start:end], chunk.content)


def test_latex_sections_are_headers() -> None:
    text = (
        "\\section{Method}\nWe chunk documents by section and never split an equation.\n\n"
        "\\subsection*{Loss}\nThe loss is\n\\begin{equation}\n  L = \\sum_i (y_i - \\hat y_i)^2\n\\end{equation}\n"
    )
    doc = make_chunker("latex", chunk_size=60, chunk_overlap=0).split(text)
    assert_chunks_valid(text, doc)
    assert doc.chunks[0].header_path == "Method"
    assert "\\begin{equation}\n  L = \\sum_i (y_i - \\hat y_i)^2\n\\end{equation}" in doc.chunks[-1].content
    assert doc.chunks[-1].header_path == "Method > Loss"


# --- html, semantic-markdown, semantic --------------------------------------------------------------

SECTIONS = "# Guide\n\nIntro text.\n\n## Install\n\nRun pip.\n\n## Use\n\nCall it.\n\n### Tips\n\n" + "Long tip. " * 30


def test_semantic_markdown_merges_whole_sections_while_they_fit() -> None:
    doc = make_chunker("semantic-markdown", chunk_size=120, chunk_overlap=20).split(SECTIONS)
    assert_chunks_valid(SECTIONS, doc)
    first = doc.chunks[0]
    assert first.content.startswith("# Guide") and first.content.endswith("Call it.")
    assert first.header_path == "Guide"
    assert all(c.header_path == "Guide > Use > Tips" for c in doc.chunks[1:])
    assert all(len(c.content) <= 120 for c in doc.chunks)


def test_html_sections_are_parents_with_h1_to_h6() -> None:
    text = "# A\n\nalpha text\n\n###### F\n\nfoxtrot text\n\n## B\n\nbravo text"
    doc = make_chunker("html", min_chunk_chars=0).split(text)
    assert_chunks_valid(text, doc)
    assert [(c.header_path, c.parent_content) for c in doc.chunks] == [
        ("A", "# A\n\nalpha text"),
        ("A > F", "###### F\n\nfoxtrot text"),
        ("A > B", "## B\n\nbravo text"),
    ]


def test_semantic_breaks_where_the_topic_changes() -> None:
    cats = "Cats purr softly at night. Cats purr when cats sleep. Cats purr near cats. "
    rust = "Rust compilers check borrow lifetimes. Rust compilers reject dangling borrow lifetimes. "
    text = cats * 2 + rust * 2
    doc = make_chunker("semantic", embedder=HashingEmbedder(), chunk_size=400, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, doc)
    assert [("Cats" in c.content, "Rust" in c.content) for c in doc.chunks] == [(True, False), (False, True)]


def test_the_collector_is_back_as_it_was_after_splits_that_overlap() -> None:
    """Each split turned the process's collector off and back on: one ending under another turned it on early."""
    import gc
    import threading

    from rag_service.ingest import jsonchunk

    started, release = threading.Event(), threading.Event()
    assert gc.isenabled()

    def slow_split() -> None:
        jsonchunk._pause_collector()
        started.set()
        release.wait(5)
        jsonchunk._resume_collector()

    other = threading.Thread(target=slow_split)
    other.start()
    started.wait(5)
    jsonchunk._pause_collector()
    assert not gc.isenabled()
    jsonchunk._resume_collector()
    assert not gc.isenabled(), "the other split still runs"
    release.set()
    other.join(5)
    assert gc.isenabled()
