"""A source met twice in one run (two checkouts' ``docs/a.md`` into one collection, a list of texts repeating a
name): the later document is reported failed, never silently written over the first."""

from __future__ import annotations

from rag_service.ingest.progress import Progress
from rag_service.ingest.report import FileProblem, IngestReport

#: why a document whose source came earlier in the same run is not indexed
REPEATED_SOURCE = (
    "repeats the source of an earlier document of this run (a collection holds one document per source, so it "
    "would replace that one): give it a source of its own; not indexed"
)


def repeated_source(source: str, seen: dict[str, str], report: IngestReport, bar: Progress, *, path: str = "") -> bool:
    """Whether ``source`` came earlier in this run; the later document is then reported failed, not silently
    written over the first. ``seen`` maps each source to its file's ``path`` (files: both are named)."""
    if source in seen:
        kept = seen[source]
        reason = (
            REPEATED_SOURCE
            if not (path and kept)
            else (
                f"{path} has the same source as {kept}, indexed earlier in this run (a collection holds one document "
                "per source): index each checkout into a collection of its own, or pass --root above both; not indexed"
            )
        )
        report.failed.append(FileProblem(source, reason))
        bar.advance(chunks=0)
        return True
    seen[source] = path
    return False
