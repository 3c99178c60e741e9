"""A code result in the context (audit 56b D13): cited by its lines, fenced with its language, the budget exact."""

from __future__ import annotations

from rag_service.fences import citation, fenced, shown_body
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


def _shown_code(text: str) -> str:
    """The code lines a cut result shows: between its opening fence line and the fence closed before the marker."""
    return text.split("```python\n", 1)[1].rsplit("\n```\n[… truncated]", 1)[0]


def test_a_cut_code_result_cites_the_lines_it_shows():
    # the header said the whole chunk's lines (L1-179) while the text showed lines 1-11 of it
    for budget, last in ((90, 11), (150, 20), (400, 65)):
        shown = format_context([_code(0, len(CODE))], max_tokens=budget, min_cut_tokens=20)
        (cut,) = shown.included
        assert shown.text.split("\n")[1] == f"§ src/app.py:L1-{last} (relevance 50%)"
        assert cut.end_line == last == _shown_code(shown.text).count("\n") + 1
        assert shown.total_tokens == len(get_encoding("cl100k_base").encode(shown.text)) <= budget


def test_a_cut_fits_the_budget_with_the_header_it_shows():
    # 1,200 lines: the whole chunk's "L1-1200" takes a token more than a cut's "L1-27"; the cut is sized with its own
    code = "".join(f"v{i} = {i}\n" for i in range(1200))
    chunk = span_chunk(code, 0, len(code), source="src/values.py", start_line=1)
    enc = get_encoding("cl100k_base")
    for budget in range(80, 200, 7):
        shown = format_context([chunk], max_tokens=budget, min_cut_tokens=20)
        (cut,) = shown.included
        assert shown.text.split("\n")[1] == f"§ src/values.py:L1-{cut.end_line} (relevance 50%)"
        assert _shown_code(shown.text) == code[: cut.end_char] and cut.end_line == cut.content.count("\n") + 1
        assert budget - 2 <= shown.total_tokens == len(enc.encode(shown.text)) <= budget


STORE = (
    "class Store:\n"
    "    def save(self, item):\n"
    "        self.items.append(item)\n"
    "        return item\n"
    "\n"
    "    def load(self):\n"
    "        return self.items\n"
)
SETTINGS = "server:\n  http:\n    port: 8080\n    host: 0.0.0.0\n"


def test_a_code_result_keeps_its_first_line_s_indentation():
    # D11: a chunk starting inside a method showed its first line flush left, the next ones indented
    save = STORE.index("        self"), STORE.index("\n    def load")
    body = span_chunk(STORE, *save, source="src/store.py", start_line=3)
    assert format_context([body], max_tokens=500).text == (
        "[1] src/store.py\n"
        "§ src/store.py:L3-4 (relevance 50%)\n"
        "```python\n"
        "        self.items.append(item)\n"
        "        return item\n"
        "```"
    )
    load = span_chunk(STORE, STORE.index("\n\n    def load"), len(STORE), source="src/store.py", start_line=4)
    assert shown_body(load) == "```python\n    def load(self):\n        return self.items\n```"  # blank lines dropped
    assert citation(load) == "src/store.py:L6-7"
    nested = SETTINGS.index("    port"), len(SETTINGS)
    port = span_chunk(SETTINGS, *nested, source="deploy/app.yaml", start_line=3)
    assert shown_body(port) == "```yaml\n    port: 8080\n    host: 0.0.0.0\n```"
    assert citation(port) == "deploy/app.yaml:L3-4"
    assert shown_body(span_chunk(SETTINGS, *nested)) == "port: 8080\n    host: 0.0.0.0"  # prose: stripped, as before


def test_a_cut_indented_code_result_shows_and_holds_its_indentation():
    code = "class Big:\n    def run(self):\n" + "".join(f"        step_{i} = work({i})\n" for i in range(300))
    start = code.index("        step_0") - 1  # from the line break before it: a blank start is not shown
    match = {"match_start": code.index("        step_2 "), "match_end": code.index("        step_250 ")}
    chunk = span_chunk(code, start, len(code), source="src/big.py", start_line=2, **match)
    for budget in (90, 160):
        shown = format_context([chunk], max_tokens=budget, min_cut_tokens=20)
        (cut,) = shown.included
        assert (cut.content, cut.start_char) == (code[start : cut.end_char], start)
        assert cut.content.startswith("\n        step_0 = work(0)\n") and cut.content == cut.content.rstrip()
        assert cut.end_line == code.count("\n", 0, cut.end_char) + 1
        assert (cut.match_start, cut.match_end) == (match["match_start"], cut.end_char)  # kept inside the part
        assert shown.text.split("\n")[1] == f"§ src/big.py:L3-{cut.end_line} (relevance 50%)"
        assert _shown_code(shown.text) == cut.content[1:]
        assert shown.total_tokens == len(get_encoding("cl100k_base").encode(shown.text)) <= budget


def test_a_cut_before_the_match_gives_no_inverted_match_lines():
    # audit 58c: the cut showed lines 1-11 of a chunk whose match was on line 150: match lines 150-11 (inverted)
    match = CODE.index("def f50")
    chunk = _code(0, len(CODE), match_start=match, match_end=match + 30, match_start_line=150, match_end_line=151)
    (cut,) = format_context([chunk], max_tokens=90, min_cut_tokens=20).included
    assert cut.end_line is not None and cut.end_line < 150
    assert cut.match_start_line is not None and cut.match_end_line is not None
    assert cut.start_line <= cut.match_start_line <= cut.match_end_line <= cut.end_line
    assert cut.match_start == cut.match_end == cut.end_char  # a match past the shown text: empty, at its end


def test_json_and_ini_results_are_fenced_and_cited_like_toml_and_yaml():
    # audit 58c: a .json result was shown as prose (no fence, no lines); .ini and .cfg went unchunked by section
    doc = '{\n  "name": "web",\n  "scripts": {"build": "vite build"}\n}\n'
    chunk = span_chunk(doc, 4, doc.index("}\n}") + 1, source="package.json", start_line=2)
    assert citation(chunk) == "package.json:L2-3"
    assert shown_body(chunk) == '```json\n"name": "web",\n  "scripts": {"build": "vite build"}\n```'
    ini = "[flake8]\nmax-line-length = 120\n"
    assert shown_body(span_chunk(ini, 0, len(ini) - 1, source="setup.cfg", start_line=1)).startswith("```ini\n[flake8]")
    assert citation(span_chunk(ini, 0, 8, source="tox.ini", start_line=1)) == "tox.ini:L1"


def test_an_rst_or_asciidoc_title_underline_is_no_fence_to_close():
    """``Details\\n~~~~~~~`` in a .rst section got a stray ``~~~~~~~`` after it, read as an open markdown fence, and a
    markdown renderer showed the section as code (audit 59b); a markdown result's open fence is still closed."""
    text = "Details\n~~~~~~~\n\nWidgets are configured with the frobnicate option."
    for source in ("docs/guide.rst", "docs/guide.adoc"):
        assert shown_body(span_chunk(text, 0, len(text), source=source)) == text
        shown = format_context([span_chunk(text, 0, len(text), source=source)], max_tokens=12, min_cut_tokens=2)
        assert "~~~~~~~\n" not in shown.text.split("configured", 1)[-1]
    assert shown_body(span_chunk(text, 0, len(text), source="docs/guide.md")).endswith("option.\n~~~~~~~")


def test_a_pdfs_or_decks_chunk_is_cited_by_its_pages_or_slides():
    text = "Restores are tested every month on a copy of the production database."
    pdf = span_chunk(text, 0, len(text), source="ops/manual.pdf", metadata={"page_start": 3, "page_end": 4})
    deck = span_chunk(text, 0, len(text), source="q3.pptx", metadata={"page_start": 5, "page_end": 5})
    assert format_context([pdf], max_tokens=200).text.startswith("[1] ops/manual.pdf\n§ pp. 3-4 (relevance")
    assert "\n§ slide 5 (relevance" in format_context([deck], max_tokens=200).text
    assert "§ p." not in format_context([span_chunk(text, 0, len(text))], max_tokens=200).text
