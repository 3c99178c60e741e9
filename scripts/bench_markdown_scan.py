"""Old vs new markdown scanning on every file of ray-docs-qa and anthropic-docs-qa, interleaved, CPU time.

The old modules come from a tree made with ``git archive efa1de6 rag_service | tar -x -C /tmp/mdscan_old``
(the commit before issue 26's scanner); pass another root as the first argument.
"""

import importlib.util
import sys
import time
from pathlib import Path

from rag_service.evaluation import sections
from rag_service.ingest import garbage, links, summary


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


OLD = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/mdscan_old") / "rag_service"
old = {
    "garbage": load("old_garbage", OLD / "ingest/garbage.py"),
    "sections": load("old_sections", OLD / "evaluation/sections.py"),
    "links": load("old_links", OLD / "ingest/links.py"),
    "summary": load("old_summary", OLD / "ingest/summary.py"),
}
new = {"garbage": garbage, "sections": sections, "links": links, "summary": summary}
root = Path(__file__).resolve().parents[2] / "shared" / "datasets"
texts = [
    p.read_text(encoding="utf-8")
    for d in ("ray-docs-qa", "anthropic-docs-qa")
    for p in sorted((root / d / "docs").rglob("*.md"))
]
calls = {
    "DocumentLines": lambda m, t: m["garbage"].DocumentLines(t),
    "header_starts": lambda m, t: m["sections"].header_starts(t),
    "find_links": lambda m, t: m["links"].find_links(t, source="docs/x.md"),
    "prose": lambda m, t: m["summary"].prose(t),
}
for name, call in calls.items():
    best = {"old": 1e9, "new": 1e9}
    for _ in range(5):
        for label, mods in (("old", old), ("new", new)):
            t0 = time.process_time()
            for t in texts:
                call(mods, t)
            best[label] = min(best[label], time.process_time() - t0)
    ratio = best["new"] / best["old"]
    print(f"{name:14} old {best['old'] * 1000:7.1f} ms  new {best['new'] * 1000:7.1f} ms  new/old {ratio:.2f}")
print(f"({len(texts)} files, {sum(map(len, texts)) / 1e6:.1f} M chars, least of 5 interleaved runs)")
