"""The stored documents of a run's paths whose files are gone (``source_keys.is_pruned``), deleted with ``--prune``."""

from __future__ import annotations

import posixpath

from rag_service.db import documents as repo
from rag_service.db.database import Database
from rag_service.ingest.source_keys import ROOT_SOURCE, is_pruned


def unseen_documents(
    db: Database,
    collection: str,
    *,
    scope: list[tuple[str, str | None]],
    seen: set[str],
    unreadable: list[str],
    delete: bool,
) -> tuple[list[str], int]:
    """The sources of the documents in ``scope`` ((key, origin) of each path of the run) whose files were not
    ``seen``, and how many of them were deleted (with ``delete``, in one synchronous commit; else none)."""
    keys = [key for key, _ in scope]
    whole = ROOT_SOURCE in keys  # a checkout's root: every document of the collection is in scope
    with db.transaction() as session:
        repo.commit_synchronously(session)
        absolute = [posixpath.join(base, key) for key, base in scope if base]  # keys stored before a checkout
        found = repo.documents_in_scope(session, collection=collection, prefixes=None if whole else keys + absolute)
        gone = [d for d in found if is_pruned(d.source, origin=d.origin, scope=scope, seen=seen, unreadable=unreadable)]
        deleted = repo.delete_documents(session, collection=collection, ids=[d.id for d in gone]) if delete else 0
        return [d.source for d in gone], deleted
