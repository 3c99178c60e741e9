"""Report records: every one has ``to_dict``; an ingest report merges another run's on its own."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest

import rag_service
from rag_service.ingest.graph import GraphReport
from rag_service.ingest.report import FileProblem, IngestReport

PACKAGE = Path(rag_service.__file__).parent


def _report_dataclasses_without_to_dict() -> list[str]:
    """``*Report``/``*Result`` dataclasses under rag_service lacking ``to_dict``, read from the source."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or not node.name.endswith(("Report", "Result")):
                continue
            decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
            is_dataclass = any(getattr(d, "id", getattr(d, "attr", None)) == "dataclass" for d in decorators)
            has_to_dict = any(isinstance(b, ast.FunctionDef) and b.name == "to_dict" for b in node.body)
            if is_dataclass and not has_to_dict:
                missing.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    return missing


def test_every_report_and_result_record_has_to_dict():
    assert _report_dataclasses_without_to_dict() == []


def test_a_graph_report_is_json_ready():
    report = GraphReport(collections=["docs"], documents=3, edges_written=7, seconds=0.5)
    data = report.to_dict()
    assert data == {"collections": ["docs"], "documents": 3, "edges_written": 7, "seconds": 0.5}
    assert json.loads(json.dumps(data)) == data


def _report(step: int) -> IngestReport:
    """A report whose every field holds a value of its own (``step`` apart between two reports)."""
    return IngestReport(
        collection="docs",
        added=1 * step,
        updated=2 * step,
        unchanged=3 * step,
        deleted=4 * step,
        rekeyed=5 * step,
        failed=[FileProblem(f"bad{step}.md", "unreadable")],
        skipped=[FileProblem(f"x{step}.png", "unsupported")],
        chunks_written=6 * step,
        chunks_embedded=7 * step,
        embeddings_reused=8 * step,
        filtered={"boilerplate": step, f"only{step}": 1},
        seconds=1.0 * step,
        embedding_seconds=0.5 * step,
        chunking_seconds=0.25 * step,
        degraded=[f"summaries off ({step})"],
        edges_written=9 * step,
        graph_seconds=0.125 * step,
        model_switch=f"embedding model: switch {step}",
        without_chunks=[f"empty{step}.md"],
        interrupted=step > 1,
        gone=[f"gone{step}.md"],
        left_out=[f"build{step}/a.py"],
        unreadable_chunks=10 * step,
        passed_over={"git_folder": [f"build{step}/"], f"lock_file{step}": ["yarn.lock"]},
    )


def test_merging_adds_counts_and_seconds_and_concatenates_lists():
    total, part = _report(1), _report(2)
    total.merge(part)
    assert (total.added, total.updated, total.unchanged, total.deleted, total.rekeyed) == (3, 6, 9, 12, 15)
    chunks = (total.chunks_written, total.chunks_embedded, total.embeddings_reused, total.edges_written)
    assert chunks == (18, 21, 24, 27)
    seconds = (total.seconds, total.embedding_seconds, total.chunking_seconds, total.graph_seconds)
    assert seconds == (3, 1.5, 0.75, 0.375)
    assert [p.source for p in total.failed] == ["bad1.md", "bad2.md"]
    assert [p.source for p in total.skipped] == ["x1.png", "x2.png"]
    assert total.filtered == {"boilerplate": 3, "only1": 1, "only2": 1}
    assert total.degraded == ["summaries off (1)", "summaries off (2)"]
    assert total.without_chunks == ["empty1.md", "empty2.md"]
    assert total.model_switch == "embedding model: switch 2", "the later run's word on a switch"
    assert total.interrupted, "a run stopped in any of its parts was interrupted"
    assert total.gone == ["gone1.md", "gone2.md"]
    assert total.left_out == ["build1/a.py", "build2/a.py"]
    assert total.unreadable_chunks == 30
    passed = {"git_folder": ["build1/", "build2/"], "lock_file1": ["yarn.lock"], "lock_file2": ["yarn.lock"]}
    assert total.passed_over == passed
    assert part.to_dict() == _report(2).to_dict(), "the merged-in report is left as it was"


def test_merging_covers_every_field_but_the_collection():
    total, part = _report(1), _report(2)
    total.merge(part)
    untouched = [f.name for f in fields(IngestReport) if getattr(total, f.name) == getattr(_report(1), f.name)]
    assert untouched == ["collection"], "IngestReport.merge ignores these fields"


def test_a_report_of_another_collection_does_not_merge():
    with pytest.raises(ValueError, match="'other' cannot merge into 'docs'"):
        IngestReport(collection="docs").merge(IngestReport(collection="other"))


def test_skipped_files_are_one_line_per_reason_with_the_supported_types_once(tmp_path: Path):
    from rag_service.ingest.loaders import discover

    for name in [*(f"img{i}.png" for i in range(5)), "blob", "data.csv", "notes.md"]:
        (tmp_path / name).write_text("x")
    report = IngestReport(collection="docs")
    report.skipped = [FileProblem(path.name, reason) for path, reason in discover([tmp_path]).skipped]
    report.skipped.append(FileProblem("gone.md", "does not exist"))
    skipped = [line for line in report.lines() if line.startswith("skipped")]
    assert [line.split("; supported:")[0] for line in skipped] == [
        "skipped: blob: no file suffix",
        "skipped: data.csv: unsupported file type '.csv'",
        "skipped: 5 files, img0.png, img1.png, img2.png and 2 more: unsupported file type '.png'",
        "skipped: gone.md: does not exist",
    ]
    assert [line.count("; supported: .md") for line in skipped] == [0, 0, 1, 0], "the list once, after the types"
    assert len(report.to_dict()["skipped"]) == 8, "the JSON keeps every file"


def test_what_was_passed_over_is_one_short_line_of_counts_and_a_few_names():
    report = IngestReport(collection="repo")
    assert not [line for line in report.lines() if line.startswith("passed over")], "no line when nothing was"
    report.passed_over = {
        "lock_file": ["yarn.lock", "poetry.lock"],
        "git_folder": ["node_modules/", "venv/", "build/", "dist/", "out/"],
        "virtualenv": ["tools/env/"],
        "git_file": [],
    }
    [line] = [line for line in report.lines() if line.startswith("passed over")]
    assert line == (
        "passed over: 5 folders git ignores (build/, dist/, node_modules/ and 2 more), 1 virtualenv (tools/env/), "
        "2 lock files (poetry.lock, yarn.lock); name a path to index it anyway"
    )
    assert report.to_dict()["passed_over"]["git_folder"][-1] == "out/", "the JSON keeps every name"


def test_a_loaders_error_becomes_a_reason_without_the_path():
    from rag_service.ingest.report import file_reason

    assert file_reason("c1/a.pdf", "c1/a.pdf is not a readable PDF (x); fix") == "not a readable PDF (x); fix"
    assert file_reason("c1/a.md", "cannot read c1/a.md: file does not exist; check") == "file does not exist; check"
    assert file_reason("c1/a.log", "cannot index c1/a.log: file type '.log' is not supported") == (
        "file type '.log' is not supported"
    )
    assert file_reason("s.pdf", "s.pdf: no text layer; OCR is not supported") == "no text layer; OCR is not supported"
    assert file_reason("a.md", "its title contains NUL bytes") == "its title contains NUL bytes"


def test_the_llm_stage_is_timed_in_the_metrics_endpoint() -> None:
    """A 60 s LLM wait showed in no stage of /metrics (nor of `rag query`'s timing line)."""
    from rag_service.db.health import DatabaseHealth
    from rag_service.result import RetrievalMetrics
    from rag_service.server.metrics import ApiMetrics

    metrics = ApiMetrics(lambda: DatabaseHealth(None, None, None, "closed", 5.0))
    metrics.observe_retrieval(RetrievalMetrics(llm_time_ms=1500.0, total_time_ms=1600.0))
    text = metrics.render().decode()
    assert 'rag_retrieval_stage_duration_seconds_sum{stage="llm"} 1.5' in text


def test_an_include_only_page_is_told_that_includes_are_not_followed():
    """``changes.rst`` = ``.. include:: ../CHANGES.rst`` was reported "empty, or only markup" (audit 59b)."""
    report = IngestReport(collection="docs")
    report.without_chunks = ["docs/changes.rst"]
    assert "no chunks: docs/changes.rst: empty, or only markup the garbage filter drops (an include is not followed: " \
        "index the file it names); nothing to search" in report.lines()
    report.without_chunks = ["empty.md"]
    assert "no chunks: empty.md: empty, or only markup the garbage filter drops; nothing to search" in report.lines()
