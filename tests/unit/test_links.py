"""Links between documents: found in the stored text, resolved against the linking document's source."""

from __future__ import annotations

import random
import re

from rag_service.ingest.graph import candidate_sources
from rag_service.ingest.links import Link, document_key, find_links, html_links, markdown_links, resolve, slugify
from rag_service.ingest.loaders import html_to_text
from tests.complexity import assert_linear


def test_relative_paths_and_anchors_resolve_against_the_linking_document():
    assert resolve("../guide/install.md#Linux Setup", source="docs/start/index.md") == (
        "docs/guide/install",
        "linux-setup",
    )
    assert resolve("install.html", source="docs/guide/intro.md") == ("docs/guide/install", "")
    assert resolve("./sub/", source="docs/a.md") == ("docs/sub", "")
    assert resolve("/docs/b.md", source="docs/a/a.md") == ("docs/b", "")
    assert resolve("#usage", source="docs/guide.md") == ("docs/guide", "usage")


def test_links_leaving_the_collection_are_not_links():
    for target in ("https://example.org/a.md", "mailto:a@b.c", "//cdn.example.org/x", "../../outside.md", ""):
        assert resolve(target, source="docs/a.md") is None, target


def test_document_keys_drop_suffixes_and_index_files():
    assert document_key("docs/guide/install.md") == "docs/guide/install"
    assert document_key("docs/guide/README.md") == "docs/guide"
    assert document_key("docs/guide/index.html") == "docs/guide"
    assert "docs/guide/README.md" in candidate_sources("docs/guide")
    assert "docs/guide.md" in candidate_sources("docs/guide")


def test_slugs_follow_the_usual_heading_anchors():
    assert slugify("Install on Linux (x86)") == "install-on-linux-x86"
    assert slugify("  `rag reindex` options ") == "rag-reindex-options"


def test_markdown_and_html_links_are_found_with_their_offsets_but_not_in_code_or_images():
    text = (
        "See [the guide](guide.md#install) and <a href='api.html'>the API</a>.\n"
        "![diagram](diagram.md)\n"
        "```\n[not a link](code.md)\n```\n"
        "Also [external](https://example.org)."
    )
    links = find_links(text, source="docs/index.md")
    assert links == [
        Link(text.index("[the guide]"), "docs/guide", "install"),
        Link(text.index("<a href"), "docs/api", ""),
    ]


def test_html_keeps_its_relative_links_as_markdown_links():
    text, _ = html_to_text(
        "<body><p>See <a href='guide.html#install'>the <b>install</b> guide</a>, "
        "<a href='https://example.org'>elsewhere</a> and <a name='x'>an anchor</a>.</p></body>"
    )
    assert text == "See [the install guide](guide.html#install), elsewhere and an anchor."
    assert find_links(text, source="site/index.html") == [Link(4, "site/guide", "install")]


def test_fences_open_and_close_as_the_markdown_scanner_says():
    # a closing fence has no info string: "```python" inside a fence is code, the fence goes on
    text = "```\nx = 1\n```python\n[in code](code.md)\n```\n[after](real.md)\n"
    assert [link.target_key for link in find_links(text, source="index.md")] == ["real"]
    # backticks in a backtick fence's info string make inline code, not a fence
    text = "``` `inline` ```\n[a link](real.md)\n"
    assert [link.target_key for link in find_links(text, source="index.md")] == ["real"]


def _link_line(n: int) -> str:
    return "# T\n\n" + "[a](b" * (n // 5) + "\n"


def _bracket_line(n: int) -> str:
    return "# T\n\n" + "[" * n + "\n"


def _unclosed_anchors(n: int) -> str:
    return "# T\n\n" + "<a x\n" * (n // 5)


def test_links_without_their_closer_grow_linearly() -> None:
    """A ``[a](b`` line with no ``)``, a line of ``[``, lines of ``<a x`` with no ``>``: every start rescanned to the
    closer that never came (40,000 characters took 17 s)."""
    for make in (_link_line, _bracket_line, _unclosed_anchors):
        assert_linear(make, lambda text: find_links(text, source="doc.md"), n=20_000)


def test_the_scanners_match_what_the_link_regexes_matched() -> None:
    """Same starts and targets as ``finditer`` of the two regexes they replaced, on random texts of delimiters."""
    markdown = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
    html = re.compile(r"<a\s[^>]*?href\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
    rng = random.Random(54)
    parts = ["[", "](", ")", "![", " ", "\n", "<", ">", ' "', "a", "[a](b", "(<", "<a ", "<A\n", "HREF", "=", "'"]
    for _ in range(5_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 15)))
        assert list(markdown_links(text)) == [(m.start(), m[1]) for m in markdown.finditer(text)], text
        assert list(html_links(text)) == [(m.start(), m[1]) for m in html.finditer(text)], text
