"""Uploaded files: a checked plain file name, stored under ``RAG_DATA_DIR/uploads/<collection>/``.

A file name with a path in it (``../x``, ``a/b``, ``C:\\x``), a NUL, or a leading dot is refused;
the resolved target is checked to lie inside the uploads folder before anything is written.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from rag_service.errors import ConfigurationError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
MAX_NAME_CHARS = 255


def safe_filename(name: str | None) -> str:
    """``name`` if it is a plain file name; ConfigurationError (HTTP 422) otherwise."""
    if not name or not name.strip():
        raise ConfigurationError("an uploaded file has no file name; send each file with a name such as notes.md")
    shown = name[:80]
    if "/" in name or "\\" in name or "\x00" in name or name.startswith(".") or ":" in name:
        raise ConfigurationError(
            f"uploaded file name {shown!r} is not a plain file name (no folders, '..', drive letters or "
            "leading dots); rename the file"
        )
    if len(name) > MAX_NAME_CHARS:
        raise ConfigurationError(f"uploaded file name {shown!r}... is longer than {MAX_NAME_CHARS} characters")
    return name


def collection_folder(uploads_root: Path, collection: str) -> Path:
    """The folder of one collection's uploads: a readable slug plus a hash, never a path from the name."""
    slug = _UNSAFE.sub("_", collection)[:60].strip(".") or "collection"
    digest = hashlib.sha256(collection.encode("utf-8")).hexdigest()[:10]
    return uploads_root / f"{slug}-{digest}"


def store_upload(uploads_root: Path, collection: str, filename: str, data: bytes) -> Path:
    """Write ``data`` atomically as ``filename`` in the collection's folder; returns the path."""
    name = safe_filename(filename)
    root = uploads_root.resolve()
    folder = collection_folder(root, collection)
    target = (folder / name).resolve()
    if target.parent != folder or not target.is_relative_to(root):
        raise ConfigurationError(f"uploaded file name {name[:80]!r} would be written outside the uploads folder")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
