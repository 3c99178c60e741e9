"""Source keys: the name a file's document is stored under, the same from any working directory.

A key is the file's path relative to ``root`` when given, else to the checkout holding it (the nearest
folder above with ``.git``), else its absolute path (POSIX style). Also here: the keys earlier versions
stored, and which stored keys a pruning run may delete.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rag_service.errors import ConfigurationError

#: the source key of the folder sources are relative to (the checkout root or ``root``)
ROOT_SOURCE = "."


def _checkout_holding(resolved: Path, known: dict[Path, Path | None] | None) -> Path | None:
    """The nearest folder at or above ``resolved`` holding ``.git`` (a checkout's root), if any; ``known``
    memoises folders already looked at (one run's files share their folders)."""
    walked: list[Path] = []
    found: Path | None = None
    folder = resolved
    while known is None or folder not in known:  # one step for a file whose folder was seen
        walked.append(folder)
        if os.path.exists(folder / ".git"):  # False, not an error, where the path cannot be looked at
            found = folder
            break
        if folder.parent == folder:
            break
        folder = folder.parent
    else:
        found = known[folder]
    if known is not None:
        known.update((folder, found) for folder in walked)
    return found


def source_for(
    path: Path, root: Path | None = None, *, known: dict[Path, Path | None] | None = None, follow_link: bool = True
) -> str:
    """The stored source key of a file or folder, the same from any working directory (POSIX style).

    Relative to ``root`` when given, else to the checkout holding it (the nearest folder above with
    ``.git``); a path outside both is stored absolute. So ``rag reindex docs/`` from a checkout's root
    and ``rag reindex .`` from ``docs/`` name the same files the same way. A link is keyed by its target,
    or, with ``follow_link`` False (a link a walk did not follow), by where the link itself lies.
    """
    resolved = path.resolve() if follow_link else path.parent.resolve() / path.name
    base = _base(resolved, root, known)
    return resolved.relative_to(base).as_posix() if base is not None else resolved.as_posix()


def keyed_source(
    path: Path, root: Path | None = None, *, known: dict[Path, Path | None] | None = None
) -> tuple[str, str | None]:
    """``source_for(path, root)`` and its origin, from one resolve: the folder the key is relative to (``root``
    or the checkout's root), absolute and POSIX style; None where the key is absolute. Two checkouts'
    ``docs/a.md`` share a key, not an origin."""
    resolved = path.resolve()
    base = _base(resolved, root, known)
    if base is None:
        return resolved.as_posix(), None
    return resolved.relative_to(base).as_posix(), base.as_posix()


def _base(resolved: Path, root: Path | None, known: dict[Path, Path | None] | None) -> Path | None:
    """The folder a resolved path's key is relative to, if it lies below one."""
    folder = resolved if os.path.isdir(resolved) else resolved.parent  # an unreadable folder is keyed too
    base = root.resolve() if root is not None else _checkout_holding(folder, known)
    return base if base is not None and resolved.is_relative_to(base) else None


def check_root(root: str | Path, paths: Sequence[str | Path]) -> None:
    """Raise ConfigurationError (one line) unless ``root`` is a folder holding every one of ``paths``.

    Outside it a path would silently be keyed by its absolute path, as if ``--root`` were not given.
    """
    base = Path(root)
    if not base.is_dir():
        what = "is not a folder" if base.exists() else "does not exist"
        raise ConfigurationError(f"--root {root} {what}; give the folder the stored sources are relative to")
    resolved = base.resolve()
    outside = [str(p) for p in paths if not Path(p).resolve().is_relative_to(resolved)]
    if outside:
        names = ", ".join(outside)
        verb = "are" if len(outside) > 1 else "is"
        raise ConfigurationError(f"{names} {verb} not under --root {root}; give paths inside it, or another --root")


def legacy_source_for(path: Path) -> str | None:
    """The key versions before issue 13 stored: relative to the working directory, when inside it."""
    resolved = path.resolve()
    cwd = Path.cwd().resolve()
    return resolved.relative_to(cwd).as_posix() if resolved.is_relative_to(cwd) and resolved != cwd else None


def _below_any(source: str, folders: Sequence[str]) -> bool:
    """Whether ``source`` is one of ``folders`` or lies below one (``"."`` holds every source)."""
    return any(f == ROOT_SOURCE or source == f or source.startswith(f.rstrip("/") + "/") for f in folders)


def is_pruned(
    source: str,
    *,
    origin: str | None = None,
    scope: Sequence[tuple[str, str | None]],
    seen: set[str],
    unreadable: Sequence[str],
) -> bool:
    """Whether a pruning run over ``scope`` deletes the stored document ``source`` of ``origin``.

    ``scope`` holds the run's paths as (key, origin) pairs. A document is deleted when its file was not
    ``seen`` and it lies in one of them: at or below its folder, or, for ``"."`` (the checkout root or
    ``--root`` itself), anywhere relative; and it came from that path's origin, or from where is not known
    (NULL: written before origins were kept). An absolute key below a path's origin (stored before a ``git init``
    or without ``--root``) is taken as relative to it. So another checkout's documents and documents given as
    text (origin '') are kept. Documents at or below an ``unreadable`` folder are kept too: their files may well
    exist.
    """
    if source in seen:
        return False
    for key, base in scope:
        relative, known = _below_root(source, origin, base)
        in_path = _below_any(relative, [key]) if key != ROOT_SOURCE else not relative.startswith("/")
        if (known is None or known == base) and in_path and not _below_any(relative, unreadable):
            return True
    return False


def _below_root(source: str, origin: str | None, base: str | None) -> tuple[str, str | None]:
    """``source`` and ``origin`` as relative to ``base`` where ``source`` is an absolute key of a file below it."""
    root = (base or "").rstrip("/") + "/"
    if origin is None and base and source.startswith(root):
        return source[len(root) :], base
    return source, origin
