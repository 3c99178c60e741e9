"""Extracted text written as markdown: plain lines that must not read as structure, and verbatim blocks.

HTML and Word files are stored as markdown-like text so the ``markdown`` and ``html`` strategies see
their headings (``rag_service.markdown_lines``). Text that only looks like structure, a paragraph
"# of ferrets per cage" or a line "```", is escaped with a backslash, as markdown itself escapes it;
preformatted text is fenced, so its ``#`` comments stay code.
"""

from __future__ import annotations

import re

__all__ = ["escape_plain_line", "fence_code"]

#: what a line (without leading spaces) must start with to be read as an ATX header, a fence or an underline
_STRUCTURE = re.compile(r"#{1,6}(?:[ \t]|$)|`{3,}|~{3,}|(?:=+|-+)[ \t]*$")
_BACKTICKS = re.compile(r"`+")


def escape_plain_line(line: str) -> str:
    """``line`` (without leading spaces) with a ``\\`` before it if the markdown scanner would read it as
    a header, a fence or a setext underline; else ``line`` itself."""
    return "\\" + line if _STRUCTURE.match(line) else line


def fence_code(body: str) -> str:
    """``body`` verbatim inside a backtick fence longer than any backtick run in it (so nothing in it closes it)."""
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"
