"""Markdown-documentation evaluation sets: ``docs/``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

The qrels judge sections, named ``<file>#<n>``: ``<file>`` is the path of a file under ``docs/``
(POSIX, relative to it) and ``<n>`` its section number (``evaluation.sections``). A retrieved chunk
counts for the section that holds its ``match_start`` (the start of the child chunk that matched,
also when the result was expanded to its parent). The ranked list of a query is its chunks in
relevance order, each section once, at the rank of its first chunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import cast

from rag_service.config import Settings
from rag_service.errors import DocumentReadError
from rag_service.evaluation.beir import read_judged_queries
from rag_service.evaluation.sections import SectionIndex, sections
from rag_service.ingest.loaders import load_document

__all__ = ["DocSet", "SectionMapper", "is_docset", "load_docset", "rank_sections"]

DOCS_FOLDER = "docs"
#: ``RAG_MAX_FILE_BYTES``'s default, for callers without settings
DEFAULT_MAX_BYTES = cast(int, next(f.default for f in fields(Settings) if f.name == "max_file_bytes"))


@dataclass(frozen=True, slots=True)
class DocSet:
    """A loaded documentation set; ``files`` maps each ``docs/``-relative POSIX name to its path."""

    root: Path
    docs_dir: Path
    files: dict[str, Path]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    split: str


def is_docset(dataset_dir: Path) -> bool:
    """True when ``dataset_dir`` has the documentation layout (a ``docs/`` folder, no ``corpus.jsonl``)."""
    return (dataset_dir / DOCS_FOLDER).is_dir() and not (dataset_dir / "corpus.jsonl").exists()


def load_docset(dataset_dir: Path, *, split: str = "test", max_bytes: int = DEFAULT_MAX_BYTES) -> DocSet:
    """Read a documentation set; every qrels id must name ``<file under docs/>#<section number>`` of a
    section the file has (its text read as indexing reads it, files up to ``max_bytes``)."""
    root = Path(dataset_dir)
    docs_dir = root / DOCS_FOLDER
    if not docs_dir.is_dir():
        raise DocumentReadError(f"{docs_dir} is missing; a documentation set has docs/, queries.jsonl, qrels/")
    queries, qrels = read_judged_queries(root, split)
    files = {p.relative_to(docs_dir).as_posix(): p for p in sorted(docs_dir.rglob("*")) if p.is_file()}
    numbers: dict[str, range] = {}
    for qid, grades in qrels.items():
        for section_id in grades:
            name, sep, number = section_id.rpartition("#")
            if not sep or not number.isdigit():
                raise DocumentReadError(
                    f"qrels/{split}.tsv: {section_id!r} (query {qid}) is not '<file>#<section number>'; fix the row"
                )
            if name not in files:
                raise DocumentReadError(
                    f"qrels/{split}.tsv: {section_id!r} (query {qid}) names a file not under {docs_dir}; "
                    "add the file or fix the row"
                )
            if name not in numbers:
                found = sections(load_document(files[name], max_bytes=max_bytes).text, name)
                numbers[name] = range(found[0].number, found[-1].number + 1)
            if int(number) not in numbers[name]:
                raise DocumentReadError(
                    f"qrels/{split}.tsv: {section_id!r} (query {qid}): {name} has {_numbers(numbers[name])}; "
                    "fix the row"
                )
    return DocSet(root=root, docs_dir=docs_dir, files=files, queries=queries, qrels=qrels, split=split)


def _numbers(found: range) -> str:
    """``sections 1-3``, or ``only section 0``."""
    return f"sections {found.start}-{found.stop - 1}" if len(found) > 1 else f"only section {found.start}"


class SectionMapper:
    """Maps a stored chunk (its ``source`` and ``match_start``) to the id ``<file>#<n>`` of its section.

    ``texts`` gives each file's stored text (offsets refer to it). ``sources`` maps each stored source
    key to its file's name: then only those keys match. Without it (sources stored by another tool) a
    source is matched to the file whose ``docs/``-relative name it ends with (the longest such name).
    """

    def __init__(self, texts: dict[str, str], *, sources: dict[str, str] | None = None) -> None:
        self._index = {name: SectionIndex(text, name) for name, text in texts.items()}
        self._names = sorted(texts, key=len, reverse=True)
        self._by_source: dict[str, str | None] = {}
        self._exact = sources is not None
        if sources is not None:
            self._by_source.update((source, name) for source, name in sources.items() if name in texts)

    def file_of(self, source: str) -> str | None:
        """The file name ``source`` refers to, or None when it is none of the set's files."""
        if self._exact:
            return self._by_source.get(source)
        if source not in self._by_source:
            self._by_source[source] = next((n for n in self._names if source == n or source.endswith("/" + n)), None)
        return self._by_source[source]

    def section_id(self, source: str, offset: int) -> str | None:
        """``<file>#<n>`` of the section holding ``offset`` in ``source``'s text (None: unknown file)."""
        name = self.file_of(source)
        return None if name is None else f"{name}#{self._index[name].section_at(offset)}"


def rank_sections(hits: Iterable[tuple[str, int]], mapper: SectionMapper) -> dict[str, float]:
    """Run scores for one query from ``(source, match_start)`` pairs in rank order: first rank wins.

    Scores are ``1 / rank`` of each section's first chunk, so the metrics rank sections as retrieved.
    """
    run: dict[str, float] = {}
    for source, offset in hits:
        section = mapper.section_id(source, offset)
        if section is not None and section not in run:
            run[section] = 1.0 / (len(run) + 1)
    return run
