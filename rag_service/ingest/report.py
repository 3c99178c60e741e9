"""The report every ingest run ends with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rag_service.ingest.passed_over import (
    DOCS_BUILD,
    DOCS_THEME,
    GIT_FILE,
    GIT_FOLDER,
    LOCK_FILE,
    NODE_MODULES,
    VIRTUALENV,
)
from rag_service.languages import markup_of

#: skipped files named per reason in the summary; the rest are counted (a folder of 300 images is one line)
SKIPPED_NAMED = 3
#: how a skipped file's reason ends when it lists the supported file types: the summary writes the list once
SUPPORTED_TAIL = "; supported: "


def file_reason(path: object, message: str) -> str:
    """A loader's one-line error about ``path`` as a report's reason, which its line already prefixes with the
    source: the leading mention of the path dropped (``"x.pdf is not a readable PDF"`` -> ``"not a readable PDF"``)."""
    for lead in (f"cannot index {path}: ", f"cannot read {path}: ", f"{path}: ", f"{path} is ", f"{path} "):
        if message.startswith(lead):
            return message[len(lead) :]
    return message


@dataclass(frozen=True, slots=True)
class FileProblem:
    """A file that failed or was skipped, and why (one line)."""

    source: str
    reason: str


@dataclass(slots=True)
class IngestReport:
    """Counts of one ``index_paths`` / ``reindex_all`` run."""

    collection: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    rekeyed: int = 0  # documents found under an earlier key of their file and renamed (``former_keys``)
    failed: list[FileProblem] = field(default_factory=list)
    skipped: list[FileProblem] = field(default_factory=list)
    chunks_written: int = 0
    chunks_embedded: int = 0
    embeddings_reused: int = 0
    filtered: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    embedding_seconds: float = 0.0
    chunking_seconds: float = 0.0
    #: stages that could not run as configured (e.g. LLM summaries), one line each; empty when all ran
    degraded: list[str] = field(default_factory=list)
    #: chunk-graph edges written, and the seconds spent finding and writing them (inside the writes)
    edges_written: int = 0
    graph_seconds: float = 0.0
    #: ``reindex_all`` switching the stored model: whether the switch finished (one line); empty: no switch
    model_switch: str = ""
    #: documents written without a chunk (empty, or only what the garbage filter drops): stored, never found
    without_chunks: list[str] = field(default_factory=list)
    #: a stop signal (SIGINT, SIGTERM) ended the run: the counts are what it wrote before
    interrupted: bool = False
    #: stored documents in the walked folders whose files are gone, left stored (a run without ``prune``)
    gone: list[str] = field(default_factory=list)
    #: stored documents in the walked folders whose files are still there but not indexed now (passed over, or
    #: skipped as minified), left stored (a run without ``prune``)
    left_out: list[str] = field(default_factory=list)
    #: chunks written mostly of text the embedding model cannot read (Thai, Han, emoji for MiniLM): keywords only
    unreadable_chunks: int = 0
    #: what the walks passed over on purpose, by kind (``passed_over``: git_folder, git_file, node_modules,
    #: virtualenv, lock_file), each a source key (a folder's ending in ``/``); one line in ``lines()``
    passed_over: dict[str, list[str]] = field(default_factory=dict)

    @property
    def filtered_total(self) -> int:
        """Pieces dropped by the garbage filter."""
        return sum(self.filtered.values())

    @property
    def ok(self) -> bool:
        """True when no document failed."""
        return not self.failed

    def add_filtered(self, counts: dict[str, int]) -> None:
        """Accumulate garbage-filter counts by reason."""
        for reason, count in counts.items():
            self.filtered[reason] = self.filtered.get(reason, 0) + count

    def merge(self, other: IngestReport) -> None:
        """Fold ``other``, a run on the same collection (one per strategy of an upload), into this report:
        counts and seconds add up, lists concatenate (``degraded`` keeps one line per run)."""
        if other.collection != self.collection:
            raise ValueError(f"the report of collection {other.collection!r} cannot merge into {self.collection!r}")
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.rekeyed += other.rekeyed
        self.failed += other.failed
        self.skipped += other.skipped
        self.chunks_written += other.chunks_written
        self.chunks_embedded += other.chunks_embedded
        self.embeddings_reused += other.embeddings_reused
        self.add_filtered(other.filtered)
        self.seconds += other.seconds
        self.embedding_seconds += other.embedding_seconds
        self.chunking_seconds += other.chunking_seconds
        self.degraded += other.degraded
        self.edges_written += other.edges_written
        self.graph_seconds += other.graph_seconds
        self.model_switch = other.model_switch or self.model_switch  # the later run's word on a switch
        self.without_chunks += other.without_chunks
        self.interrupted = self.interrupted or other.interrupted
        self.gone += other.gone
        self.left_out += other.left_out
        self.unreadable_chunks += other.unreadable_chunks
        for kind, sources in other.passed_over.items():
            self.passed_over.setdefault(kind, []).extend(sources)

    def lines(self) -> list[str]:
        """Human-readable summary."""
        filtered = ", ".join(f"{k} {v}" for k, v in sorted(self.filtered.items())) or "none"
        out = [
            f"collection {self.collection!r}: {self.added} added, {self.updated} updated, "
            f"{self.unchanged} unchanged, {self.deleted} deleted, {len(self.failed)} failed, "
            f"{len(self.skipped)} skipped",
            f"chunks: {self.chunks_written} written ({self.chunks_embedded} embedded, "
            f"{self.embeddings_reused} reused vectors); filtered: {filtered}",
            f"time: {self.seconds:.2f} s ({self.embedding_seconds:.2f} s embedding, "
            f"{self.chunking_seconds:.2f} s chunking, {self.graph_seconds:.2f} s graph: {self.edges_written} edges)",
        ]
        if self.rekeyed:
            out.append(f"re-keyed: {self.rekeyed} documents stored under an earlier key of their file")
        out += [f"failed: {p.source}: {p.reason}" for p in self.failed]
        out += skipped_lines(self.skipped)
        out += [passed_over_line(self.passed_over)] if any(self.passed_over.values()) else []
        if self.without_chunks:
            named = _named(self.without_chunks)
            why = "empty, or only markup the garbage filter drops"
            if any(markup_of(source) is not None for source in self.without_chunks):
                why += " (an include is not followed: index the file it names)"
            out.append(f"no chunks: {named}: {why}; nothing to search")
        if self.gone:
            out.append(_unseen_line(self.gone, "gone: {named}"))
        if self.left_out:
            now = "passed over or skipped now: {named}; still searchable in their previous version"
            out.append(_unseen_line(self.left_out, now))
        if self.unreadable_chunks:
            out.append(
                f"unreadable: {self.unreadable_chunks} chunks are mostly text the embedding model cannot read (e.g. "
                "Thai, Chinese, emoji): they are found by their words only; a multilingual RAG_EMBEDDING_MODEL "
                "reads them"
            )
        out += [f"degraded: {line}" for line in self.degraded]
        out += [self.model_switch] if self.model_switch else []
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = asdict(self)
        data["filtered_total"] = self.filtered_total
        return data


def _named(sources: list[str]) -> str:
    """Up to ``SKIPPED_NAMED`` of ``sources``, and how many more."""
    more = len(sources) - SKIPPED_NAMED
    return ", ".join(sources[:SKIPPED_NAMED]) + (f" and {more} more" if more > 0 else "")


#: each kind of what a walk passes over, as the report counts it (one, many)
PASSED_OVER_WORDS = {
    GIT_FOLDER: ("folder git ignores", "folders git ignores"),
    GIT_FILE: ("file git ignores", "files git ignores"),
    NODE_MODULES: ("node_modules folder", "node_modules folders"),
    VIRTUALENV: ("virtualenv", "virtualenvs"),
    DOCS_BUILD: ("documentation build", "documentation builds"),
    DOCS_THEME: ("documentation theme folder", "documentation theme folders"),
    LOCK_FILE: ("lock file", "lock files"),
}


def passed_over_line(passed: dict[str, list[str]]) -> str:
    """One line for what the walks passed over: a count per kind with up to ``SKIPPED_NAMED`` names, and how
    to index one anyway (``passed over: 3 folders git ignores (node_modules/, venv/, build/), 2 lock files
    (poetry.lock, yarn.lock); name a path to index it anyway``)."""
    parts = []
    for kind, sources in sorted(passed.items(), key=lambda item: list(PASSED_OVER_WORDS).index(item[0])):
        if sources:
            one, many = PASSED_OVER_WORDS[kind]
            parts.append(f"{len(sources)} {one if len(sources) == 1 else many} ({_named(sorted(sources))})")
    return f"passed over: {', '.join(parts)}; name a path to index it anyway"


def skipped_lines(skipped: list[FileProblem]) -> list[str]:
    """One line per reason, naming up to ``SKIPPED_NAMED`` of its files and counting the rest; the supported
    file types once, on the last line of an unsupported type (a repository's images, lock files and data
    would otherwise repeat the list on every line)."""
    groups: dict[str, list[str]] = {}
    listed: set[str] = set()  # reasons that ended with the supported types (one list, the loader's)
    supported = ""
    for problem in skipped:
        reason, tail, types = problem.reason.partition(SUPPORTED_TAIL)
        if tail:
            listed.add(reason)
            supported = types
        groups.setdefault(reason, []).append(problem.source)
    lines: list[str] = []
    last_listed = -1
    for reason, sources in groups.items():
        if len(sources) <= SKIPPED_NAMED:
            lines += [f"skipped: {source}: {reason}" for source in sources]
        else:
            named = ", ".join(sources[:SKIPPED_NAMED])
            lines.append(f"skipped: {len(sources)} files, {named} and {len(sources) - SKIPPED_NAMED} more: {reason}")
        if reason in listed:
            last_listed = len(lines) - 1
    if last_listed >= 0:
        lines[last_listed] += SUPPORTED_TAIL + supported
    return lines


def _unseen_line(sources: list[str], state: str) -> str:
    """The line naming stored documents a run did not index (``state`` holds ``{named}``), and the --prune hint."""
    whose = "document's file is" if len(sources) == 1 else "documents' files are"
    them = "it" if len(sources) == 1 else "them"
    return f"{len(sources)} stored {whose} {state.format(named=_named(sources))}; run with --prune to delete {them}"
