"""A code result in the context (audit 56b D13): cited by its lines, fenced with its language, the budget exact."""

from __future__ import annotations

from rag_service.fences import citation, fenced
from rag_service.format import format_context
from rag_service.tokens import get_encoding
from tests.retrieved import span_chunk

CODE = "".join(f"def f{i}(x):\n    return x + {i}  # add {i}\n\n" for i in range(60))


def _code(start: int, end: int, **fields):
    first = CODE.count("\n", 0, start) + 1
    return span_chunk(CODE, start, end, source="src/app.py", start_line=first, end_line=None, **fields)


def test_a_fence_is_longer_than_any_fence_inside_it():
    assert fenced("x = 1", "python") == "```python\nx = 1\n```"
    assert fenced('doc = """\n```py\nx\n```\n"""', "python").startswith("````python\n")


def test_the_citation_names_the_lines_shown_and_a_single_line_once():
    start = CODE.index("def f3")
    chunk = _code(start - 1, CODE.index("def f5"))  # a leading newline and a trailing blank line are not shown
    assert citation(chunk) == "src/app.py:L10-14"
    assert citation(_code(start, start + 6)) == "src/app.py:L10"
    assert citation(span_chunk(CODE, 0, 10)) is None  # prose: doc.md


def test_a_cut_code_result_keeps_its_text_exact_and_the_budget():
    chunk = _code(0, len(CODE))
    for budget in (90, 150, 400):
        shown = format_context([chunk], max_tokens=budget, min_cut_tokens=20)
        assert shown.total_tokens <= budget
        assert len(get_encoding("cl100k_base").encode(shown.text)) == shown.total_tokens
        assert shown.text.startswith("[1] src/app.py\n§ src/app.py:L1-")
        assert "```python\ndef f0(x):" in shown.text and shown.text.rstrip().endswith("[… truncated]")
        (cut,) = shown.included
        assert CODE[cut.start_char : cut.end_char] == cut.content and cut.content.startswith("def f0")
        assert cut.end_line == CODE.count("\n", 0, cut.end_char - 1) + 1
        assert "\n```\n[… truncated]" in shown.text  # the fence is closed before the marker
