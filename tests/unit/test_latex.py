"""The latex strategy's math finder and title reader on pathological inputs: linear, and row breaks are no math."""

from __future__ import annotations

from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.latex import MAX_TITLE_CHARS, latex_sections, latex_title, math_spans, plain_latex
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


def _unclosed_title(n: int) -> str:
    return "\\title{Paper\n" + "Text \\emph{word} more words here.\n" * (n // 34)


def test_an_unclosed_title_is_no_title_and_costs_linear_time() -> None:
    """The rest of the file was the title, and each command in it was unwrapped by copying it (1.6 MB: 29 s)."""
    assert latex_title(_unclosed_title(1_000)) == ""
    assert latex_title("\\title{Paper\n\nBody \\emph{x}.}") == ""  # LaTeX ends an argument at a paragraph
    assert latex_title("\\title{" + "w" * MAX_TITLE_CHARS + "}") == ""
    assert_linear(_unclosed_title, latex_title, n=200_000)
    sections = "".join(f"\\section{{Part {i}\n" for i in range(2_000))
    assert {headers["h1"] for _, _, headers in latex_sections(sections)} == {""}
    assert_linear(lambda n: "\\section{Part\n" * (n // 14), latex_sections, n=100_000)


def test_nested_commands_are_unwrapped_in_one_pass() -> None:
    assert plain_latex("A \\emph{\\textbf{bold} and \\label{x}it}~\\cite{y}\\& \\foo{z} \\\\[2pt] end") == (
        "A bold and it & \\foo{z} end"
    )
    assert plain_latex("Open \\textit{rest") == "Open rest"
    assert plain_latex("Dropped \\footnote{rest") == "Dropped"
    assert_linear(lambda n: "T " + "\\emph{w} " * (n // 9), plain_latex, n=100_000)
