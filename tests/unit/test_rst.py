"""reStructuredText: the titles docutils reads as sections, and the ``rst`` strategy built on them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rag_service.evaluation.sections import SectionIndex, sections
from rag_service.ingest.chunk import CHILD
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.loaders import load_document, text_title
from rag_service.rst_lines import rst_headers, rst_title
from tests.complexity import assert_linear

GUIDE = """.. _top:

==========
 Ray Serve
==========

Serve is a model serving library.

.. _install:

Install ``ray``
---------------

Run pip install.

Configure
---------

Set the replicas in the config file.

Autoscaling
^^^^^^^^^^^

Replicas scale with the queue length.
"""


def _titles(text: str) -> list[tuple[int, str]]:
    return [(h.level, h.title) for h in rst_headers(text)]


def test_titles_and_levels_in_the_order_their_styles_appear() -> None:
    assert _titles(GUIDE) == [(1, "Ray Serve"), (2, "Install `ray`"), (2, "Configure"), (3, "Autoscaling")]
    first = rst_headers(GUIDE)[0]
    assert GUIDE[first.start : first.end] == "==========\n Ray Serve\n=========="  # the overline is the title's


def test_an_overline_makes_another_style_than_the_same_underline_alone() -> None:
    text = "=====\nBook\n=====\n\nPart\n====\n\nText.\n"
    assert _titles(text) == [(1, "Book"), (2, "Part")]


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ("Title\n===\n", []),  # shorter than the title and than 4: text (docutils: "treating it as ordinary text")
        ("A longer title\n====\n", [(1, "A longer title")]),  # too short, but 4 or more: docutils warns and takes it
        ("Ab\n--\n", [(1, "Ab")]),
        ("- item\n------\n", []),  # a bullet item
        (".. note::\n---------\n", []),  # explicit markup
        (":param x:\n---------\n", []),  # a field
        ("    Indented\n    --------\n", []),  # a block quote or a literal block: no title inside
        ("para line one\nline two\n--------\n", []),  # not at the start of a block
        ("1. Numbered\n===========\n", [(1, "1. Numbered")]),  # an enumerator over an underline is a title
        ("----\n\nText.\n", []),  # a transition
        ("=====\nTitle\n-----\n", []),  # overline and underline differ
        ("One\n===\nTwo\n---\n", [(1, "One"), (2, "Two")]),  # a title right under a title
        (".. _x:\nTitle\n=====\n", [(1, "Title")]),  # right under a label
        ("Title\r\n=====\r\n\r\nText.\r\n", [(1, "Title")]),
        ("compute\\_engine package\n========================\n", [(1, "compute_engine package")]),  # escapes read
    ],
)
def test_what_is_a_title(text: str, titles: list[tuple[int, str]]) -> None:
    assert _titles(text) == titles


def test_levels_deeper_than_six_count_as_six() -> None:
    text = "".join(f"T{c}\n{c * 4}\n\n" for c in "=-~^+*#:")
    assert [level for level, _ in _titles(text)] == [1, 2, 3, 4, 5, 6, 6, 6]


def test_the_rst_strategy_gives_sections_with_title_paths_and_parents() -> None:
    doc = make_chunker("rst", chunk_size=200, chunk_overlap=0, min_chunk_chars=10).split(GUIDE)
    by_text = {c.content.split("\n")[-1]: c for c in doc.chunks}
    assert all(c.chunk_type == CHILD for c in doc.chunks)
    configure = by_text["Set the replicas in the config file."]
    assert configure.headers == {"h1": "Ray Serve", "h2": "Configure"}
    assert configure.parent_content == "Configure\n---------\n\nSet the replicas in the config file."
    assert by_text["Replicas scale with the queue length."].headers == {
        "h1": "Ray Serve",
        "h2": "Configure",
        "h3": "Autoscaling",
    }
    install = by_text["Run pip install."]
    assert install.headers == {"h1": "Ray Serve", "h2": "Install `ray`"}
    assert install.parent_content == "Install ``ray``\n---------------\n\nRun pip install."
    # a label ends the section before the title it names, and renders as nothing: in no chunk (as markdown's anchors)
    assert not any(".. _" in (c.parent_content or "") for c in doc.chunks)


def test_an_adornment_line_is_markup_and_a_title_alone_gives_no_chunk() -> None:
    doc = make_chunker("rst").split("Title\n^^^^^\n\nSub\n\"\"\"\n")
    assert doc.chunks == [] and doc.filtered["header_only"] >= 1


def test_rst_files_are_titled_and_chunked_by_auto(tmp_path: Path) -> None:
    path = tmp_path / "guide.rst"
    path.write_text(GUIDE)
    loaded = load_document(path, max_bytes=1 << 20)
    assert loaded.title == rst_title(GUIDE) == text_title(GUIDE, "rst") == "Ray Serve"
    assert type(make_chunker("auto", source=str(path))).__name__ == "RstChunker"
    untitled = tmp_path / "notes.rst"
    untitled.write_text("No title here.\n")
    assert load_document(untitled, max_bytes=1 << 20).title == "notes"


def test_an_rst_file_is_numbered_at_its_titles_for_the_evaluation() -> None:
    """``rag eval`` judges ``guide.rst#n`` sections: the number of titles starting at or before an offset."""
    found = sections(GUIDE, "guide.rst")
    assert [s.number for s in found] == [0, 1, 2, 3, 4]
    index = SectionIndex(GUIDE, "guide.rst")
    assert index.section_at(GUIDE.index("Run pip")) == 2
    assert index.section_at(GUIDE.index("Replicas scale")) == 4
    assert SectionIndex(GUIDE, "guide.md").section_at(len(GUIDE) - 1) == 0  # a markdown file: no ATX header


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "=" * n + "\n",
        lambda n: "T\n" + "=" * n + "\n",
        lambda n: "=====\nT\n=====\n\n" * (n // 15),
        lambda n: "T\n-\n" * (n // 4),
        lambda n: "``" + "a" * n + "\n---\n",
        lambda n: "x" + " " * n + "\n" + "-" * 4 + "\n",
    ],
)
def test_titles_are_read_in_linear_time(make: Callable[[int], str]) -> None:
    assert_linear(make, rst_headers, n=200_000)
