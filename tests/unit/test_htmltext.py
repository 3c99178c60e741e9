"""HTML pages as text: page furniture left out, the page title not an icon's, headings without permalinks."""

from __future__ import annotations

from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.formats.htmltext import html_to_text
from tests.complexity import assert_linear
from tests.unit.test_chunker_properties import assert_chunks_valid


def _header_paths(text: str) -> list[str]:
    chunked = make_chunker("html", chunk_size=200, chunk_overlap=0, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, chunked)
    return [c.header_path for c in chunked.chunks]


def test_navigation_header_footer_and_aside_around_the_content_are_left_out() -> None:
    links = "".join(f'<li><a href="/page{i}.html">Navigation link {i}</a></li>' for i in range(5))
    text, _ = html_to_text(
        "<html><body><header><div class='logo'>AcmeDocs</div><h2>Site</h2></header>"
        f"<nav><ul>{links}</ul></nav><aside><h3>Related</h3><p>Other pages.</p></aside><main><article>"
        "<header><h1>Install</h1></header><p>Install the widget with four bolts.</p>"
        "<aside><p>Note: torque them to 9 Nm.</p></aside>"
        "<nav aria-label='pagination'><a href='next.html'>Next</a></nav><footer><p>Last updated today.</p></footer>"
        "</article></main><footer><h4>Follow us</h4><p>Copyright 2024 AcmeDocs.</p></footer></body></html>"
    )
    assert text == (
        "# Install\n\nInstall the widget with four bolts.\n\nNote: torque them to 9 Nm.\n\nLast updated today."
    )
    assert _header_paths(text) == ["Install"]


def test_sphinx_layout_drops_its_navigation_divs() -> None:
    text, _ = html_to_text(
        "<body><div class='related' role='navigation'><ul><li><a href='index.html'>Home</a></li></ul></div>"
        "<div class='document'><div class='body' role='main'><section id='usage'><h1>Usage</h1>"
        "<div><p>Call the widget.</p></div></section></div></div>"
        "<div class='sphinxsidebar' role='navigation'><div><div><h3>Navigation</h3></div><p>Contents</p></div></div>"
        "<div class='footer' role='contentinfo'>Built with Sphinx.</div></body>"
    )
    assert text == "# Usage\n\nCall the widget."


def test_a_page_without_marked_content_keeps_its_header_and_footer() -> None:
    text, _ = html_to_text(
        "<body><header><h1>Release notes</h1></header><p>Version 2 ships today.</p>"
        "<nav><a href='old.html'>Older notes</a></nav><footer><p>Written by the ops team.</p></footer></body>"
    )
    assert text == "# Release notes\n\nVersion 2 ships today.\n\nWritten by the ops team."


def test_an_svg_title_is_not_the_page_title() -> None:
    text, title = html_to_text(
        "<html><head><title>Widget Docs</title></head><body>"
        "<svg class='icon'><title>search icon</title><path d='M0 0'/></svg><p>Body text.</p></body></html>"
    )
    assert (text, title) == ("Body text.", "Widget Docs")


def test_permalink_anchors_are_not_heading_text() -> None:
    text, _ = html_to_text(
        "<main><section id='widget-installation'><h1>Widget Installation"
        "<a class='headerlink' href='#widget-installation' title='Permalink'>¶</a></h1><p>Mount it.</p>"
        "<h2 class='anchor' id='install'>Install<a href='#install' class='hash-link'>\u200b</a></h2><p>Bolts.</p>"
        "<h2 id='tune'><a class='toclink' href='#tune'>Tune</a></h2><p>Spin at 1440 rpm.</p>"
        "<h2><a class='anchor' href='#faq'><svg><path d='M0'/></svg></a>FAQ <a href='faq.html'>page</a></h2>"
        "<p>See <a href='#tune'>tuning</a>.</p></section></main>"
    )
    assert text == (
        "# Widget Installation\n\nMount it.\n\n## Install\n\nBolts.\n\n## Tune\n\nSpin at 1440 rpm.\n\n"
        "## FAQ page\n\nSee [tuning](#tune)."  # a heading's link to another page was kept: "FAQ [page](faq.html)"
    )
    paths = _header_paths(text)
    assert paths == [
        "Widget Installation",
        "Widget Installation > Install",
        "Widget Installation > Tune",
        "Widget Installation > FAQ page",
    ]


def test_a_page_without_a_body_tag_or_a_closed_head_keeps_its_text() -> None:
    """Both are optional: the first element that cannot be in the head starts the body (the text was all lost)."""
    page = "<!doctype html><html><head><meta charset='utf-8'><title>No Body</title>\n<h1>Ocelots</h1><p>Spotted.</p>"
    assert html_to_text(page) == ("# Ocelots\n\nSpotted.", "No Body")
    styled = "<html><head><style>h1 { color: red }</style><script>var h = '<p>';</script><p>Kept.</p></html>"
    assert html_to_text(styled) == ("Kept.", "")


def test_a_line_break_in_a_heading_keeps_it_one_heading() -> None:
    text, _ = html_to_text("<h2>Install<br>on Linux</h2><p>Use the package.</p>")
    assert text == "## Install on Linux\n\nUse the package."


def _menu(n: int) -> str:
    return "<html><body><nav><ul>" + "<li>item" * (n // 8) + "</ul></nav><p>Body text.</p></body></html>"


def _nested_in_nav(n: int) -> str:
    return "<nav>" + "<div>x" * (n // 6) + "</nav><p>Body text.</p>"


def test_elements_open_inside_a_skipped_region_cost_linear_time() -> None:
    """Each tag inside a ``<nav>`` (or ``<svg>``, ``<head>``) scanned the stack of the elements open in it: a menu of
    ``<li>`` without their optional end tags was quadratic (800 KB: 43 s)."""
    assert html_to_text(_menu(1_000)) == ("Body text.", "")
    assert html_to_text(_nested_in_nav(1_000)) == ("Body text.", "")
    assert_linear(_menu, html_to_text, n=200_000)
    assert_linear(_nested_in_nav, html_to_text, n=200_000)


def test_markup_left_open_reads_as_text_in_linear_time() -> None:
    """CPython 3.11.7's parser rescanned the page from every unclosed comment, ``<?``, ``<![CDATA[`` or ``<!``
    (CVE-2025-6069: 200 KB of ``<!-- x`` took 20 s); the text is what that parser made of it."""
    assert html_to_text("<h1>T</h1><p>a <!-- b <i>c</i> d</p>") == ("# T\n\na <!-- b <i>c d", "")
    assert html_to_text("<p>x</p><!-- y <!-- z") == ("x\n\n<!-- y <!-- z", "")
    assert html_to_text("<p>a <![CDATA[ b > c</p><?pi") == ("a <![CDATA[ b > c\n\n<?pi", "")
    for unit in ("<!-- x", "<?x", "<![CDATA[", "<!x", "<!-- x >", "<![CDATA[ x >"):

        def page(n: int, unit: str = unit) -> str:
            return "<html><body><h1>T</h1>" + unit * (n // len(unit))

        assert_linear(page, html_to_text, n=100_000)


def test_a_marked_section_of_unknown_keyword_is_skipped_as_browsers_do() -> None:
    """CPython's parser raised on ``<![foo ...]>`` (a keyword it does not know): the whole page failed with the
    generic "could not be read" line. Browsers read it as a bogus comment up to the next ``>``."""
    assert html_to_text("<p>a</p><![foo bar]]><p>b</p>") == ("a\n\nb", "")
    assert html_to_text("<p>a</p><![ x]]><p>b</p><![9 y]><p>c</p>") == ("a\n\nb\n\nc", "")
    assert html_to_text("<p>a</p><![if !IE]><p>b</p><![endif]>") == ("a\n\nb", "")  # known keywords as before
    assert html_to_text("<p>a</p><![foo ") == ("a\n\n<![foo", "")  # left open after the last ">": text

    def page(n: int) -> str:
        return "<p>a</p>" + "<![foo x>" * (n // 9)

    assert_linear(page, html_to_text, n=100_000)


def test_sphinx_permalinks_after_signatures_and_captions_are_left_out() -> None:
    """193 of 949 chunks of Click's built HTML held ``[¶](#click.command)`` after a signature (audit 59b)."""
    text, _ = html_to_text(
        "<main><dl><dt id='click.command'><code>click.command(name)</code>"
        "<a class='headerlink' href='#click.command' title='Link to this definition'>¶</a></dt>"
        "<dd><p>Creates a command.</p></dd></dl></main>"
    )
    assert "¶" not in text and "click.command(name)" in text
