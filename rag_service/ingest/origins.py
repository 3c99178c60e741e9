"""Checkouts that share source keys kept apart (``documents.origin``).

A file's key is its path relative to the checkout holding it (``source_keys``), so two checkouts' ``docs/a.md``
share one. A path run refuses a file whose key the collection holds from another checkout that still has
that file (it would silently replace that checkout's document); a key whose checkout moved, or no longer has
the file, passes to this run's. Each document's origin is recorded (before the write for the documents it
replaces, so one that fails is this run's to prune; after it for new ones), and a prune deletes only its own
(``source_keys.is_pruned``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from rag_service.db.database import Database
from rag_service.db.origins import TEXT_ORIGIN, record_origins, stored_origins
from rag_service.errors import DatabaseError
from rag_service.ingest.report import FileProblem, IngestReport


def claim_keys(
    db: Database, collection: str, files: Mapping[Path, tuple[str, str | None]], report: IngestReport
) -> tuple[list[Path], list[Path]]:
    """The files this run may index (``files``: each one's key and origin), in order, and those of them not
    stored yet (``record_new`` after the run); a file whose key another checkout holds is reported failed.
    Call under the collection's reindex lock."""
    claimed: dict[str, str] = {}
    kept: list[Path] = []
    new: list[Path] = []
    with db.transaction() as session:
        stored = stored_origins(session, collection=collection, sources=[key for key, _ in files.values()])
        for path, (key, origin) in files.items():
            holder = stored.get(key)
            if holder and origin is not None and holder != origin and _holds(holder, key):
                report.failed.append(FileProblem(key, _clash(path, holder)))
                continue
            kept.append(path)
            if key not in stored:
                new.append(path)
            elif origin is not None and holder != origin:
                claimed.setdefault(key, origin)  # a key repeated in this run: the first file is indexed
        record_origins(session, collection=collection, origins=claimed, only_unknown=False)
    return kept, new


def record_new(
    db: Database, collection: str, origins: Iterable[tuple[str, str | None]], report: IngestReport
) -> None:
    """Record the origins of documents this run stored for the first time (``(key, origin)``; the first of
    a repeated key is the one indexed). A database failure is a ``degraded`` line: those documents keep no
    origin (the rule for documents written before origins were kept) until the next run records it."""
    new: dict[str, str] = {}
    for key, origin in origins:
        if origin is not None:
            new.setdefault(key, origin)
    if not new:
        return
    try:
        with db.transaction() as session:
            record_origins(session, collection=collection, origins=new, only_unknown=True)
    except DatabaseError as exc:
        report.degraded.append(f"origins: not recorded ({exc}); the next run records them")


def record_texts(db: Database, collection: str, keys: Iterable[str], report: IngestReport) -> None:
    """Mark documents stored from text for the first time as such: no folder's prune deletes them."""
    record_new(db, collection, ((key, TEXT_ORIGIN) for key in keys), report)


def _holds(origin: str, key: str) -> bool:
    """Whether the folder ``origin`` still has the file ``key`` (else its checkout moved or dropped it)."""
    return origin != TEXT_ORIGIN and os.path.isfile(os.path.join(origin, key))


def _clash(path: Path, holder: str) -> str:
    return (
        f"the collection holds this key from another checkout, {holder}, which still has the file, so {path} "
        "would replace its document; index each checkout into a collection of its own (--collection), or pass "
        "--root a folder above both so their keys differ; not indexed"
    )
