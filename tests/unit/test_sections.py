"""Section numbering of markdown files (the rule of ray-docs-qa/SOURCE.md) and section ranking."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rag_service.evaluation.docset import SectionMapper, rank_sections
from rag_service.evaluation.sections import SectionIndex, header_starts, sections
from tests.shared_data import SHARED

#: every ATX header offset of every file of the two documentation sets, as the qrels were numbered
PINNED_STARTS = Path(__file__).resolve().parents[1] / "data" / "docs_section_starts.json"


def test_file_starting_with_a_header_has_section_one_at_offset_zero() -> None:
    text = "# Title\nintro\n## Install\nsteps\n"
    assert [(s.number, s.start) for s in sections(text)] == [(1, 0), (2, 14)]
    index = SectionIndex(text)
    assert index.section_at(0) == 1
    assert index.section_at(13) == 1
    assert index.section_at(14) == 2


def test_leading_text_is_section_zero() -> None:
    text = "(label)=\n\n# Title\nbody\n"
    assert [(s.number, s.start, s.end) for s in sections(text)] == [(0, 0, 10), (1, 10, len(text))]
    assert SectionIndex(text).section_at(3) == 0


def test_every_atx_level_splits_but_fenced_code_and_non_headers_do_not() -> None:
    text = (
        "# A\n"
        "```python\n# a comment\n```\n"
        "~~~~\n# also code\n~~~\n# still code, the fence needs four tildes\n~~~~\n"
        "###### six\n"
        "#hashtag is no header\n"
        "    # indented four spaces is code\n"
        "   ## three spaces is a header\n"
        "#\n"
    )
    starts = header_starts(text)
    lines = [text[s : text.index("\n", s)] for s in starts]
    assert lines == ["# A", "###### six", "   ## three spaces is a header", "#"]


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert header_starts("# A\n```\n# code\n") == [0]


def test_crlf_text_is_numbered_like_lf_text() -> None:
    lf = "# A\n```\n# code\n```\n#\n# B\n"
    crlf = lf.replace("\n", "\r\n")
    assert len(header_starts(crlf)) == len(header_starts(lf)) == 3
    assert [crlf[s : s + 3] for s in header_starts(crlf)] == ["# A", "#\r\n", "# B"]


def test_front_matter_is_no_exception_to_the_section_rule() -> None:
    assert header_starts("---\n# a YAML comment splits too\n---\n# A\n") == [4, 36]


def test_the_documentation_sets_keep_the_numbering_their_qrels_were_made_with() -> None:
    pinned: dict[str, list[int]] = json.loads(PINNED_STARTS.read_text(encoding="utf-8"))
    datasets = SHARED / "datasets"
    files = sorted(p for name in ("ray-docs-qa", "anthropic-docs-qa") for p in (datasets / name / "docs").rglob("*.md"))
    assert len(files) == len(pinned), f"{len(files)} files under {datasets}/*-docs-qa/docs, {len(pinned)} pinned"
    changed = [
        name
        for path in files
        if header_starts(path.read_text(encoding="utf-8")) != pinned[name := path.relative_to(datasets).as_posix()]
    ]
    assert changed == [], f"section numbering changed in {len(changed)} files, e.g. {changed[:3]}"


def test_mapper_matches_relative_and_absolute_sources() -> None:
    mapper = SectionMapper({"guide.md": "# G\ntext\n## Two\nmore\n", "sub/guide.md": "intro\n# S\n"})
    assert mapper.section_id("guide.md", 0) == "guide.md#1"
    assert mapper.section_id("/data/docs/guide.md", 12) == "guide.md#2"
    assert mapper.section_id("docs/sub/guide.md", 0) == "sub/guide.md#0"
    assert mapper.section_id("docs/other.md", 0) is None


def test_rank_sections_keeps_the_first_rank_of_each_section() -> None:
    mapper = SectionMapper({"a.md": "# A\nx\n## B\ny\n"})
    run = rank_sections([("a.md", 8), ("a.md", 0), ("a.md", 9), ("zzz.md", 0)], mapper)
    assert run == {"a.md#2": 1.0, "a.md#1": 0.5}


@given(st.lists(st.sampled_from(["# h", "## h", "text", "```", "", "~~~", "#"]), max_size=30))
def test_sections_tile_the_text_and_number_consecutively(lines: list[str]) -> None:
    text = "\n".join(lines)
    found = sections(text)
    assert found[0].start == 0
    assert found[-1].end == len(text)
    for a, b in pairwise(found):
        assert a.end == b.start
        assert b.number == a.number + 1
    index = SectionIndex(text)
    for s in found:
        if s.end > s.start:
            assert index.section_at(s.start) == s.number
            assert index.section_at(s.end - 1) == s.number
