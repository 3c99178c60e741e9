"""The latex strategy's math finder and title reader on pathological inputs: linear, and row breaks are no math."""

from __future__ import annotations

from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.latex import math_spans
from tests.complexity import assert_linear


def _row_breaks(n: int) -> str:
    return "\\begin{tabular}{ll}\n" + "a & b \\\\[2pt]\n" * (n // 15) + "\\end{tabular}\n"


def _unclosed_equations(n: int) -> str:
    return "\\begin{equation} x\n" * (n // 19)


def _unclosed_displays(n: int) -> str:
    return "\\[ x\n" * (n // 5)


def test_unclosed_math_grows_linearly() -> None:
    """Every opener without a closer scanned to the end of the file (532 KB of ``\\\\[2pt]`` rows took 75 s)."""
    for make in (_row_breaks, _unclosed_equations, _unclosed_displays):
        assert_linear(make, math_spans, n=30_000)
    assert_linear(_row_breaks, make_chunker("latex").split, n=30_000)


def test_a_row_break_with_a_length_opens_no_math() -> None:
    text = "a & b \\\\[2pt]\nc & d \\\\\n\\[ x = y \\]\n\\\\\\[ z \\]"
    assert [text[s:e] for s, e in math_spans(text)] == ["\\[ x = y \\]", "\\[ z \\]"]
