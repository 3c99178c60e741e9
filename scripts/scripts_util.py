"""Small helpers shared by the scripts."""

from __future__ import annotations

from pathlib import Path


def replace_section(path: Path, name: str, body: str) -> None:
    """Put ``body`` between ``<!-- name:start -->`` and ``<!-- name:end -->`` in ``path`` (appended if absent)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text() if path.exists() else ""
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + ("\n\n" if text else "") + block + "\n"
    path.write_text(text)
