"""Uploaded files: a checked plain file name, staged under ``RAG_DATA_DIR/uploads/`` while it is read.

A file name with a path in it (``../x``, ``a/b``, ``C:\\x``), a NUL, or a leading dot is refused;
the resolved target is checked to lie inside the staging folder before anything is written. A file
is kept only until its text is loaded (the database keeps the text; a reindex reads it from there):
``staging_folder`` removes the folder with every file in it, loaded or refused, when the call ends
(``UniversalRAGService.read_uploads``). Servers before this one kept uploads in
``uploads/<collection slug>-<hash>/`` (``collection_folder``); ``forget_upload`` removes such a file when its
document is deleted.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rag_service.errors import ConfigurationError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
MAX_NAME_BYTES = 255


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
    size = len(name.encode("utf-8", errors="replace"))  # file systems bound a name's bytes, not its characters
    if size > MAX_NAME_BYTES:
        raise ConfigurationError(f"uploaded file name {shown!r}... is {size} bytes; rename it to {MAX_NAME_BYTES}")
    return name


def collection_folder(uploads_root: Path, collection: str) -> Path:
    """Where servers before this one kept a collection's uploads: a slug plus a hash of the name."""
    slug = _UNSAFE.sub("_", collection)[:60].strip(".") or "collection"
    digest = hashlib.sha256(collection.encode("utf-8")).hexdigest()[:10]
    return uploads_root / f"{slug}-{digest}"


#: a staging folder older than this was left by a process killed mid-request (a request reads its files in seconds)
STALE_STAGING_S = 6 * 3600


@contextmanager
def staging_folder(uploads_root: Path) -> Iterator[Path]:
    """A fresh folder under ``uploads_root`` for one request's files, removed with them at the end; folders a
    killed process left (older than ``STALE_STAGING_S``) are removed first."""
    uploads_root.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(uploads_root)
    folder = Path(tempfile.mkdtemp(dir=uploads_root, prefix=".staging-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _remove_stale_staging(uploads_root: Path) -> None:
    cutoff = time.time() - STALE_STAGING_S
    for left in uploads_root.glob(".staging-*"):
        try:
            stale = left.is_dir() and left.stat().st_mtime < cutoff
        except OSError:  # removed by another process meanwhile
            continue
        if stale:
            shutil.rmtree(left, ignore_errors=True)


def store_upload(folder: Path, filename: str, data: bytes) -> Path:
    """Write ``data`` atomically as ``filename`` in the staging ``folder``; returns the path."""
    name = safe_filename(filename)
    folder = folder.resolve()
    target = (folder / name).resolve()
    if target.parent != folder:
        raise ConfigurationError(f"uploaded file name {name[:80]!r} would be written outside the uploads folder")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def forget_upload(uploads_root: Path, collection: str, source: str) -> None:
    """Remove the file an older server kept for a now deleted document, if there is one."""
    if len(source.encode("utf-8", errors="replace")) > MAX_NAME_BYTES:
        return  # no upload's name (``safe_filename``); its path would be an OSError (name too long): a 500
    folder = collection_folder(uploads_root.resolve(), collection)
    target = (folder / source).resolve()
    if target.parent == folder and target.is_file():
        target.unlink(missing_ok=True)
