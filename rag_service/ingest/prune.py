"""The stored documents of a run's paths it did not index (``source_keys.is_pruned``), deleted with ``--prune``.

Either their files are gone, or they are still there and the run left them out: passed over (git ignores them
now, vendored, a virtualenv, a lock file, hidden) or skipped as minified. Both are stale copies of nothing the run
would index, so ``--prune`` deletes both, and a run without it names both, each with its own words.
"""

from __future__ import annotations

import os
import posixpath

from rag_service.db import documents as repo
from rag_service.db.database import Database
from rag_service.errors import DatabaseError
from rag_service.ingest.report import IngestReport
from rag_service.ingest.source_keys import ROOT_SOURCE, is_pruned


def unseen_documents(
    db: Database,
    collection: str,
    *,
    scope: list[tuple[str, str | None]],
    seen: set[str],
    unreadable: list[str],
    delete: bool,
) -> tuple[list[str], list[str], int]:
    """The sources of the documents in ``scope`` ((key, origin) of each path of the run) that were not ``seen``:
    those whose files are gone, those whose files are still there, and how many of them all were deleted (with
    ``delete``, in one synchronous commit; else none)."""
    keys = [key for key, _ in scope]
    whole = ROOT_SOURCE in keys  # a checkout's root: every document of the collection is in scope
    with db.transaction() as session:
        repo.commit_synchronously(session)
        absolute = [posixpath.join(base, key) for key, base in scope if base]  # keys stored before a checkout
        found = repo.documents_in_scope(session, collection=collection, prefixes=None if whole else keys + absolute)
        unseen = [
            d for d in found if is_pruned(d.source, origin=d.origin, scope=scope, seen=seen, unreadable=unreadable)
        ]
        deleted = repo.delete_documents(session, collection=collection, ids=[d.id for d in unseen]) if delete else 0
    bases = [base for _, base in scope if base]
    there = {d.source for d in unseen if _file_exists(d.source, d.origin, bases)}
    return [d.source for d in unseen if d.source not in there], sorted(there), deleted


def _file_exists(source: str, origin: str | None, bases: list[str]) -> bool:
    """Whether the file of a stored document is still there: ``source`` absolute, or below its ``origin``, or,
    where the origin is not known (stored before origins were kept), below one of the run's ``bases``."""
    if posixpath.isabs(source):
        return os.path.lexists(source)
    return any(os.path.lexists(posixpath.join(base, source)) for base in ([origin] if origin else bases))


def prune_unseen(
    db: Database,
    report: IngestReport,
    *,
    scope: list[tuple[str, str | None]],
    seen: set[str],
    unreadable: list[str],
    delete: bool,
) -> None:
    """Delete (``delete``) or name in ``report`` (``gone``, ``left_out``) the unseen documents of the run's
    ``scope``. A lost database here leaves what the run wrote written: a degraded line says what was not done."""
    try:
        gone, left_out, report.deleted = unseen_documents(
            db, report.collection, scope=scope, seen=seen, unreadable=unreadable, delete=delete
        )
    except DatabaseError as exc:
        report.degraded.append(f"{'prune' if delete else 'gone files'}: not done ({exc}); run it again")
        return
    if not delete:
        report.gone, report.left_out = gone, left_out
