"""The markdown strategy: sections at h1–h4 outside fences, header stacks, parents, tiny sections."""

from __future__ import annotations

from itertools import pairwise

from rag_service.ingest.children import MAX_PARENT_CHARS
from rag_service.ingest.chunk import CHILD
from rag_service.ingest.markdown import MarkdownChunker
from tests.complexity import assert_linear
from tests.unit.test_chunker_properties import assert_chunks_valid

GUIDE = """\
# Guide

Intro paragraph for the guide, comfortably longer than fifty characters.

## Install

Install with pip; this paragraph also passes the fifty character minimum.

### Linux

On Linux use the package manager, the easiest route for most readers.

## Usage ##

Call the service from Python with a collection name and the query text.
"""


def split(text: str) -> list[tuple[str, dict[str, str]]]:
    doc = MarkdownChunker().split(text)
    assert_chunks_valid(text, doc)
    return [(c.content, c.headers) for c in doc.chunks]


def test_sections_keep_their_header_and_header_stack() -> None:
    doc = MarkdownChunker().split(GUIDE)
    assert_chunks_valid(GUIDE, doc)
    assert [c.headers for c in doc.chunks] == [
        {"h1": "Guide"},
        {"h1": "Guide", "h2": "Install"},
        {"h1": "Guide", "h2": "Install", "h3": "Linux"},
        {"h1": "Guide", "h2": "Usage"},  # a new h2 clears h3
    ]
    assert [c.content.split("\n")[0] for c in doc.chunks] == ["# Guide", "## Install", "### Linux", "## Usage ##"]
    assert doc.chunks[2].header_path == "Guide > Install > Linux"
    assert all(c.chunk_type == CHILD and c.parent_content == c.content for c in doc.chunks)
    linux = doc.chunks[2]
    assert (linux.start_char, linux.end_char) == (GUIDE.index("### Linux"), GUIDE.index("\n\n## Usage"))
    assert doc.filtered == {"separator": 0, "header_only": 0, "too_short": 0}


def test_long_section_children_share_the_parent_section() -> None:
    body = " ".join(f"Sentence number {i} adds a little more text." for i in range(40))
    after = "## After\n\nThe section after the long one, also over fifty characters."
    text = f"# Title\n\nShort intro that is still over fifty characters long.\n\n## Long\n\n{body}\n\n{after}"
    doc = MarkdownChunker(chunk_size=200, chunk_overlap=60).split(text)
    assert_chunks_valid(text, doc)
    long_children = [c for c in doc.chunks if c.headers.get("h2") == "Long"]
    assert len(long_children) > 5
    parent_start, parent_end = text.index("## Long"), text.index("\n\n## After")
    for child in long_children:
        assert (child.parent_start, child.parent_end) == (parent_start, parent_end)
        assert child.parent_content == text[parent_start:parent_end]
        assert len(child.content) <= 200
    assert long_children[0].content.startswith("## Long\n\nSentence number 0")
    assert all(b.start_char < a.end_char for a, b in pairwise(long_children))


def test_hash_lines_in_code_fences_do_not_split() -> None:
    text = """\
# Setup

```bash
# install the tool
pip install tool
## not a header either
```

~~~~
```
# still code: a shorter fence of another char does not close it
~~~~

Text after the fences, long enough to count as content on its own.
"""
    chunks = split(text)
    assert len(chunks) == 1
    content, headers = chunks[0]
    assert headers == {"h1": "Setup"}
    assert "# install the tool" in content and "# still code" in content and content.endswith("own.")


def test_unclosed_fence_runs_to_the_end() -> None:
    text = "# Title\n\nSome text that is long enough to be a chunk of its own here.\n\n```python\n# comment\n## x\n"
    chunks = split(text)
    assert [h for _, h in chunks] == [{"h1": "Title"}]
    assert chunks[0][0].endswith("## x")


def test_h5_and_h6_are_content() -> None:
    text = "#### Four\n\nText of the fourth level, long enough for a chunk.\n\n##### Five\n\nmore\n\n###### Six\n"
    chunks = split(text)
    assert chunks == [(text.strip(), {"h4": "Four"})]


def test_text_before_the_first_header_has_no_headers() -> None:
    text = "Preamble text that comes before any header and is long enough.\n\n# Title\n\n" + "Body text. " * 6
    chunks = split(text)
    assert [h for _, h in chunks] == [{}, {"h1": "Title"}]


def test_header_only_sections_are_dropped_and_counted() -> None:
    doc = MarkdownChunker().split("# Title\n\n## Sub\n\n### Deeper ###\n")
    assert doc.chunks == []
    assert doc.filtered == {"separator": 0, "header_only": 3, "too_short": 0}


def test_tiny_section_joins_its_next_sibling() -> None:
    text = """\
# Guide
## Setup
### Tiny
Short note.
### Details
A longer explanation that easily passes the fifty character minimum on its own.
"""
    doc = MarkdownChunker().split(text)
    assert_chunks_valid(text, doc)
    assert len(doc.chunks) == 1
    chunk = doc.chunks[0]
    assert chunk.content.startswith("### Tiny\nShort note.\n### Details")
    assert chunk.headers == {"h1": "Guide", "h2": "Setup", "h3": "Tiny"}  # the part it starts in
    assert doc.filtered["header_only"] == 2  # "# Guide" and "## Setup" alone


def test_tiny_section_joins_the_previous_one_when_the_next_is_elsewhere() -> None:
    text = """\
## Alpha
The alpha section has plenty of text, more than fifty characters for sure.
### Tiny
Short note.
## Beta
The beta section also has plenty of text, more than fifty characters too.
"""
    chunks = split(text)
    assert [h for _, h in chunks] == [{"h2": "Alpha"}, {"h2": "Beta"}]
    assert chunks[0][0].endswith("### Tiny\nShort note.")


def test_whole_short_document_is_one_chunk() -> None:
    assert split("## Note\n\nRead the FAQ.\n") == [("## Note\n\nRead the FAQ.", {"h2": "Note"})]


def test_separator_between_sections_is_dropped_with_its_section() -> None:
    text = "Intro text long enough to stand as a chunk on its own, surely.\n\n---\n\n# A\n\n" + "Words here. " * 6
    doc = MarkdownChunker().split(text)
    assert [c.content.split("\n")[0] for c in doc.chunks] == [text.split("\n")[0], "# A"]
    assert "---" in doc.chunks[0].content  # inside a section with text it is simply part of the text


def _headers(n: int) -> str:
    return "".join(f"## Header {i}\n\nSome text for section number {i}, enough.\n\n" for i in range(n))


def test_many_headers_grow_linearly() -> None:
    doc = MarkdownChunker().split(_headers(10_000))
    assert len(doc.chunks) == 10_000 // 2  # each tiny section joined its next sibling
    assert_linear(_headers, MarkdownChunker().split, n=10_000)


def test_one_megabyte_line_grows_linearly() -> None:
    text = "# Big\n\n" + "y" * 1_000_000
    doc = MarkdownChunker().split(text)
    assert_linear(lambda n: "# Big\n\n" + "y" * n, MarkdownChunker().split, n=1_000_000)
    assert doc.chunks[-1].end_char == doc.chunks[-1].parent_end == len(text)
    assert doc.chunks[0].parent_start == 0  # in parents of at most MAX_PARENT_CHARS


def test_a_document_opening_with_an_anchor_is_chunked_from_its_header() -> None:
    """Sphinx/MyST documentation puts a link target before the title: the first chunk starts at the header (it was
    cited at the anchor, in a section of its own), and the target alone is counted as a separator."""
    text = "(install-guide)=\n\n# Install\n\nRun the installer, then start the server with the default settings.\n"
    doc = MarkdownChunker().split(text)
    assert [text[c.start_char : c.end_char] for c in doc.chunks] == [text[text.index("# Install") :].strip()]
    assert doc.chunks[0].headers == {"h1": "Install"}
    assert doc.filtered["separator"] == 1


def test_front_matter_before_the_title_takes_the_titles_header() -> None:
    """Text before the first header has no headers of its own: joined to the title's section, that section keeps its
    header path (it had shown none, the headers the two parts share)."""
    text = "---\norphan: true\n---\n\n# Tuning example\n\nThis example tunes a model with the asynchronous scheduler.\n"
    doc = MarkdownChunker().split(text)
    assert [c.headers for c in doc.chunks] == [{"h1": "Tuning example"}]
    assert doc.chunks[0].start_char == 0  # the front matter is still in the chunk: nothing findable is lost


def test_front_matter_joined_past_a_title_without_text_takes_the_headers_of_the_text_it_joins() -> None:
    """Ray's configuration overview: front matter, an h1 alone, then the h2 holding all the text. The first of its
    chunks showed the h1 alone: the preamble took the empty title's headers, not those of the text."""
    body = "\n\n".join(f"RunConfig option {i} sets where results and checkpoints are kept." for i in range(30))
    text = f"---\norphan: true\n---\n\n# Configuration Overview\n\n## Run Configuration\n\n{body}\n"
    doc = MarkdownChunker().split(text)
    assert_chunks_valid(text, doc)
    assert len(doc.chunks) > 2 and doc.chunks[0].start_char == 0  # the front matter is still in the first chunk
    assert all(c.headers == {"h1": "Configuration Overview", "h2": "Run Configuration"} for c in doc.chunks)


def test_small_sibling_sections_joined_after_the_preamble_show_the_part_each_chunk_starts_in() -> None:
    text = "Intro.\n\n# A\n\nshort\n\n# B\n\ntiny\n\n# C\n\n" + "long enough text for a section of its own. " * 3
    doc = MarkdownChunker().split(text)
    assert doc.chunks[0].headers == {"h1": "A"}  # the preamble took A's header, then joined B and C


def test_a_short_intro_joined_to_a_long_section_leaves_that_section_its_header() -> None:
    """Every chunk of the long section showed only "Guide" (the headers the two parts share): 128 of ray-docs-qa's
    12,430 chunks lacked their section's header."""
    body = "\n\n".join(f"Step {i} of the install copies the files and checks their sums." for i in range(40))
    text = f"# Guide\n\nShort intro.\n\n## Install\n\n{body}\n\n## Usage\n\n{body.replace('install', 'usage')}\n"
    doc = MarkdownChunker().split(text)
    assert_chunks_valid(text, doc)
    install = [c for c in doc.chunks if c.start_char < text.index("## Usage")]
    assert len(install) > 3 and install[0].headers == {"h1": "Guide"}  # it starts in the intro
    assert all(c.headers == {"h1": "Guide", "h2": "Install"} for c in install[1:])
    assert all(c.parent_start == 0 for c in install)  # one section: the intro is still in their parent


def test_an_anchor_naming_the_next_header_is_in_no_chunk() -> None:
    """``(next)=`` before a header ends the section above it in the text, but names the one below: the chunks of the
    section above end before it (its words had been that section's last chunk's), and the one below starts at its
    header."""
    intro = "# Guide\n\nThe guide explains how the service starts and where it keeps its data."
    rest = "## Next\n\nThe next part covers backups, restores and how long each of them takes."
    text = f"{intro}\n\n(next-part)=\n\n{rest}\n"
    doc = MarkdownChunker().split(text)
    assert [text[c.start_char : c.end_char] for c in doc.chunks] == [intro, rest]
    assert doc.chunks[0].parent_content == intro


def test_a_section_longer_than_a_parent_is_cut_into_parents_that_keep_its_headers() -> None:
    # every child row stores its parent: one 1 MB section wrote 2,631 copies of itself (1 GB)
    text = "# Log\n\n" + "".join(f"Entry {i}: the service restarted after a deploy.\n\n" for i in range(20_000))
    doc = MarkdownChunker().split(text)
    assert_chunks_valid(text, doc)
    parents = sorted({(c.parent_start, c.parent_end) for c in doc.chunks})
    assert len(parents) > 1 and all(end - start <= MAX_PARENT_CHARS for start, end in parents)
    assert parents[0][0] == 0 and parents[-1][1] == len(text.rstrip())
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(parents))
    assert {c.header_path for c in doc.chunks} == {"Log"}
    short = "# Log\n\n" + "Entry: the service restarted.\n\n" * 100  # under the bound: one parent, as before
    assert {(c.parent_start, c.parent_end) for c in MarkdownChunker().split(short).chunks} == {(0, len(short.rstrip()))}
