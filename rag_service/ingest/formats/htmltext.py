"""HTML reduced to its visible text, headings as ATX header lines, ``<pre>`` fenced, relative links kept.

The ``html`` and ``markdown`` strategies read the sections from the header lines; the chunk graph
follows the links written as markdown links (``[text](install.html#linux)``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from rag_service.ingest.formats.markdown_escape import escape_plain_line, fence_code
from rag_service.ingest.links import is_relative_link

__all__ = ["html_to_text"]

_BLOCK_TAGS = frozenset(
    "address article aside blockquote caption dd details div dl dt fieldset figcaption figure footer form "  # noqa: SIM905
    "h1 h2 h3 h4 h5 h6 header hr main nav ol p pre section summary table tbody thead tfoot ul".split()
)
_HEADING_LEVELS = {f"h{n}": n for n in range(1, 7)}
_LINE_TAGS = {"br": "\n", "li": "\n", "tr": "\n", "td": " ", "th": " "}
_SKIPPED_TAGS = frozenset({"script", "style", "head", "noscript", "template", "svg"})
#: what ``<head>`` may hold: any other element starts the body (``</head>`` and ``<body>`` are both optional)
_HEAD_CONTENT = frozenset({"title", "meta", "link", "style", "script", "base", "noscript", "template"})
_VOID_TAGS = frozenset("area base br col embed hr img input link meta source track wbr".split())  # noqa: SIM905
# marks in the extracted text, removed from the page's own text first (noncharacters: never visible text)
_HEADING_MARK, _PRE_OPEN, _PRE_CLOSE = "\ufdd0", "\ufdd1", "\ufdd2"
_MARKS = re.compile("[\ufdd0-\ufdd2]")
_SECTIONING = frozenset({"article", "main", "section", "aside", "nav"})
#: the whole text of a heading's permalink anchor (Sphinx ``¶``, Docusaurus a zero-width space, ``#``, an icon)
_PERMALINK = re.compile("[\\s\u200b-\u200d\u2060\ufeff¶§#🔗]*")
#: a page that marks its main content, so page-level header, footer and aside are furniture around it
_MARKS_MAIN = re.compile(r"<(?:main|article)\b|\brole\s*=\s*[\"']?main\b", re.IGNORECASE)
_PRE_BLOCK = re.compile(f"{_PRE_OPEN}(.*?)(?:{_PRE_CLOSE}|\\Z)", re.DOTALL)
# CPython's html.parser before 3.11.13 (3.12.11, 3.13.4) scans to the end of the page from every comment, processing
# instruction, CDATA section or declaration left open, reads it as text up to the next ">" (or "<") and goes on
# (CVE-2025-6069, gh-135462): quadratic, 200 KB of "<!-- x" took 20 s. Worked around with the same output: an opener
# after the page's last ">" can never close, so its "<" is escaped before parsing (read as the same text at once);
# before it, ``_TextExtractor`` remembers where a comment's or a marked section's closer was not found, so the next
# opener of that kind fails without scanning again, and the parser's fallback to the next ">" moves on.
_SECTION_NAME = re.compile(r"[a-zA-Z][-_.a-zA-Z0-9]*")
_SECTION_CLOSERS = {"temp": "]]>", "cdata": "]]>", "ignore": "]]>", "include": "]]>", "rcdata": "]]>"}
_SECTION_CLOSERS |= {"if": "]>", "else": "]>", "endif": "]>"}


class _TextExtractor(HTMLParser):
    def __init__(self, *, marks_main: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._marks_main = marks_main  # the page marks its content (<main>, role=main, <article>)
        self._skipping: list[str] = []  # an element whose text is not shown, and the elements open inside it
        self._skipped_at: dict[str, list[int]] = {}  # where each tag is in ``_skipping``: no scan of it per tag
        self._unclosed: tuple[dict[str, int], str] = ({}, "")  # closer -> from where it is not found; in what text
        self._in_title = False
        self._heading = False
        self._sectioning = 0  # open <article>, <main>, <section>, <aside>, <nav>
        self._pre = 0
        self._links: list[tuple[str | None, int]] = []  # open ``<a>``: href written at ``</a>`` or None, text start

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        heads = self._skipped_at.get("head")
        if heads and (tag == "body" or (self._skipping[-1] == "head" and tag not in _HEAD_CONTENT)):
            self._close_skipped(heads[0])  # ``</head>`` and ``<body>`` are optional
        if tag == "title":  # the page's title, not an <svg>'s tooltip
            self._in_title = len(self._skipping) == len(self._skipped_at.get("head", ()))
        attributes = dict(attrs)
        if self._skipping or tag in _SKIPPED_TAGS or self._is_furniture(tag, attributes):
            if tag not in _VOID_TAGS:
                self._skipped_at.setdefault(tag, []).append(len(self._skipping))
                self._skipping.append(tag)
            return
        if tag in _SECTIONING:
            self._sectioning += 1
        if self._heading and tag not in _HEADING_LEVELS and (tag in _BLOCK_TAGS or tag in _LINE_TAGS):  # one line
            self.parts.append(" ")
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n\n")
            if tag in _HEADING_LEVELS and not self._pre:  # the sections, for the html strategy
                self.parts.append(_HEADING_MARK + "#" * _HEADING_LEVELS[tag] + " ")
                self._heading = True
        elif tag in _LINE_TAGS:
            self.parts.append(_LINE_TAGS[tag])
        if tag == "pre":
            self._pre += 1
            if self._pre == 1:
                self.parts.append(_PRE_OPEN)
        if tag != "a":
            return
        href = attributes.get("href") if not self._pre else None
        # kept as a markdown link, so the chunk graph can follow it; not in a heading, whose text is a header path
        if href and is_relative_link(href) and not self._heading:
            self.parts.append("[")
            self._links.append((href, len(self.parts)))
        else:
            self._links.append((None, len(self.parts)))

    def parse_comment(self, i: int, report: bool = True) -> int:
        """The parser's, failing at once where a comment's closer was not found before (see ``_SECTION_NAME``)."""
        if self._unclosed_at("-->", i + 4):
            return -1
        end = super().parse_comment(i, report)
        if end < 0:
            self._unclosed[0].setdefault("-->", i + 4)
        return end

    def parse_marked_section(self, i: int, report: bool = True) -> int:
        """The parser's, failing at once where a marked section's closer was not found before; one of an unknown
        keyword (``<![foo ...]>``) is skipped to the next ``>`` as browsers do."""
        name = _SECTION_NAME.match(self.rawdata, i + 3)
        closer = _SECTION_CLOSERS.get(name[0].lower()) if name else None
        if closer is None:  # the parser raises on an unknown keyword; a browser reads a bogus comment to ">"
            end = self.rawdata.find(">", i + 3)
            return -1 if end < 0 else end + 1
        if self._unclosed_at(closer, i + 3):
            return -1
        end = super().parse_marked_section(i, report)
        if end < 0:
            self._unclosed[0].setdefault(closer, i + 3)
        return end

    def _unclosed_at(self, closer: str, start: int) -> bool:
        """Whether ``closer`` is known not to follow ``start`` in the text being parsed."""
        if self._unclosed[1] is not self.rawdata:  # positions are the parser's buffer's, which feed() replaces
            self._unclosed = ({}, self.rawdata)
        return start >= self._unclosed[0].get(closer, len(self.rawdata) + 1)

    def _close_skipped(self, depth: int) -> None:
        """Close the skipped element at ``depth`` of ``_skipping`` and every one open inside it."""
        for tag in self._skipping[depth:]:
            self._skipped_at[tag].pop()
        del self._skipping[depth:]

    def _is_furniture(self, tag: str, attrs: dict[str, str | None]) -> bool:
        """Navigation anywhere; a page-level header, footer or aside (in no article, main, section, aside or
        nav, as ARIA reads them) only on a page that marks its content, so a page without one keeps its h1."""
        role = (attrs.get("role") or "").strip().lower()
        if tag == "nav" or role in ("navigation", "search"):
            return True
        if tag == "a" and "headerlink" in (attrs.get("class") or "").split():  # Sphinx's and MkDocs' ``¶`` permalinks
            return True
        page_level = tag in ("header", "footer", "aside") or role in ("banner", "contentinfo", "complementary")
        return page_level and self._marks_main and not self._sectioning

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID_TAGS:  # ``<div/>`` is not void: it opens nothing
            return
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if self._skipping:
            if self._skipped_at.get(tag):  # the innermost open one, and what was left open inside it
                self._close_skipped(self._skipped_at[tag][-1])
            return
        if tag in _SECTIONING and self._sectioning:
            self._sectioning -= 1
        if self._heading and tag in _HEADING_LEVELS:
            self._heading = False
            self.parts.append("\n\n")
        elif self._heading and (tag in _BLOCK_TAGS or tag in _LINE_TAGS):
            self.parts.append(" ")
        elif tag in _BLOCK_TAGS and not (tag == "pre" and self._pre == 1):
            self.parts.append("\n\n")
        if tag == "pre" and self._pre:
            self._pre -= 1
            if not self._pre:
                self.parts.append(_PRE_CLOSE + "\n\n")
        if tag == "a" and self._links:
            href, start = self._links.pop()
            if self._heading and _PERMALINK.fullmatch("".join(self.parts[start:])):  # ¶, a hash-link: not the title
                del self.parts[start - (href is not None) :]
            elif href is not None:
                self.parts.append(f"]({href})")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        elif not self._skipping:
            data = _MARKS.sub("", data)
            self.parts.append(data if self._pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> tuple[str, str]:
    """The visible text of ``html`` (blocks on their own lines) and its ``<title>`` (``""`` if none).

    Headings h1–h6 become ATX header lines (``## Install``), so the ``html`` and ``markdown``
    strategies see the document's sections in the stored text; other lines that would read as
    headers or fences are escaped (``\\# of ferrets``), and ``<pre>`` text is kept verbatim in a
    fence. Links to relative paths or anchors become markdown links (``[text](install.html#linux)``),
    so the chunk graph sees them too; in a heading, a permalink (``¶``) is dropped and a link is plain
    text (a heading's text is its section's header path). Navigation, and a page-level header, footer or
    aside around marked content (``<main>``, ``<article>``), are page furniture, not text.
    """
    parser = _TextExtractor(marks_main=bool(_MARKS_MAIN.search(html)))
    last_gt = html.rfind(">") + 1  # see _SECTION_NAME: what follows the last ">" opens nothing
    parser.feed(html[:last_gt] + html[last_gt:].replace("<!", "&lt;!").replace("<?", "&lt;?"))
    parser.close()
    extracted = "".join(parser.parts)
    blocks: list[str] = []
    prose_start = 0
    for pre in _PRE_BLOCK.finditer(extracted):
        blocks.append(_prose(extracted[prose_start : pre.start()]))
        body = pre[1].removeprefix("\n").rstrip()  # HTML drops a newline right after <pre>
        blocks.append(fence_code(body.strip("\n")) if body.strip() else "")
        prose_start = pre.end()
    blocks.append(_prose(extracted[prose_start:]))
    title = " ".join("".join(parser.title_parts).split())
    return "\n\n".join(b for b in blocks if b), title


def _prose(extracted: str) -> str:
    """Text outside ``<pre>``: lines stripped, runs of blank lines made one, look-alike structure escaped."""
    lines = [line.strip() for line in extracted.split("\n")]
    lines = [line[1:] if line.startswith(_HEADING_MARK) else escape_plain_line(line) for line in lines]
    return _MARKS.sub("", re.sub(r"\n{3,}", "\n\n", "\n".join(lines))).strip()
