"""Load a dataset in BEIR format: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

Layout and formats, as BEIR's ``GenericDataLoader`` reads them:

- ``corpus.jsonl``: one JSON object a line, ``{"_id": str, "title": str (optional), "text": str}``;
- ``queries.jsonl``: one JSON object a line, ``{"_id": str, "text": str}``;
- ``qrels/<split>.tsv``: tab-separated ``query-id  corpus-id  score`` with that header line; ``score`` is
  an integer grade (``> 0`` is relevant).

Only queries with at least one qrels row in the split are kept, as BEIR does. Qrels may name documents
that are missing from the corpus (they stay judged, and simply cannot be retrieved); a qrels query id
missing from ``queries.jsonl`` is an error. Every problem is reported as one line naming the file, the
line number where there is one, and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_service.errors import ConfigurationError, DocumentReadError

__all__ = ["BeirDataset", "BeirDoc", "doc_text", "load_beir", "read_judged_queries"]

_QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass(frozen=True, slots=True)
class BeirDoc:
    """One corpus document; ``title`` is ``""`` when the corpus gives none."""

    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class BeirDataset:
    """A loaded BEIR dataset, restricted to the queries judged in ``split``.

    ``qrels[qid][doc_id]`` is the integer relevance grade; every key of ``queries`` is a key of
    ``qrels`` and the other way round.
    """

    corpus: dict[str, BeirDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    split: str


def doc_text(doc: BeirDoc) -> str:
    """The text we index for ``doc``: ``"title\\n\\ntext"``, or just the text when there is no title."""
    parts = [part for part in (doc.title.strip(), doc.text) if part]
    return "\n\n".join(parts)


def load_beir(dataset_dir: Path, *, split: str = "test") -> BeirDataset:
    """Read the BEIR dataset in ``dataset_dir`` and keep the queries that have qrels in ``split``.

    Raises ``DocumentReadError`` for a missing or malformed file and ``ConfigurationError`` when
    ``split`` names no ``qrels/<split>.tsv`` (the message lists the splits that exist).
    """
    root = Path(dataset_dir)
    if not root.is_dir():
        raise DocumentReadError(f"dataset directory {root} does not exist; pass a folder in BEIR format")
    corpus_path = _required_file(root, "corpus.jsonl")
    queries, qrels = read_judged_queries(root, split)
    return BeirDataset(corpus=_read_corpus(corpus_path), queries=queries, qrels=qrels, split=split)


def read_judged_queries(root: Path, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """``queries.jsonl`` and ``qrels/<split>.tsv`` of ``root``: the judged queries and their grades.

    Shared by BEIR sets and markdown-documentation sets, whose qrels name ``file#section`` ids.
    """
    qrels_path = _qrels_path(root, split)
    queries_path = _required_file(root, "queries.jsonl")
    qrels = _read_qrels(qrels_path)
    if not qrels.grades:
        raise DocumentReadError(
            f"{qrels_path} has no judged rows; add 'query-id<TAB>corpus-id<TAB>score' rows, or choose another --split"
        )
    all_queries, query_lines = _read_queries(queries_path)
    for qid, line_number in qrels.first_lines.items():
        if qid not in all_queries:
            raise DocumentReadError(
                f"{qrels_path} line {line_number}: query id {qid!r} is not in {queries_path.name}; "
                "add the query or remove its qrels rows"
            )
    queries = {qid: text for qid, text in all_queries.items() if qid in qrels.grades}
    for qid, text in queries.items():
        if not text.strip():
            raise DocumentReadError(
                f"{queries_path} line {query_lines[qid]}: query {qid!r} has no text; write its question, or remove "
                "the query and its qrels rows"
            )
    return queries, qrels.grades


def _required_file(root: Path, name: str) -> Path:
    path = root / name
    if not path.is_file():
        raise DocumentReadError(
            f"{path} is missing; a dataset has queries.jsonl, qrels/ and corpus.jsonl (BEIR) or docs/ (documentation)"
        )
    return path


def _qrels_path(root: Path, split: str) -> Path:
    if not split or Path(split).name != split or split in {".", ".."}:
        raise ConfigurationError(f"split {split!r} is not a plain name; use e.g. 'test' or 'dev'")
    qrels_dir = root / "qrels"
    if not qrels_dir.is_dir():
        raise DocumentReadError(f"{qrels_dir} is missing; a BEIR dataset needs qrels/<split>.tsv")
    path = qrels_dir / f"{split}.tsv"
    if not path.is_file():
        existing = sorted(p.stem for p in qrels_dir.glob("*.tsv") if p.is_file())
        choices = ", ".join(existing) if existing else "none"
        raise ConfigurationError(f"{path} is missing; choose one of the splits found: {choices}")
    return path


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for non-blank lines, decoding each as UTF-8."""
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DocumentReadError(
                    f"{path} line {line_number} is not valid UTF-8; re-encode the file as UTF-8"
                ) from None
            if line.strip():
                yield line_number, line


def _json_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for line_number, line in _lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DocumentReadError(
                f"{path} line {line_number} is not valid JSON ({err.msg}); write one JSON object per line"
            ) from None
        if not isinstance(record, dict):
            raise DocumentReadError(f"{path} line {line_number} is not a JSON object; write one per line")
        yield line_number, record


def _string_field(record: dict[str, Any], key: str, path: Path, line_number: int, *, required: bool) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (key == "_id" and not value):
        kind = "a non-empty string" if key == "_id" else "a string"
        raise DocumentReadError(f"{path} line {line_number}: {key!r} must be {kind}; fix the record")
    return value


def _read_corpus(path: Path) -> dict[str, BeirDoc]:
    corpus: dict[str, BeirDoc] = {}
    for line_number, record in _json_records(path):
        doc_id = _string_field(record, "_id", path, line_number, required=True)
        if doc_id in corpus:
            raise DocumentReadError(f"{path} line {line_number}: duplicate _id {doc_id!r}; make ids unique")
        title = _string_field(record, "title", path, line_number, required=False)
        text = _string_field(record, "text", path, line_number, required=True)
        corpus[doc_id] = BeirDoc(doc_id=doc_id, title=title, text=text)
    return corpus


def _read_queries(path: Path) -> tuple[dict[str, str], dict[str, int]]:
    """The queries by id, and the line of each."""
    queries: dict[str, str] = {}
    lines: dict[str, int] = {}
    for line_number, record in _json_records(path):
        qid = _string_field(record, "_id", path, line_number, required=True)
        if qid in queries:
            raise DocumentReadError(f"{path} line {line_number}: duplicate _id {qid!r}; make ids unique")
        queries[qid] = _string_field(record, "text", path, line_number, required=True)
        lines[qid] = line_number
    return queries, lines


@dataclass(slots=True)
class _Qrels:
    grades: dict[str, dict[str, int]]
    first_lines: dict[str, int]  # query id -> line of its first row, for error messages


def _read_qrels(path: Path) -> _Qrels:
    qrels = _Qrels(grades={}, first_lines={})
    for line_number, line in _lines(path):
        fields = line.rstrip("\r\n").split("\t")
        if line_number == 1 and tuple(f.strip().lower() for f in fields) == _QRELS_HEADER:
            continue
        if len(fields) != 3:
            raise DocumentReadError(
                f"{path} line {line_number} has {len(fields)} tab-separated fields; "
                "expected 'query-id<TAB>corpus-id<TAB>score'"
            )
        qid, doc_id, score = (f.strip() for f in fields)
        if not qid or not doc_id:
            raise DocumentReadError(f"{path} line {line_number}: query-id and corpus-id must be non-empty")
        try:
            grade = int(score)
        except ValueError:
            raise DocumentReadError(
                f"{path} line {line_number}: score {score!r} is not an integer; use grades like 0, 1, 2"
            ) from None
        grades = qrels.grades.setdefault(qid, {})
        if doc_id in grades:
            raise DocumentReadError(
                f"{path} line {line_number}: duplicate row for query {qid!r}, document {doc_id!r}; keep one"
            )
        grades[doc_id] = grade
        qrels.first_lines.setdefault(qid, line_number)
    return qrels
