#!/usr/bin/env python3
"""How much of ingestion is chunking, per format: PDFs and Word files made from this repo's docs, its code.

Writes PDFs (fpdf2, a dev dependency) and .docx files (python-docx) of the markdown under docs/ into a
temporary folder, copies rag_service/**/*.py beside them, and indexes each family into its own
collection with ``auto`` and the real embedding model. Prints, per family: documents, chunks, total
seconds, chunking seconds and their share (the issue's bound: at most 10%), loading included in the rest.

    python scripts/ingest_formats_bench.py [--copies 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from rag_service.config import load_settings
from rag_service.service import build_service

REPO = Path(__file__).resolve().parents[1]


def write_pdf(path: Path, text: str) -> None:
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("helvetica", size=10)
    page = 60  # lines per page
    lines = [line.encode("latin-1", "replace").decode("latin-1") for line in text.splitlines()]
    for first in range(0, len(lines), page):
        doc.add_page()
        doc.multi_cell(0, 4, "\n".join(lines[first : first + page]) or " ")
    doc.output(str(path))


def write_docx(path: Path, text: str) -> None:
    import docx

    document = docx.Document()
    for block in text.split("\n\n"):
        if block.startswith("#"):
            level = len(block) - len(block.lstrip("#"))
            document.add_heading(block.lstrip("# ").split("\n")[0], min(level, 6))
        elif block.strip():
            document.add_paragraph(block)
    document.save(str(path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=3, help="copies of each doc per format")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    docs = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        families = {"pdf": root / "pdf", "docx": root / "docx", "code": root / "code"}
        for folder in families.values():
            folder.mkdir()
        for copy in range(args.copies):
            for doc in docs:
                text = doc.read_text(encoding="utf-8")
                write_pdf(families["pdf"] / f"{doc.stem}-{copy}.pdf", text)
                write_docx(families["docx"] / f"{doc.stem}-{copy}.docx", text)
        for source in sorted((REPO / "rag_service").rglob("*.py")):
            target = families["code"] / source.relative_to(REPO / "rag_service")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
        service = build_service(load_settings())
        try:
            for name, folder in families.items():
                report = service.index_paths([folder], collection=f"formats-{name}", force=True, progress=True)
                results[name] = {
                    "documents": report.added + report.updated,
                    "failed": len(report.failed),
                    "chunks": report.chunks_written,
                    "seconds": round(report.seconds, 2),
                    "embedding_s": round(report.embedding_seconds, 2),
                    "chunking_s": round(report.chunking_seconds, 3),
                    "chunking_share": round(report.chunking_seconds / report.seconds, 4),
                }
                print(name, json.dumps(results[name]), file=sys.stderr)
        finally:
            service.close()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'format':<8}{'docs':>6}{'chunks':>8}{'total s':>9}{'embed s':>9}{'chunk s':>9}{'share':>8}")
        for name, r in results.items():
            print(f"{name:<8}{r['documents']:>6}{r['chunks']:>8}{r['seconds']:>9.1f}{r['embedding_s']:>9.1f}"
                  f"{r['chunking_s']:>9.2f}{r['chunking_share']:>8.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
