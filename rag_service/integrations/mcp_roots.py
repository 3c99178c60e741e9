"""The folders ``rag mcp --allow-indexing`` lets an agent index, and the check of each path it names.

An agent is not the user at a shell: a poisoned page or document can tell it to index ``~/.aws/credentials``
and read it back with ``search_knowledge``. So ``index_paths`` reads only inside the allowed roots (the
server's working directory unless ``--allow-indexing DIR ...`` names others), judged after symbolic links and
``..`` are resolved, and never a path with a hidden part below its root (``.env``, ``.git/``, ``.aws/``): the
walk of a folder skips those, and a path named directly is refused the same way. ``rag reindex`` has no such
bound: a path a user names at a shell is theirs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rag_service.errors import ConfigurationError

#: how the refusals say to allow more
ALLOW_MORE = "start rag mcp with --allow-indexing DIR [DIR ...] to allow other folders"


def index_roots(folders: Sequence[str], *, cwd: Path | None = None) -> tuple[Path, ...]:
    """``--allow-indexing``'s folders, resolved (relative ones against ``cwd``, the working directory by
    default); none given: the working directory. One that is not a folder is a ConfigurationError naming it."""
    base = (cwd or Path.cwd()).resolve()
    if not folders and base in (Path(base.anchor), Path.home().resolve()):  # MCP clients often start servers in /
        raise ConfigurationError(
            f"rag mcp --allow-indexing runs in {base}, which would let an agent index every file below it; "
            "name the folders it may index: --allow-indexing DIR [DIR ...]"
        )
    roots: list[Path] = []
    for folder in folders or ["."]:
        root = (base / os.path.expanduser(folder)).resolve()
        if not root.is_dir():
            raise ConfigurationError(
                f"--allow-indexing {folder!r} is not a folder ({root}); name folders an agent may index"
            )
        roots.append(root)
    return tuple(dict.fromkeys(roots))


def describe(roots: Sequence[Path]) -> str:
    """The roots as the tool's description and its refusals name them."""
    return ", ".join(str(root) for root in roots)


def refused_path(path: str, roots: Sequence[Path], *, cwd: Path | None = None) -> str | None:
    """Why ``index_paths`` may not read ``path`` (one line naming it, the roots and how to allow more), or None.

    The path is resolved as the indexer reads it: relative to the working directory, symbolic links and ``..``
    followed. It must lie inside a root, with no hidden part (a name starting with ``.``) below that root."""
    if "\x00" in path:  # resolve() raised "embedded null byte": the library's line, before any file is asked
        return f"{path!r:.60} holds a NUL byte, which no file name has; remove it"
    resolved = ((cwd or Path.cwd()) / path).resolve()
    inside = [root for root in roots if resolved.is_relative_to(root)]
    if not inside:
        return (
            f"{path!r} is outside the folders this server may index ({describe(roots)}); "
            f"name a path inside them, or {ALLOW_MORE}"
        )
    below = resolved.relative_to(max(inside, key=lambda root: len(root.parts)))
    hidden = next((part for part in below.parts if part.startswith(".")), None)
    if hidden is not None:
        shown = repr(path) if str(resolved) == path else f"{path!r} ({resolved})"
        return (
            f"{shown} has the hidden part {hidden!r}; hidden files and folders are never indexed here "
            f"(this server may index {describe(roots)})"
        )
    return None


def check_paths(paths: Sequence[str], roots: Sequence[Path], *, cwd: Path | None = None) -> str | None:
    """The first refusal among ``paths`` (with how many others were refused), or None when all may be read."""
    refusals = [problem for path in paths if (problem := refused_path(path, roots, cwd=cwd)) is not None]
    if not refusals:
        return None
    more = f" ({len(refusals) - 1} more path(s) refused; nothing was indexed)" if len(refusals) > 1 else ""
    return refusals[0] + (more or " (nothing was indexed)")
