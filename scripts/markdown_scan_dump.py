"""What the markdown rules decide on every file of ray-docs-qa and anthropic-docs-qa, to compare two versions.

    python scripts/markdown_scan_dump.py dump > new.json              # the rag_service importable here
    git archive efa1de6 rag_service | tar -x -C /tmp/mdscan_old       # the tree before issue 26's scanner
    cd /tmp && PYTHONPATH=/tmp/mdscan_old:$SITE_PACKAGES python -S $REPO/scripts/markdown_scan_dump.py dump > old.json
    python scripts/markdown_scan_dump.py compare old.json new.json

(``-S`` keeps the editable install's import hook from shadowing the old tree.) Per file: the
evaluation's header offsets and sections, the garbage filter's line kinds and headers, the links,
the titles, the summary's candidate sentences and summary, and every chunk (offsets, headers,
parent span) and filter count of six chunkers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def dump() -> None:
    import rag_service
    from rag_service.evaluation.sections import header_starts, sections
    from rag_service.ingest.character import CharacterChunker
    from rag_service.ingest.garbage import DocumentLines
    from rag_service.ingest.links import find_links
    from rag_service.ingest.loaders import front_matter_title, load_document, markdown_title
    from rag_service.ingest.markdown import MarkdownChunker
    from rag_service.ingest.recursive import RecursiveChunker
    from rag_service.ingest.sections import HtmlChunker, SemanticMarkdownChunker
    from rag_service.ingest.sentence import SentenceChunker
    from rag_service.ingest.summary import _sentences, extractive_summary, prose

    chunkers: dict[str, Any] = {
        "markdown": MarkdownChunker(),
        "html": HtmlChunker(),
        "semantic-markdown": SemanticMarkdownChunker(),
        "recursive": RecursiveChunker(),
        "sentence": SentenceChunker(),
        "character": CharacterChunker(),
    }
    out: dict[str, Any] = {"module": rag_service.__file__, "files": {}}
    for path in sorted(p for d in ("ray-docs-qa", "anthropic-docs-qa") for p in (DATASETS / d / "docs").rglob("*.md")):
        raw = path.read_text(encoding="utf-8")
        text = load_document(path, max_bytes=50_000_000).text
        lines = DocumentLines(text)
        record: dict[str, Any] = {
            "eval_raw": header_starts(raw),
            "eval": [(s.number, s.start, s.end) for s in sections(text)],
            "headers": [(h.level, h.title, h.start, h.end) for h in lines.headers],
            "kinds": list(lines._kinds),
            "content_prefix": lines._content_prefix,
            "links": [(x.offset, x.target_key, x.anchor) for x in find_links(text, source="docs/" + path.name)],
            "title": markdown_title(text),
            "fm_title": front_matter_title(text),
            "prose_sentences": _sentences(prose(text)),
            "summary": extractive_summary(text),
        }
        for name, chunker in chunkers.items():
            doc = chunker.split(text)
            record["chunks_" + name] = [
                (c.start_char, c.end_char, c.headers, c.parent_start, c.parent_end) for c in doc.chunks
            ]
            record["filtered_" + name] = doc.filtered
        out["files"][path.relative_to(DATASETS).as_posix()] = record
    json.dump(out, sys.stdout, default=str)


def compare(old_path: str, new_path: str) -> None:
    old, new = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (old_path, new_path))
    print(f"old: {old['module']}\nnew: {new['module']}\nfiles: {len(old['files'])} / {len(new['files'])}")
    for key in sorted(next(iter(old["files"].values()))):
        differ = [f for f in old["files"] if old["files"][f][key] != new["files"].get(f, {}).get(key)]
        print(f"{key:28} differs in {len(differ)} files {differ[:5]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["dump"]:
        dump()
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: markdown_scan_dump.py dump > out.json | compare old.json new.json")
