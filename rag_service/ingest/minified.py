"""Minified or generated code and style sheets, which are refused: their chunks would be cut mid-token and
match nothing anyone searches for. A run reports them as skipped, not failed: nothing is wrong with the file.

A file is taken for minified when its name says so (``app.min.js``, ``site.min.css``), when one line is over
``MAX_CODE_LINE_CHARS``, or when lines over ``LONG_LINE_CHARS`` hold at least ``MINIFIED_SHARE`` of its
characters (``MINIFIED_MIN_CHARS`` or more) with almost no whitespace in them (under ``MINIFIED_SPACE``): a
bundle is one dense line, while ordinary code with a long line (a string of prose, a data table ``[1, 2, 3,
...]``) keeps most of its text in short lines or has a space every few characters.
"""

from __future__ import annotations

from pathlib import Path

from rag_service.errors import GeneratedFileError

#: a line longer than this marks minified or generated code, whatever the rest of the file
MAX_CODE_LINE_CHARS = 20_000
#: lines longer than this count as long for the share rule
LONG_LINE_CHARS = 1_000
#: the share of a file's characters in long lines from which it is minified, if they are dense
MINIFIED_SHARE = 0.9
#: long lines holding fewer characters than this are left alone (a small file with one long line)
MINIFIED_MIN_CHARS = 5_000
#: the most whitespace per character long lines of minified code have (bundles measured: 1.4-5.8%)
MINIFIED_SPACE = 0.1
#: style sheets are checked as code is
STYLE_SUFFIXES = (".css", ".scss", ".less")

_REFUSED = "minified or generated code is not indexed; index its source instead"


def check_not_minified(path: Path, text: str) -> None:
    """Raise GeneratedFileError (a DocumentReadError) when ``text`` (the file ``path``) is minified or generated
    code (module doc)."""
    lines = text.split("\n")
    longest = max(lines, key=len, default="")
    if len(longest) > MAX_CODE_LINE_CHARS:
        number = lines.index(longest) + 1
        raise GeneratedFileError(f"{path} has a line of {len(longest):,} characters (line {number}): {_REFUSED}")
    long = [line for line in lines if len(line) > LONG_LINE_CHARS]
    in_long = sum(len(line) for line in long)
    if in_long >= MINIFIED_MIN_CHARS and in_long >= MINIFIED_SHARE * len(text):
        spaces = sum(line.count(" ") + line.count("\t") for line in long)
        if spaces < MINIFIED_SPACE * in_long:
            raise GeneratedFileError(
                f"{path} has {in_long / len(text):.0%} of its text in dense lines of over {LONG_LINE_CHARS:,} "
                f"characters (the longest: {len(longest):,}, line {lines.index(longest) + 1}): {_REFUSED}"
            )
    if path.stem.lower().endswith(".min"):
        raise GeneratedFileError(
            f"{path} is named as minified code (.min): it is not indexed; index its source instead"
        )
