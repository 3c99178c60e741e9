"""AsciiDoc: the titles Asciidoctor reads as sections, and the ``asciidoc`` strategy built on them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rag_service.asciidoc_lines import asciidoc_headers, asciidoc_title
from rag_service.evaluation.sections import SectionIndex
from rag_service.ingest.chunk import CHILD
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.loaders import load_document, text_title
from tests.complexity import assert_linear

GUIDE = """= Ray Serve
Jane Doe <jane@example.com>
:toc:

Serve is a model serving library.

[[install]]
== Install Ray C{plus}{plus}

Run pip install.

[source,python]
----
== a line of code, not a title
----

== Configure

Set the replicas in the config file.

[discrete]
== A heading outside the sections
Still the configure section.

=== Autoscaling [[autoscale]]

Replicas scale with the queue length.
"""


def _titles(text: str) -> list[tuple[int, str]]:
    return [(h.level, h.title) for h in asciidoc_headers(text)]


def test_titles_outside_blocks_and_discrete_headings() -> None:
    assert _titles(GUIDE) == [(1, "Ray Serve"), (2, "Install Ray C++"), (2, "Configure"), (3, "Autoscaling")]
    assert asciidoc_title(GUIDE) == "Ray Serve"


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ("== Title ==\n", [(2, "Title")]),  # the symmetric form
        ("## Markdown style\n", [(2, "Markdown style")]),  # Asciidoctor reads it too
        ("==No space\n", []),
        ("para line\n== not a title\n", []),  # inside a paragraph
        ("....\n== literal\n....\n== After\n", [(2, "After")]),
        ("|===\n| == cell\n|===\n", []),
        ("////\n== comment\n////\n", []),
        ("```\n== fenced\n```\n== After\n", [(2, "After")]),
        ("--\n== open block\n--\n", []),
        ("----\n== unclosed listing\n", []),  # an unclosed block runs to the end
        ("Text:\n----\n== code right under a paragraph\n----\n", []),
        (".Example title\n== Title\n", [(2, "Title")]),  # a block title above the title
        ("[#anchor]\n== Title\n", [(2, "Title")]),
        ("== Title\r\n\r\nText.\r\n", [(2, "Title")]),
    ],
)
def test_what_is_a_title(text: str, titles: list[tuple[int, str]]) -> None:
    assert _titles(text) == titles


def test_the_asciidoc_strategy_gives_sections_with_title_paths_and_parents() -> None:
    doc = make_chunker("asciidoc", chunk_size=300, chunk_overlap=0, min_chunk_chars=10).split(GUIDE)
    assert all(c.chunk_type == CHILD for c in doc.chunks)
    by_line = {line: c for c in doc.chunks for line in c.content.split("\n")}
    assert by_line["Run pip install."].headers == {"h1": "Ray Serve", "h2": "Install Ray C++"}
    assert by_line["== a line of code, not a title"].headers == {"h1": "Ray Serve", "h2": "Install Ray C++"}
    assert by_line["Still the configure section."].headers == {"h1": "Ray Serve", "h2": "Configure"}
    autoscaling = by_line["Replicas scale with the queue length."]
    assert autoscaling.headers == {"h1": "Ray Serve", "h2": "Configure", "h3": "Autoscaling"}
    assert autoscaling.parent_content == "=== Autoscaling [[autoscale]]\n\nReplicas scale with the queue length."
    # an anchor line ends the section before the title it names, and renders as nothing: in no chunk
    assert not any("[[install]]" in (c.parent_content or "") for c in doc.chunks)


def test_asciidoc_files_are_titled_chunked_by_auto_and_numbered_for_the_evaluation(tmp_path: Path) -> None:
    path = tmp_path / "guide.adoc"
    path.write_text(GUIDE)
    assert load_document(path, max_bytes=1 << 20).title == text_title(GUIDE, "asciidoc") == "Ray Serve"
    assert type(make_chunker("auto", source=str(path))).__name__ == "AsciidocChunker"
    index = SectionIndex(GUIDE, "guide.adoc")
    assert index.section_at(0) == 1  # starts with its title: section 1
    assert index.section_at(GUIDE.index("Run pip")) == 2
    assert index.section_at(GUIDE.index("Replicas scale")) == 4


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "== x" + " " * n + "y\n",  # a lazy title regex backtracked over the spaces: 20,000 took 2 s
        lambda n: "== x" + " " * n + "==\n",
        lambda n: "== a [[" + " " * n + "\n",
        lambda n: "----\n" * (n // 5),  # blocks opened and closed
        lambda n: "== T\n" * (n // 5),
        lambda n: "[discrete]\n" * (n // 11),
    ],
)
def test_titles_are_read_in_linear_time(make: Callable[[int], str]) -> None:
    assert_linear(make, asciidoc_headers, n=200_000)
