"""Line arithmetic of the ``code`` strategy: line starts, indentation, and the lines that go with a definition
(the comments, attributes and decorators right above it; the comments of its body right after it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Definition:
    """A definition in a text: ``lead`` is where its chunk may start (the comments, attributes and decorators right
    above it, or the header of the block it is the first statement of), ``start`` its own first line (decorators
    included), ``end`` past its last line; ``names`` extend the header path; ``children`` are the definitions
    nested in it (a class's methods), in order; a ``container`` (a Rust ``impl``, ``trait`` or ``mod``) is chunked as
    its children even where it would fit whole."""

    lead: int
    start: int
    end: int
    names: tuple[str, ...]
    children: list[Definition] = field(default_factory=list)
    container: bool = False


class Lines:
    """The line starts of a text: ``offset(n)`` is where 1-based line ``n`` starts (past the end: the text's end)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        position = text.find("\n")
        while position >= 0:
            self.starts.append(position + 1)
            position = text.find("\n", position + 1)

    def offset(self, line: int) -> int:
        return self.starts[line - 1] if line - 1 < len(self.starts) else len(self.text)


def line_start(text: str, position: int) -> int:
    """The start of the line holding ``position``."""
    return text.rfind("\n", 0, position) + 1


def line_end(text: str, position: int) -> int:
    """Past the end of the line holding ``position``, its newline included."""
    newline = text.find("\n", position)
    return len(text) if newline < 0 else newline + 1


def indent_width(line: str) -> int:
    """The width of ``line``'s indentation, a tab to the next multiple of 8."""
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(8))


def lead_start(text: str, start: int, is_lead: Callable[[int, int], int | None]) -> int:
    """``start`` (a line start) moved up over the lines right above it, no blank line between, that ``is_lead``
    accepts: given a line's ``(start, end)`` it returns where the lead goes on (the line's start, or the start of
    the block comment the line ends), or None to stop."""
    while start > 0:
        previous = line_start(text, start - 1)
        if not text[previous:start].strip():
            break
        moved = is_lead(previous, start)
        if moved is None or moved >= start:
            break
        start = moved
    return start


def comment_body_end(text: str, end: int, indent: int, marker: str = "#") -> int:
    """``end`` (a line start) moved past the comment lines right after it that are indented deeper than ``indent``:
    a function's comments after its last statement. Blank lines count only between such comment lines."""
    position = moved = end
    while position < len(text):
        after = line_end(text, position)
        line = text[position:after]
        body = line.strip()
        if body and not (body.startswith(marker) and indent_width(line) > indent):
            break
        position = after
        if body:
            moved = after
    return moved
