"""Properties every strategy keeps, on generated markdown-like texts; strategy choice and validation.

The grammar marks each generated line as *required* (paragraph text, code inside fences) or *markup*
(headers, separator lines, fence delimiters). Every non-whitespace character of a required line must
lie inside some chunk: the garbage filter may drop only separator and header-only pieces, and a short
piece only when kept chunks already hold all of it.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_service.asciidoc_lines import asciidoc_headers
from rag_service.embed import HashingEmbedder
from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import CHILD, TEXT, ChunkedDocument, Chunker
from rag_service.ingest.chunkers import DEFAULT_SIZES, STRATEGIES, make_chunker, recommend_strategy
from rag_service.ingest.fingerprint import CHUNKING_VERSION, chunker_fingerprint
from rag_service.rst_lines import rst_headers
from rag_service.tokens import count_tokens

#: strategies for any prose text, with the garbage filter (``code`` and ``json``: test_structured_chunkers.py)
TEXT_STRATEGIES = tuple(s for s in STRATEGIES if s not in ("code", "json"))
#: the strategies whose chunks keep their first line's indentation (code; YAML's structure is its indentation)
INDENTED_STRATEGIES = ("code", "config")
#: a documented in-memory Embedder (rag_service.embed), so ``semantic`` needs no model here
EMBEDDER = HashingEmbedder()


def build(strategy: str, **kwargs: object) -> Chunker:
    """``make_chunker`` with the test embedder."""
    return make_chunker(strategy, embedder=EMBEDDER, **kwargs)  # type: ignore[arg-type]


PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

Line = tuple[str, bool]  # (line text, required)


def assert_chunks_valid(text: str, doc: ChunkedDocument, *, indented: bool = False) -> None:
    """Exact offsets, trimmed content, cl100k token counts, indices 0..n-1 in document order. ``indented``
    (``code``): a chunk may start with its first line's indentation, from the line's start."""
    previous_start = -1
    for i, chunk in enumerate(doc.chunks):
        assert chunk.chunk_index == i
        assert text[chunk.start_char : chunk.end_char] == chunk.content
        indent = len(chunk.content) - len(chunk.content.lstrip(" \t")) if indented else 0
        assert chunk.content and chunk.content[indent:] == chunk.content.strip()
        assert indent == 0 or chunk.start_char == 0 or text[chunk.start_char - 1] == "\n"
        assert chunk.token_count == count_tokens(chunk.content)
        assert chunk.start_char >= previous_start
        previous_start = chunk.start_char
        if chunk.chunk_type == CHILD:
            assert chunk.parent_start is not None and chunk.parent_end is not None
            assert text[chunk.parent_start : chunk.parent_end] == chunk.parent_content
            assert chunk.parent_start <= chunk.start_char <= chunk.end_char <= chunk.parent_end
            assert chunk.parent_content == chunk.parent_content.strip()
        else:
            assert chunk.chunk_type == TEXT
            assert chunk.parent_content is None


def outside_titles(strategy: str, text: str, required: list[int]) -> list[int]:
    """``required`` without the offsets in the titles of ``rst`` and ``asciidoc``: a line over ``---`` is a title
    there, shown as its section's header path as a markdown header is (and dropped with a section of no text)."""
    readers = {"rst": rst_headers, "asciidoc": asciidoc_headers}
    if strategy not in readers:
        return required
    titles = [(header.start, header.end) for header in readers[strategy](text)]
    return [i for i in required if not any(start <= i < end for start, end in titles)]


def uncovered(text: str, doc: ChunkedDocument, required: list[int]) -> list[int]:
    """The required offsets that lie in no chunk."""
    covered = bytearray(len(text))
    for chunk in doc.chunks:
        covered[chunk.start_char : chunk.end_char] = b"\x01" * (chunk.end_char - chunk.start_char)
    return [i for i in required if not covered[i]]


# --- the grammar -----------------------------------------------------------------------------------

_letters = st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789éßж漢字😀"))
words = st.lists(st.text(_letters, min_size=1, max_size=10), min_size=1, max_size=12)
punctuation = st.sampled_from(["", "", ".", ". ", "!", "?", ",", " e.g.", " Dr.", " 3.14"])


@st.composite
def paragraph(draw: st.DrawFn) -> list[Line]:
    lines = draw(st.lists(st.tuples(words, punctuation), min_size=1, max_size=4))
    indent = draw(st.sampled_from(["", "", " ", "\t"]))
    return [(indent + " ".join(ws) + p, True) for ws, p in lines]


@st.composite
def header(draw: st.DrawFn) -> list[Line]:
    level = draw(st.integers(1, 6))
    lead = draw(st.sampled_from(["", "", " ", "   "]))
    closing = draw(st.sampled_from(["", "", " #", " ###"]))
    return [(f"{lead}{'#' * level} {' '.join(draw(words))}{closing}", False)]


separator = st.sampled_from(["---", "===", "***", "* * *", "___", "#", "~~", "  - - -  ", "##"]).map(
    lambda s: [(s, False)]
)


@st.composite
def code_block(draw: st.DrawFn, *, closed: bool = True) -> list[Line]:
    fence = draw(st.sampled_from(["```", "~~~", "````", "```python"]))
    body = draw(
        st.lists(
            st.one_of(
                words.map(" ".join),
                words.map(lambda ws: "# " + " ".join(ws)),
                words.map(lambda ws: "## " + " ".join(ws)),
                st.just(""),
            ),
            max_size=5,
        )
    )
    lines = [(fence, False), *((line, True) for line in body)]
    closer = fence.rstrip("python")
    return [*lines, (closer, False)] if closed else lines


@st.composite
def table(draw: st.DrawFn) -> list[Line]:
    """A pipe table: header row, delimiter row, body rows (children are cut between its rows)."""
    columns = draw(st.integers(1, 3))
    cells = st.lists(words.map(" ".join), min_size=columns, max_size=columns)
    row = cells.map(lambda texts: "| " + " | ".join(texts) + " |")
    body = draw(st.lists(row, max_size=5))
    return [(draw(row), True), ("|" + "---|" * columns, False), *((line, True) for line in body)]


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[int]]:
    blocks = draw(st.lists(st.one_of(paragraph(), header(), separator, code_block(), table()), max_size=12))
    if draw(st.booleans()):
        blocks.append(draw(code_block(closed=False)))
    text_parts: list[str] = []
    required: list[int] = []
    offset = 0
    for block in blocks:
        for line, needed in block:
            if needed:
                required.extend(offset + i for i, ch in enumerate(line) if not ch.isspace())
            text_parts.append(line)
            offset += len(line)
            gap = draw(st.sampled_from(["\n", "\n", "\n\n", "\n\n\n", " \n", "\n  \n"]))
            text_parts.append(gap)
            offset += len(gap)
    return "".join(text_parts), required


def chunker_for(strategy: str, data: st.DataObject) -> tuple[Chunker, int]:
    """A chunker with drawn small sizes, and its chunk_size."""
    if strategy == "token":
        size = data.draw(st.integers(2, 48), label="chunk_size")
    else:
        size = data.draw(st.integers(12, 300), label="chunk_size")
    overlap = data.draw(st.integers(0, size - 1), label="chunk_overlap")
    min_chars = data.draw(st.integers(0, 80), label="min_chunk_chars")
    table_rows = data.draw(st.booleans(), label="table_rows")
    chunker = build(strategy, chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chars, table_rows=table_rows)
    return chunker, size


# --- properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", TEXT_STRATEGIES)
@PROPERTY_SETTINGS
@given(document=documents(), data=st.data())
def test_offsets_exact_and_no_text_lost(strategy: str, document: tuple[str, list[int]], data: st.DataObject) -> None:
    text, required = document
    chunker, size = chunker_for(strategy, data)
    doc = chunker.split(text)
    assert_chunks_valid(text, doc, indented=strategy in INDENTED_STRATEGIES)
    assert uncovered(text, doc, outside_titles(strategy, text, required)) == []
    if strategy != "token":
        assert all(len(c.content) <= size for c in doc.chunks)


@pytest.mark.parametrize("strategy", TEXT_STRATEGIES)
@PROPERTY_SETTINGS
@given(text=st.text(st.characters(codec="utf-8"), max_size=400), data=st.data())
def test_offsets_exact_on_any_text(strategy: str, text: str, data: st.DataObject) -> None:
    doc = chunker_for(strategy, data)[0].split(text)
    assert_chunks_valid(text, doc, indented=strategy in INDENTED_STRATEGIES)
    if not text.strip():
        assert doc == ChunkedDocument([], {})


@pytest.mark.parametrize("strategy", TEXT_STRATEGIES)
@PROPERTY_SETTINGS
@given(text=st.text(st.sampled_from(list("ab漢😀 \n\t.!?")), max_size=400), data=st.data())
def test_plain_text_is_never_dropped(strategy: str, text: str, data: st.DataObject) -> None:
    doc = chunker_for(strategy, data)[0].split(text)
    assert_chunks_valid(text, doc, indented=strategy in INDENTED_STRATEGIES)
    visible = outside_titles(strategy, text, [i for i, ch in enumerate(text) if not ch.isspace()])
    assert uncovered(text, doc, visible) == []
    if strategy not in ("rst", "asciidoc"):  # a title over ``!!!``/``+++`` and no text is dropped, as a markdown header
        assert doc.filtered_total == doc.filtered.get("too_short", 0)  # only overlap remnants go


@PROPERTY_SETTINGS
@given(document=documents(), data=st.data())
def test_markdown_children_lie_in_their_sections(document: tuple[str, list[int]], data: st.DataObject) -> None:
    text, _ = document
    doc = chunker_for("markdown", data)[0].split(text)
    parents: dict[tuple[int, int], dict[str, str]] = {}
    for chunk in doc.chunks:
        assert chunk.chunk_type == CHILD
        assert chunk.parent_start is not None and chunk.parent_end is not None
        assert chunk.parent_start <= chunk.start_char and chunk.end_char <= chunk.parent_end
        # all children of one parent share its headers; parents do not overlap
        assert parents.setdefault((chunk.parent_start, chunk.parent_end), chunk.headers) == chunk.headers
    spans = sorted(parents)
    assert all(a[1] <= b[0] for a, b in pairwise(spans))


# --- examples shared by every strategy ---------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("text", ["", " ", "\n\n\t \n", "\r\n"])
def test_empty_text_gives_no_chunks(strategy: str, text: str) -> None:
    assert build(strategy).split(text).chunks == []


@pytest.mark.parametrize("strategy", [*TEXT_STRATEGIES, "code"])
def test_short_document_yields_one_chunk(strategy: str) -> None:
    text = "\n  See the FAQ for details.  \n"
    doc = build(strategy).split(text)
    indent = "  " if strategy in INDENTED_STRATEGIES else ""  # code and config keep their first line's indentation
    assert [c.content for c in doc.chunks] == [f"{indent}See the FAQ for details."]
    assert doc.chunks[0].start_char == 3 - len(indent)


@pytest.mark.parametrize("strategy", TEXT_STRATEGIES)
def test_separator_only_document_gives_no_chunks(strategy: str) -> None:
    doc = build(strategy).split("---\n\n***\n\n===\n\n#\n")
    assert doc.chunks == []
    assert doc.filtered["separator"] >= 1 and doc.filtered_total == doc.filtered["separator"]


#: the strategies that give no header paths: a ``#`` line is text there (a comment, or a header whose words
#: would have no header path to live in)
PLAIN_STRATEGIES = ("recursive", "sentence", "character", "token", "semantic", "config")  # config: a comment


@pytest.mark.parametrize("strategy", [s for s in TEXT_STRATEGIES if s not in PLAIN_STRATEGIES])
def test_header_only_document_gives_no_chunks(strategy: str) -> None:
    headers = "=====\nTitle\n=====\n\nSub\n^^^\n\n----\n" if strategy == "rst" else "# Title\n\n## Sub\n\n---\n"
    doc = build(strategy).split(headers)
    assert doc.chunks == []
    assert doc.filtered["header_only"] >= 1


@pytest.mark.parametrize("strategy", PLAIN_STRATEGIES)
def test_strategies_without_header_paths_read_hash_lines_as_text(strategy: str) -> None:
    """``recursive`` chunks YAML, config files and plain text, where ``# ...`` is a comment: content. So do the
    other strategies without header paths."""
    doc = build(strategy).split("# Title\n\n## Sub\n\n---\n")
    shown = "# Title\n\n## Sub" if strategy == "config" else "# Title\n\n## Sub\n\n---"  # config: a YAML marker
    assert [c.content for c in doc.chunks] == [shown]
    assert doc.filtered["header_only"] == 0


# --- make_chunker, fingerprints, recommend_strategy ------------------------------------------------


def test_strategies_are_fixed() -> None:
    assert set(STRATEGIES) == {
        "character", "token", "sentence", "recursive", "markdown", "semantic", "html", "json", "latex", "rst",
        "asciidoc", "semantic-markdown", "code", "config",
    }  # fmt: skip


def test_unknown_strategy_names_it_and_the_valid_ones() -> None:
    with pytest.raises(ChunkingError, match=r"'semantik'.*character, token, .*, code, config, auto$"):
        make_chunker("semantik")


def test_semantic_without_an_embedder_is_a_clear_error() -> None:
    with pytest.raises(ChunkingError, match="semantic strategy needs an embedding model"):
        make_chunker("semantic")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_size": 0}, r"chunk_size \(0\) must be positive"),
        ({"chunk_size": -5}, r"chunk_size \(-5\) must be positive"),
        ({"chunk_overlap": -1}, r"chunk_overlap \(-1\) must be zero or positive"),
        ({"chunk_size": 200, "chunk_overlap": 300}, r"^chunk_overlap \(300\) must be smaller than chunk_size \(200\)$"),
        ({"chunk_size": 200, "chunk_overlap": 200}, r"chunk_overlap \(200\) must be smaller than chunk_size \(200\)"),
        ({"min_chunk_chars": -1}, r"min_chunk_chars \(-1\)"),
        ({"chunk_size": 2.5}, r"chunk_size \(2.5\) must be an integer"),
    ],
)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_invalid_sizes_are_rejected_with_their_values(strategy: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ChunkingError, match=message) as info:
        make_chunker(strategy, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    with pytest.raises(ChunkingError, match=message):
        chunker_fingerprint(strategy, **kwargs)  # type: ignore[arg-type]


def test_unknown_encoding_is_rejected() -> None:
    with pytest.raises(ChunkingError, match=r"'no_such_encoding'.*cl100k_base"):
        make_chunker("token", encoding="no_such_encoding")


def test_chunk_size_alone_gets_a_fitting_overlap() -> None:
    chunker = make_chunker("recursive", chunk_size=40)
    assert (chunker.chunk_size, chunker.chunk_overlap) == (40, 8)  # type: ignore[attr-defined]
    assert chunker_fingerprint("recursive", chunk_size=40) == f"recursive:40:8:50:v{CHUNKING_VERSION}"


def test_fingerprint_is_short_stable_and_tracks_settings() -> None:
    v = CHUNKING_VERSION
    assert chunker_fingerprint("markdown") == f"markdown:500:100:50:v{v}"
    assert chunker_fingerprint("markdown", chunk_size=500, chunk_overlap=100) == f"markdown:500:100:50:v{v}"
    assert chunker_fingerprint("recursive", min_chunk_chars=10) == f"recursive:500:100:10:v{v}"
    assert chunker_fingerprint("token") == f"token:256:32:50:cl100k_base:v{v}"
    assert chunker_fingerprint("token", encoding="o200k_base") == f"token:256:32:50:o200k_base:v{v}"
    assert chunker_fingerprint("sentence", encoding="o200k_base") == f"sentence:500:100:50:v{v}"


@pytest.mark.parametrize(
    ("name", "strategy"),
    [
        ("a.md", "markdown"),
        ("b.MARKDOWN", "markdown"),
        ("c.mdx", "markdown"),
        ("d.txt", "recursive"),
        ("e.html", "html"),
        ("f.rst", "rst"),
        ("f2.REST", "rst"),
        ("f3.adoc", "asciidoc"),
        ("README", "recursive"),
        ("g.py", "code"),
        ("h.tsx", "code"),
        ("i.sql", "code"),
        ("j.json", "json"),
        ("k.jsonl", "json"),
        ("l.tex", "latex"),
        ("m.ipynb", "markdown"),
        ("n.docx", "markdown"),
        ("o.pdf", "markdown"),
        ("p.yaml", "config"),
        ("q.yml", "config"),
        ("pyproject.toml", "config"),
        ("setup.cfg", "config"),  # INI sections as headers (audit 58c)
        ("tox.INI", "config"),
        ("nginx.conf", "recursive"),
        ("app.properties", "recursive"),
    ],
)
def test_recommend_strategy_for_a_path(name: str, strategy: str) -> None:
    assert recommend_strategy(Path("docs") / name) == strategy


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_defaults_are_the_documented_ones(strategy: str) -> None:
    chunker = build(strategy)
    expected = DEFAULT_SIZES[strategy]
    assert expected == ((256, 32) if strategy == "token" else (1500, 0) if strategy == "code" else
                        (500, 0) if strategy in ("json", "semantic") else (500, 100))  # fmt: skip
    assert (chunker.chunk_size, chunker.chunk_overlap, chunker.min_chunk_chars) == (*expected, 50)  # type: ignore[attr-defined]
