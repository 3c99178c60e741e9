"""``--prune``: delete the stored documents of the run's paths whose files are gone (``source_keys.is_pruned``)."""

from __future__ import annotations

from rag_service.db import documents as repo
from rag_service.db.database import Database
from rag_service.db.origins import stored_origins
from rag_service.ingest.source_keys import ROOT_SOURCE, is_pruned


def delete_unseen(
    db: Database, collection: str, *, scope: list[tuple[str, str | None]], seen: set[str], unreadable: list[str]
) -> int:
    """Delete the documents in ``scope`` ((key, origin) of each path of the run) whose files were not ``seen``,
    in one synchronous commit; returns how many."""
    keys = [key for key, _ in scope]
    with db.transaction() as session:
        repo.commit_synchronously(session)
        found = repo.documents_in_scope(session, collection=collection, prefixes=None if ROOT_SOURCE in keys else keys)
        origins = stored_origins(session, collection=collection, sources=[d.source for d in found])
        gone = [
            d.id
            for d in found
            if is_pruned(d.source, origin=origins.get(d.source), scope=scope, seen=seen, unreadable=unreadable)
        ]
        return repo.delete_documents(session, collection=collection, ids=gone)
