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
        ("Some text:\n----\n== code right under a paragraph\n----\n", []),
        # audit 59, each as Asciidoctor 2.0.18 reads it:
        ("Text:\n----\n== a title\n----\n", [(2, "Text:"), (2, "a title")]),  # two-line titles, not a block
        ("My Guide\n========\n\n== Install\n", [(1, "My Guide"), (2, "Install")]),
        ("Deep\n^^^^\n", [(4, "Deep")]),
        ("Far off\n----\n", []),  # an underline more than one character off: a listing block
        ("= Doc\n\nIntro.\n\n// tag::quick[]\n== Quick Setup\n", [(1, "Doc"), (2, "Quick Setup")]),
        (":_mod-docs-content-type: ASSEMBLY\n[id=\"pid\"]\n= PID limits\n", [(1, "PID limits")]),
        ("Body.\n\nifndef::env-github[]\n== Section A\n", [(2, "Section A")]),
        ("Body.\n\n:context: admin\n== Section A\n", [(2, "Section A")]),
        ("[discrete]\n\n== Discrete after a blank line\n\n== Next\n", [(2, "Next")]),
        ("= Guide\n:product: Acme\n\n== Install {product}\n", [(1, "Guide"), (2, "Install Acme")]),
        ("== link:https://x.org[X], xref:o.adoc[Other page], <<id,this>>\n", [(2, "X, Other page, this")]),
        ("== *Strong* and _em_ but my_snake_name\n", [(2, "Strong and em but my_snake_name")]),
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


def test_lines_that_render_nothing_are_markup_so_a_title_over_them_keeps_its_own_section() -> None:
    """``:toc:`` under the title counted as text: the title's section was joined to its first child, whose chunks then
    showed only ``h1`` (audit 59). Comments, attribute entries, includes and ``[id=...]`` anchors are in no chunk of
    their own either (one at a section's end stays in its last chunk, as markdown's ``---`` does)."""
    body = "Download the archive and unpack it into /opt/tool, then add /opt/tool/bin to PATH."
    text = f"// Module included in: a.adoc\n= User Guide\n:toc: left\n:icons: font\n\n== Installation\n\n{body}\n"
    doc = make_chunker("asciidoc").split(text)
    assert [(c.headers, c.content) for c in doc.chunks] == [
        ({"h1": "User Guide", "h2": "Installation"}, f"== Installation\n\n{body}")
    ]
    anchored = f"== A\n\n{body}\n\n[id=\"b_{{context}}\"]\n== B\n\n{body}\n\n// end of B\n\ninclude::c.adoc[]\n\n"
    assert [c.content.split("\n")[-1] for c in make_chunker("asciidoc").split(anchored).chunks] == [
        body,
        "include::c.adoc[]",
    ]
    assert make_chunker("asciidoc").split("// only a comment\n\ninclude::a.adoc[]\n").chunks == []


def test_asciidoc_files_are_titled_chunked_by_auto_and_numbered_for_the_evaluation(tmp_path: Path) -> None:
    path = tmp_path / "guide.adoc"
    path.write_text(GUIDE)
    assert load_document(path, max_bytes=1 << 20).title == text_title(GUIDE, "asciidoc") == "Ray Serve"
    assert type(make_chunker("auto", source=str(path))).__name__ == "AsciidocChunker"
    chapter = tmp_path / "jndi.adoc"
    chapter.write_text("[[jndi]]\n== JNDI\n\nText.\n")
    assert load_document(chapter, max_bytes=1 << 20).title == "jndi"  # no '= Title': the file's name, as markdown
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


def test_a_document_title_reads_the_attributes_its_header_sets_under_it() -> None:
    """``= Operating {product}`` over ``:product: Zephyr Vault`` (the usual header) kept ``{product}`` in the title and
    every header path (audit 59b)."""
    text = "= Operating {product}\n:product: Zephyr Vault\n:toc:\n\n== Upgrading {product}\n\nRun the upgrade.\n"
    assert _titles(text) == [(1, "Operating Zephyr Vault"), (2, "Upgrading Zephyr Vault")]


def test_a_chunk_is_led_by_the_values_of_the_attributes_it_refers_to() -> None:
    """``{product} listens on port {port}`` scored 0.003 for ``8443``: the values lead the chunk (its vector and
    keywords), while its stored text stays the file's (audit 59b)."""
    text = "= Vault\n:product: Zephyr Vault\n:port: 8443\n\n== Network\n\n{product} listens on port {port} by day.\n"
    (chunk,) = make_chunker("asciidoc", min_chunk_chars=10).split(text).chunks
    assert chunk.content == "== Network\n\n{product} listens on port {port} by day."
    assert chunk.lead == "Zephyr Vault, 8443"
    (plain,) = make_chunker("asciidoc", min_chunk_chars=10).split("== A\n\nNo references here at all.\n").chunks
    assert plain.lead == ""


def test_asc_is_asciidoc_unless_it_is_pgp_armour(tmp_path: Path) -> None:
    """The Pro Git book's chapters are ``.asc``, and so are PGP keys and signatures: a key is never indexed."""
    from rag_service.errors import GeneratedFileError

    chapter = tmp_path / "ch01-getting-started.asc"
    chapter.write_text("= Getting Started\n\nThis chapter is about getting started with Git.\n")
    assert load_document(chapter, max_bytes=1 << 20).title == "Getting Started"
    assert type(make_chunker("auto", source=str(chapter))).__name__ == "AsciidocChunker"
    key = tmp_path / "release.asc"
    key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBF...\n-----END PGP PUBLIC KEY BLOCK-----\n")
    with pytest.raises(GeneratedFileError, match=r"release\.asc is PGP armour .*: it is not indexed"):
        load_document(key, max_bytes=1 << 20)
