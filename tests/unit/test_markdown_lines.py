"""The one markdown line scanner: headers, fences, front matter and setext underlines, with exact offsets."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_service.markdown_lines import (
    DEFAULT_RULES,
    FrontMatter,
    LineKind,
    ScanRules,
    atx_headers,
    find_front_matter,
    scan,
    scan_lines,
)

K = LineKind


def titles(text: str, rules: ScanRules = DEFAULT_RULES) -> list[tuple[int, str]]:
    return [(h.level, h.title) for h in atx_headers(text, rules)]


def kinds(text: str, rules: ScanRules = DEFAULT_RULES) -> list[LineKind]:
    return [line.kind for line in scan_lines(text, rules)]


def test_atx_headers_carry_level_title_and_the_offsets_of_their_line() -> None:
    text = "intro\n# One\n  ## Two ##\n###### Six\n####### seven\n#hashtag\n"
    found = list(atx_headers(text))
    assert [(h.level, h.title) for h in found] == [(1, "One"), (2, "Two"), (6, "Six")]
    assert [text[h.start : h.end] for h in found] == ["# One", "  ## Two ##", "###### Six"]


def test_headers_inside_fences_are_code() -> None:
    text = "# A\n```bash\n# comment\n```\n~~~\n## also code\n~~~\n## B\n"
    assert titles(text) == [(1, "A"), (2, "B")]
    assert kinds(text) == [K.HEADER, K.FENCE, K.CODE, K.FENCE, K.FENCE, K.CODE, K.FENCE, K.HEADER, K.BLANK]


def test_a_fence_closes_only_with_its_own_character_at_least_as_long_and_nothing_after() -> None:
    text = "````\n```\n~~~~\n```` python\n# inside\n`````  \n# outside\n"
    assert titles(text) == [(1, "outside")]
    assert scan(text).code_blocks == [(0, text.index("\n# outside"))]


def test_tildes_and_backticks_do_not_close_each_other() -> None:
    assert titles("~~~\n```\n# code\n~~~\n# after\n") == [(1, "after")]
    assert titles("```\n~~~\n# code\n```\n# after\n") == [(1, "after")]


def test_indentation_up_to_three_spaces_makes_a_fence_four_do_not() -> None:
    assert titles("   ```\n# code\n   ```\n# after\n") == [(1, "after")]
    assert titles("    ```\n# not code: four spaces is no fence\n") == [(1, "not code: four spaces is no fence")]
    assert titles("```\n# code\n    ```\n# still code: an indented closer does not close\n") == []


def test_an_unclosed_fence_runs_to_the_end() -> None:
    text = "# Title\n```python\n# comment\n## more"
    assert titles(text) == [(1, "Title")]
    assert scan(text).code_blocks == [(8, len(text))]


def test_backticks_in_the_info_string_make_inline_code_not_a_fence() -> None:
    assert kinds("``` not `a fence`\n# Header") == [K.TEXT, K.HEADER]
    assert kinds("~~~ tildes `allow` them\n# code") == [K.FENCE, K.CODE]


def test_empty_headers_are_text_unless_the_rules_say_otherwise() -> None:
    text = "#\n## ##\n# \n# real\n"
    assert titles(text) == [(1, "real")]
    assert titles(text, ScanRules(empty_headers=True)) == [(1, ""), (2, ""), (1, ""), (1, "real")]


def test_front_matter_only_at_the_very_start_and_only_when_closed() -> None:
    text = "---\ntitle: T\n# yaml comment\n```\n...\n# Real\n"
    assert find_front_matter(text) == FrontMatter(0, text.index("\n# Real"), 4, text.index("\n..."))
    assert titles(text) == [(1, "Real")]
    assert kinds(text)[:5] == [K.FRONT_MATTER] * 5
    assert find_front_matter("\n---\ntitle: T\n---\n") is None
    assert find_front_matter("---\ntitle: T\n# never closed\n") is None
    assert titles("---\ntitle: T\n# never closed\n") == [(1, "never closed")]


def test_front_matter_can_be_left_to_scan_like_any_text() -> None:
    text = "---\n# yaml comment\n---\n"
    assert titles(text, ScanRules(front_matter=False)) == [(1, "yaml comment")]
    assert scan(text, ScanRules(front_matter=False)).front_matter is None


def test_setext_underlines_need_a_text_line_above() -> None:
    text = "Title\n=====\n\nSub\n---\n\n---\n# ATX\n---\n"
    structure = scan(text)
    assert [(h.level, h.title, text[h.start : h.end]) for h in structure.setext_headers] == [
        (1, "Title", "Title\n====="),
        (2, "Sub", "Sub\n---"),
    ]
    assert [h.title for h in structure.headers] == ["ATX"]
    assert kinds(text)[6] is K.TEXT  # a rule after a blank line is no underline


def test_crlf_text_scans_like_lf_text_with_offsets_into_the_crlf_text() -> None:
    lf = "---\ntitle: T\n---\n# A\n```\n# code\n```\n## B ##\nSub\n---\n"
    crlf = lf.replace("\n", "\r\n")
    assert kinds(crlf) == kinds(lf)
    assert titles(crlf) == titles(lf) == [(1, "A"), (2, "B")]
    assert [crlf[h.start : h.end] for h in atx_headers(crlf)] == ["# A", "## B ##"]
    assert [h.title for h in scan(crlf).setext_headers] == ["Sub"]
    block = find_front_matter(crlf)
    assert block is not None and crlf[block.body_start : block.body_end] == "title: T"


def test_list_fences_are_fences_only_when_asked() -> None:
    text = "1. Run:\n    ```bash\n    # comment\n    ```\n  - ```shell\n    x\n    ```\nprose\n"
    assert K.CODE not in kinds(text)
    fenced = kinds(text, ScanRules(list_fences=True))
    assert fenced == [K.TEXT, K.FENCE, K.CODE, K.FENCE, K.FENCE, K.CODE, K.FENCE, K.TEXT, K.BLANK]


@given(st.lists(st.sampled_from(["# h", "## h", "text", "```", "~~~~", "", "---", "===", "  ```x", "#"]), max_size=30))
def test_lines_tile_the_text(lines: list[str]) -> None:
    text = "\r\n".join(lines[: len(lines) // 2]) + "\n" + "\n".join(lines[len(lines) // 2 :])
    scanned = list(scan_lines(text))
    assert scanned[0].start == 0 and scanned[-1].end == len(text)
    for a, b in pairwise(scanned):
        assert text[a.end : b.start] in ("\n", "\r\n")
    blocks = scan(text).code_blocks
    assert blocks == sorted(blocks) and all(a[1] < b[0] for a, b in pairwise(blocks))


@pytest.mark.parametrize("rules", [ScanRules(), ScanRules(empty_headers=True, front_matter=False)])
def test_headers_of_scan_and_atx_headers_agree(rules: ScanRules) -> None:
    text = "---\n# fm\n---\n#\n# A\n```\n# c\n```\n## B\n"
    assert scan(text, rules).headers == list(atx_headers(text, rules))
