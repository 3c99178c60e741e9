"""Run files in TREC format: one line per retrieved document, ``qid Q0 docid rank score tag``.

Ranks run 1..n in the order trec_eval itself would use (:func:`~rag_service.evaluation.metrics.rank_scores`:
score descending, ties by doc id descending), so the rank column and trec_eval agree. Scores are written
with ``repr`` (the shortest text that reads back as the same float), so a run read back ranks the same.
Queries appear in the run's order; a query with no retrieved documents has no line, and a run read
back therefore lacks it, which :func:`~rag_service.evaluation.metrics.evaluate_run` scores as 0 anyway.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from rag_service.errors import ConfigurationError, DocumentReadError
from rag_service.evaluation.metrics import Run, rank_scores

__all__ = ["check_run_file", "check_run_ids", "read_trec_run", "write_trec_run"]


def write_trec_run(run: Run, path: Path, *, tag: str) -> None:
    """Write ``run`` to ``path`` in TREC format with ``tag`` (no whitespace) as the last column."""
    _check_token(tag, "tag")
    lines: list[str] = []
    for qid, scores in run.items():
        _check_token(qid, "query id")
        for rank, (doc_id, score) in enumerate(rank_scores(scores), start=1):
            _check_token(doc_id, "document id")
            lines.append(f"{qid} Q0 {doc_id} {rank} {score!r} {tag}\n")
    try:
        with Path(path).open("w", encoding="utf-8") as handle:
            handle.writelines(lines)
    except OSError as err:
        raise ConfigurationError(f"cannot write run file {path} ({err.strerror}); choose a writable path") from None


def check_run_file(path: Path) -> None:
    """Raise ``ConfigurationError`` now when no run file can be written at ``path`` (``rag eval`` checks before its
    work: a failed write at the end would throw the finished evaluation away). Leaves no file behind."""
    path = Path(path)
    if path.is_dir():
        raise ConfigurationError(f"cannot write run file {path} (it is a folder); choose a file path")
    existed = path.exists()
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as err:
        raise ConfigurationError(f"cannot write run file {path} ({err.strerror}); choose a writable path") from None
    if not existed:
        path.unlink(missing_ok=True)


def check_run_ids(ids: Iterable[str], *, what: str, source: Path) -> None:
    """Raise ``ConfigurationError`` naming the first of ``ids`` (``what`` in ``source``) a TREC run cannot hold."""
    for value in ids:
        if not value or any(ch.isspace() for ch in value):
            raise ConfigurationError(
                f"{what} {value!r} in {source} is empty or has whitespace, which a TREC run (--run-out) cannot "
                "hold; rename it, or leave out --run-out"
            )


def read_trec_run(path: Path) -> dict[str, dict[str, float]]:
    """Read a TREC run file into ``{qid: {doc_id: score}}``; the Q0, rank and tag columns are dropped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DocumentReadError(f"run file {path} does not exist; check the path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DocumentReadError(f"cannot read run file {path} ({err}); pass a UTF-8 text file") from None
    run: dict[str, dict[str, float]] = {}
    for line_number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        where = f"run file {path} line {line_number}"
        if len(fields) != 6:
            raise DocumentReadError(f"{where} has {len(fields)} fields; expected 'qid Q0 docid rank score tag'")
        qid, _, doc_id, rank, score_text, _ = fields
        try:
            int(rank)
            score = float(score_text)
        except ValueError:
            raise DocumentReadError(f"{where}: rank {rank!r} or score {score_text!r} is not a number") from None
        if math.isnan(score):
            raise DocumentReadError(f"{where}: score is NaN; write a number")
        scores = run.setdefault(qid, {})
        if doc_id in scores:
            raise DocumentReadError(f"{where}: document {doc_id!r} appears twice for query {qid!r}; keep one")
        scores[doc_id] = score
    return run


def _check_token(value: str, what: str) -> None:
    if not value or any(ch.isspace() for ch in value):
        raise ConfigurationError(f"{what} {value!r} is empty or has whitespace; a TREC run cannot hold it")
