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
        # audit 59: titles as docutils reads them after one line of markup or an indented block, and as rendered
        ("Intro.\n\n.. a comment\nTitle\n=====\n", [(1, "Title")]),
        (":orphan:\nTitle\n=====\n", [(1, "Title")]),
        ("Example::\n\n    code\nTitle\n=====\n", [(1, "Title")]),
        (":mod:`!bisect` --- Bisection\n===========================\n", [(1, "bisect --- Bisection")]),
        (".. |ASN.1| replace:: BitString\n\n|ASN.1| type\n------------\n", [(1, "BitString type")]),
        ("`Sphinx <https://sphinx-doc.org>`_ *setup*\n===========================\n", [(1, "Sphinx setup")]),
        (":py:func:`~a.b.load` and Title_\n==============================\n", [(1, "load and Title")]),
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


BODY = "Download the archive and unpack it into /opt/tool, then add /opt/tool/bin to PATH."


@pytest.mark.parametrize(
    "markup",
    [
        ".. contents::\n   :local:\n",
        ".. currentmodule:: urllib3\n",
        ".. toctree::\n   :maxdepth: 2\n\n   install\n   usage/index\n",
        ".. highlight:: python\n   :linenothreshold: 5\n",
        ".. Foo documentation master file, created by\n   sphinx-quickstart on Mon Nov 19 15:06:52 2018.\n",
        ".. _python: https://www.python.org\n.. |br| raw:: html\n\n   <br/>\n",
    ],
)
def test_markup_that_renders_no_text_is_in_no_chunk_of_its_own_and_a_title_keeps_its_section(markup: str) -> None:
    """``.. contents::`` under a title counted as text: the title's section was joined to its first child, whose
    chunks then showed only ``h1`` (every CMake manual); comments and toctrees were chunks of their own (audit 59)."""
    text = f"User Guide\n==========\n\n{markup}\nInstallation\n------------\n\n{BODY}\n"
    chunks = make_chunker("rst").split(text).chunks
    assert [(c.headers, c.content) for c in chunks] == [
        ({"h1": "User Guide", "h2": "Installation"}, f"Installation\n------------\n\n{BODY}")
    ]


def test_a_grid_tables_border_alone_is_no_chunk() -> None:
    """The closing border of rsa's command table was a chunk of its own (audit 59)."""
    border = f"+{'-' * 10}+{'-' * 50}+\n"
    rows = "".join(f"| cmd{i}     | {'does one thing and then another thing':<48} |\n{border}" for i in range(3))
    grid = f"+{'-' * 10}+{'-' * 50}+\n| Command  | {'Usage':<48} |\n+{'=' * 10}+{'=' * 50}+\n{rows}"
    doc = make_chunker("rst", chunk_size=200, chunk_overlap=0).split(f"Commands\n========\n\n{grid}")
    assert all(c.content.strip("+-=\n") for c in doc.chunks)
    assert doc.filtered["separator"] >= 1


def test_a_piece_of_an_object_directives_body_is_led_by_its_name() -> None:
    """The description of ``bisect_left`` was cut from its ``.. function::`` line and never named it (253 of 464 such
    pieces of real files, audit 59): the name leads it, for the embedding and the keyword arm."""
    body = "".join(f"   Sentence {i} of the description, which goes on for a while.\n" for i in range(12))
    text = f"API\n===\n\nIntro line of the page.\n\n.. function:: bisect_left(a, x, lo=0)\n\n{body}\nAfter it.\n"
    chunks = make_chunker("rst", chunk_size=300, chunk_overlap=0).split(text).chunks
    inside = [c for c in chunks if c.content.startswith("Sentence")]
    assert inside and {c.lead for c in inside} == {"bisect_left(a, x, lo=0)"}
    assert all(c.lead == "" for c in chunks if not c.content.startswith("Sentence"))


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
    # several sections at the first level: no document title (docutils promotes only a lone one), the file's name
    assert rst_title("Install\n=======\n\nText.\n\nUsage\n=====\n\nText.\n") == ""


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


def test_an_autodoc_pages_targets_are_its_text() -> None:
    """Click's api.rst (71 ``auto*`` directives) kept 2 chunks: the sections of targets alone were dropped as titles
    without text, and ``progressbar`` could not be found (audit 59b)."""
    text = "API\n===\n\nDecorators\n----------\n\n.. autofunction:: command\n\n.. autofunction:: group\n\n" + (
        "Utilities\n---------\n\n.. autofunction:: progressbar\n   :noindex:\n\n.. autoclass:: Context\n   :members:\n"
    )
    chunks = make_chunker("rst", min_chunk_chars=10).split(text).chunks
    assert [c.headers.get("h2") for c in chunks] == ["Decorators", "Utilities"]
    assert ".. autofunction:: progressbar" in chunks[1].content


def test_a_chunk_is_led_by_the_substitutions_it_refers_to() -> None:
    """pyasn1's pages say ``|ASN.1| type`` throughout, with ``.. |ASN.1| replace:: BitString``: a search for BitString
    found only the title (audit 59)."""
    text = ".. |ASN.1| replace:: BitString\n\nBits\n====\n\nThe |ASN.1| type models a string of bits in ASN.1 data.\n"
    (chunk,) = make_chunker("rst", min_chunk_chars=10).split(text).chunks
    assert chunk.headers == {"h1": "Bits"} and chunk.lead == "BitString"
