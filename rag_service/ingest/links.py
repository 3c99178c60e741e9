"""Links from one document to another, or to one of its sections, found in the stored text.

A markdown link ``[text](target)`` or an ``<a href="target">`` whose target is a relative path
(optionally with ``#anchor``), or an ``#anchor`` alone, is resolved against the linking document's
source: ``../guide/install.md#linux`` from ``docs/start/index.md`` is the document keyed
``docs/guide/install`` (sources are matched without their suffix, so ``install.html`` and
``install.md`` are one target) and its section whose header slug is ``linux``. Absolute URLs,
``mailto:`` and the like are not links between documents of a collection. Links inside fenced code
(as the markdown scanner, ``rag_service.markdown_lines``, finds it) are code, not links.
"""

from __future__ import annotations

import posixpath
import re
import sys
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from rag_service.markdown_lines import scan

#: suffixes a link target may carry for the same document (matched without them)
DOCUMENT_SUFFIXES = (".md", ".markdown", ".mdx", ".rst", ".html", ".htm", ".txt", ".ipynb")
#: file names that stand for their folder (``guide/`` links ``guide/index.md`` or ``guide/README.md``)
INDEX_NAMES = ("index", "readme")

# A markdown link is ``!?\[[^\]\n]*\]`` then ``_LINK_TARGET``, an HTML one ``<a\s[^>]*?`` then ``_HREF``, found by
# the scanners below: run by ``finditer`` as whole patterns, they rescanned from every ``[`` (``<a ``) to the next
# ``]`` (``>``) and from every ``](`` along its target, so a line of ``[a](b`` or lines of ``<a x`` with no ``>`` were
# quadratic (40,000 characters: 17 s). The scanners give the same matches, skipping the starts that would fail where
# an earlier one failed. The possessive ``++`` takes nothing back a match could use (the class excludes what follows).
_LINK_TEXT_END = re.compile(r"[\]\n]")
_LINK_TARGET = re.compile(r"\(\s*<?([^)\s>]++)>?(?:\s+\"[^\"]*\")?\s*\)")
_TARGET_START = re.compile(r"\(\s*<?")
_TARGET_RUN = re.compile(r"[^)\s>]*")
_HTML_OPEN = re.compile(r"<a\s", re.IGNORECASE)
_HREF = re.compile(r"href\s*=\s*[\"']([^\"']++)[\"']", re.IGNORECASE)
_HREF_WORD = re.compile("href", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True, slots=True)
class Link:
    """A resolved link: where it is written (a character offset) and what it points at."""

    offset: int
    target_key: str
    anchor: str


def document_key(source: str) -> str:
    """A source without its document suffix, and an index file (`index.md`, `README.md`) as its folder."""
    key = source.strip("/")
    lowered = key.lower()
    for suffix in DOCUMENT_SUFFIXES:
        if lowered.endswith(suffix):
            key = key[: -len(suffix)]
            break
    folder, _, name = key.rpartition("/")
    if name.lower() in INDEX_NAMES:
        key = folder
    return key


def slugify(heading: str) -> str:
    """The anchor slug of a heading, as GitHub and most site generators make it.

    Lower case, punctuation dropped, spaces to hyphens: ``"Install on Linux (x86)"`` -> ``install-on-linux-x86``.
    """
    text = unicodedata.normalize("NFKC", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r"\s", "-", text)


def find_links(text: str, *, source: str) -> list[Link]:
    """Every link of ``text`` (the stored text of the document keyed ``source``) to a document or a section."""
    fenced = scan(text).code_blocks
    links: list[Link] = []
    for start, target in [*markdown_links(text), *html_links(text)]:
        if text.startswith("!", start) or _inside(start, fenced):
            continue
        resolved = resolve(target, source=source)
        if resolved is not None:
            links.append(Link(start, *resolved))
    return sorted(set(links), key=lambda link: (link.offset, link.target_key, link.anchor))


def markdown_links(text: str) -> Iterator[tuple[int, str]]:
    """``(start, target)`` of each markdown link or image (``![``) of ``text``, in linear time."""
    pos = done = dead = 0  # no target starting before ``dead`` can match: one ending where a failed one did
    while (opener := text.find("[", pos)) >= 0 and (closer := _LINK_TEXT_END.search(text, opener + 1)) is not None:
        pos = closer.end()  # each "[" before this "]" or line end stops at it too
        if closer[0] == "\n" or not text.startswith("(", pos):
            continue
        head = _TARGET_START.match(text, pos)
        target = head.end() if head else pos
        if target < dead:
            continue
        found = _LINK_TARGET.match(text, pos)
        if found is None:
            run = _TARGET_RUN.match(text, target)
            dead = run.end() if run else target
            continue
        yield (opener - 1 if opener > done and text[opener - 1] == "!" else opener), found[1]
        pos = done = found.end()


def html_links(text: str) -> Iterator[tuple[int, str]]:
    """``(start, href)`` of each ``<a ... href="...">`` of ``text``, in linear time."""
    pos = 0
    while (opener := _HTML_OPEN.search(text, pos)) is not None:
        tag_end = text.find(">", opener.end())
        tag_end = len(text) if tag_end < 0 else tag_end
        for word in _HREF_WORD.finditer(text, opener.end(), tag_end):
            if (found := _HREF.match(text, word.start())) is not None:
                yield opener.start(), found[1]
                pos = found.end()
                break
        else:
            pos = tag_end  # each "<a " before this ">" fails as this one did


def is_relative_link(target: str) -> bool:
    """True for a path or ``#anchor`` inside the site (no scheme such as ``https:`` or ``mailto:``)."""
    target = target.strip()
    return bool(target) and not _SCHEME.match(target) and not target.startswith("//")


def resolve(target: str, *, source: str) -> tuple[str, str] | None:
    """``(target_key, anchor)`` of a link written in the document keyed ``source``; None if it leaves the collection."""
    target = target.strip()
    if not is_relative_link(target):
        return None
    path, _, anchor = target.partition("#")
    path = unquote(path.split("?", 1)[0])
    anchor = slugify(unquote(anchor)) if anchor else ""
    if not path:
        return document_key(source), anchor
    base = posixpath.dirname(source.strip("/"))
    joined = path.lstrip("/") if path.startswith("/") else posixpath.join(base, path)
    normalised = posixpath.normpath(joined)
    if normalised.startswith("..") or normalised == ".":
        return None
    return document_key(normalised), anchor


def _inside(offset: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``offset`` lies in one of ``spans`` (sorted, disjoint)."""
    i = bisect_right(spans, (offset, sys.maxsize)) - 1
    return i >= 0 and offset < spans[i][1]
