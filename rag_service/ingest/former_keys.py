"""A file's document found under an earlier key of the file and re-keyed, not indexed twice.

A file's key depends on where it is relative to (``source_keys``): its absolute path outside a checkout, its
path below the checkout's root or ``--root``, and below the working directory in versions before issue 13. A
``git init``, a ``--root`` given on one run and not the next, or an upgrade changes the key of a file that did
not change; its stored document is found by the file it names (its key joined to its origin) and re-keyed. A
key alike but of another folder's file (the same ``a.md`` of two folders) names another file, and is left.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from sqlalchemy.orm import Session

from rag_service.db import documents as repo
from rag_service.db.collections import collection_exists
from rag_service.db.origins import rename_document
from rag_service.ingest.source_keys import legacy_source_for


def former_keys(path: Path) -> list[str]:
    """Keys the file's document may be stored under from earlier runs: its absolute path (first), and its path
    below each folder above it (``names_file`` tells which stored one is this file's)."""
    parts = path.resolve().parts
    return [PurePosixPath(*parts).as_posix(), *(PurePosixPath(*parts[i:]).as_posix() for i in range(1, len(parts)))]


def names_file(source: str, origin: str | None, *, resolved: str, legacy: str | None) -> bool:
    """Whether the stored document ``source`` of ``origin`` is the file at ``resolved`` (its absolute path): its key
    joined to its origin is the file; without an origin (an absolute key, or one written before origins were
    kept), its key is the file's absolute path or ``legacy``, the working-directory-relative key of versions before
    issue 13. A document given as text (origin '') is no file's."""
    if origin is None:
        return source in (resolved, legacy)
    return bool(origin) and posixpath.join(origin, source) == resolved


def rekey_former_documents(
    session: Session, collection: str, missing: Mapping[Path, tuple[str, str | None]], *, current: set[str]
) -> dict[str, repo.StoredDocument]:
    """Re-key the stored documents of the ``missing`` files (each one's key and origin, not stored under that key)
    found under a former key of the same file; returns them by their new key. Keys in ``current`` (this run's)
    are other files' documents, never taken."""
    if not missing or not collection_exists(session, collection):  # a first index: nothing stored to re-key
        return {}
    former = {path: former_keys(path) for path in missing}
    candidates = sorted({key for keys in former.values() for key in keys} - current)
    stored = repo.find_documents(session, collection=collection, sources=candidates) if candidates else {}
    rekeyed: dict[str, repo.StoredDocument] = {}
    for path, (key, origin) in missing.items():
        keys = former[path]  # the file's absolute path first
        legacy = legacy_source_for(path)
        match = next(
            (
                k
                for k in keys
                if k in stored and names_file(stored[k].source, stored[k].origin, resolved=keys[0], legacy=legacy)
            ),
            None,
        )
        if match is None or key in rekeyed:  # a key repeated in this run: the first file's
            continue
        doc = stored.pop(match)
        rename_document(session, collection=collection, document_id=doc.id, source=key, origin=origin)
        rekeyed[key] = repo.StoredDocument(doc.id, key, doc.content_hash, doc.chunker, origin)
    return rekeyed
