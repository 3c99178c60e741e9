"""The context formatter: layout, citations, and an exact token budget on the whole string."""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import regex
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_service import format as format_module
from rag_service.errors import ConfigurationError
from rag_service.fences import shown_text
from rag_service.format import TRUNCATION_MARKER, format_context
from rag_service.result import ChunkScores, RetrievedChunk
from rag_service.tokens import count_tokens, get_encoding


def _chunk(
    chunk_id: int,
    source: str,
    relevance: float,
    content: str,
    *,
    header_path: str = "",
    title: str = "",
) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk_id,
        document_id=hash(source) % 1000,
        source=source,
        content=content,
        headers={},
        header_path=header_path,
        start_char=0,
        end_char=len(content),
        relevance_score=relevance,
        scores=ChunkScores(fused=relevance),
        collection="default",
        chunk_type="child",
        title=title,
    )


GUIDE = "docs/guide.md"
FAQ = "docs/faq.md"


def _sample() -> list[RetrievedChunk]:
    return [
        _chunk(
            1, GUIDE, 0.87, "Run pip install rag-service.", header_path="Guide > Install > Linux", title="Guide Title"
        ),
        _chunk(2, FAQ, 0.91, "Yes, it works offline.", header_path="FAQ > Offline"),
        _chunk(3, GUIDE, 0.40, "Call retrieve() with a query.", header_path="Guide > Usage", title="Guide Title"),
        _chunk(4, "notes.txt", 0.10, "Misc notes."),
    ]


def test_layout_groups_by_source_with_citations() -> None:
    result = format_context(_sample(), max_tokens=1000)
    assert result.text == (
        "[1] docs/faq.md\n"
        "§ FAQ > Offline (relevance 91%)\n"
        "Yes, it works offline.\n"
        "\n"
        "[2] docs/guide.md — Guide Title\n"
        "§ Guide > Install > Linux (relevance 87%)\n"
        "Run pip install rag-service.\n"
        "\n"
        "§ Guide > Usage (relevance 40%)\n"
        "Call retrieve() with a query.\n"
        "\n"
        "[3] notes.txt\n"
        "(relevance 10%)\n"
        "Misc notes."
    )
    assert [(s.number, s.source, s.title, s.chunk_ids) for s in result.sources] == [
        (1, FAQ, "", [2]),
        (2, GUIDE, "Guide Title", [1, 3]),
        (3, "notes.txt", "", [4]),
    ]
    assert [c.chunk_id for c in result.included] == [2, 1, 3, 4]  # text order
    assert result.total_tokens == count_tokens(result.text)
    assert not result.truncated and result.cut_chunk_id is None


def test_every_citation_number_maps_to_its_source() -> None:
    result = format_context(_sample(), max_tokens=1000)
    for source in result.sources:
        assert f"[{source.number}] {source.source}" in result.text


def test_empty_input_gives_empty_context() -> None:
    result = format_context([], max_tokens=100)
    assert (result.text, result.total_tokens, result.sources, result.included, result.truncated) == (
        "",
        0,
        [],
        [],
        False,
    )


@pytest.mark.parametrize("max_tokens", [0, -5, True, 2.5])
def test_invalid_budget_raises(max_tokens: object) -> None:
    with pytest.raises(ConfigurationError, match=r"max_tokens .* must be an int of at least 1"):
        format_context(_sample(), max_tokens=max_tokens)  # type: ignore[arg-type]


def test_a_numpy_integer_budget_is_taken_as_the_int_it_is() -> None:
    """D4: np.int64(500) was refused as "must be a positive integer", after the whole search had run."""
    assert format_context(_sample(), max_tokens=np.int64(500)) == format_context(_sample(), max_tokens=500)  # type: ignore[arg-type]


def test_long_chunk_is_cut_at_a_token_boundary_with_marker() -> None:
    words = " ".join(f"word{i}" for i in range(400))
    chunks = [_chunk(1, GUIDE, 0.9, words, header_path="Guide"), _chunk(2, FAQ, 0.5, "Later chunk.")]
    result = format_context(chunks, max_tokens=150)
    assert result.truncated
    assert result.cut_chunk_id == 1
    assert result.text.endswith(TRUNCATION_MARKER)
    shown = result.text.split("\n")[2]
    assert words.startswith(shown) and len(shown) < len(words)
    assert count_tokens(shown) >= 50
    assert [c.chunk_id for c in result.included] == [1]  # nothing is admitted after a cut
    assert result.total_tokens == count_tokens(result.text) <= 150
    assert result.total_tokens >= 140  # the cut fills the budget nearly to the token
    [cut] = result.included  # holds what the text shows (it was returned whole), its offsets with it
    assert (cut.content, cut.start_char, cut.end_char) == (shown, chunks[0].start_char, len(shown))
    assert cut.match_start == 0 and cut.match_end == len(shown) and cut.content_hash != chunks[0].content_hash


def test_chunk_that_cannot_keep_50_tokens_is_omitted_and_smaller_ones_still_fit() -> None:
    big = " ".join(f"token{i}" for i in range(300))
    chunks = [
        _chunk(1, GUIDE, 0.9, "Short first answer."),
        _chunk(2, FAQ, 0.8, big),
        _chunk(3, "notes.txt", 0.7, "Tiny."),
    ]
    result = format_context(chunks, max_tokens=45)
    assert result.truncated and result.cut_chunk_id is None
    assert TRUNCATION_MARKER not in result.text
    assert [c.chunk_id for c in result.included] == [1, 3]
    assert [s.source for s in result.sources] == [GUIDE, "notes.txt"]
    assert [s.number for s in result.sources] == [1, 2]


def test_budget_too_small_for_anything() -> None:
    result = format_context(_sample(), max_tokens=3)
    assert (result.text, result.total_tokens, result.sources) == ("", 0, [])
    assert result.truncated


def test_cut_never_splits_a_character() -> None:
    emoji = "🚀👩‍👩‍👧‍👦日本語テキスト" * 200
    result = format_context([_chunk(1, GUIDE, 0.9, emoji)], max_tokens=120)
    assert result.cut_chunk_id == 1
    shown = result.text.split("\n")[2]
    assert "\ufffd" not in result.text
    assert emoji.startswith(shown)
    assert result.total_tokens == count_tokens(result.text) <= 120


#: texts where a code point is not what a reader sees as one character: a decomposed accent, a ZWJ family emoji,
#: Devanagari conjuncts and vowel signs, Thai vowel and tone marks
GRAPHEME_TEXTS = {
    "French NFD": unicodedata.normalize("NFD", "Envoyez votre résumé à l’équipe. ") * 60,
    "ZWJ emoji": "Team 👨\u200d👩\u200d👧\u200d👦 " * 200,
    "flags and skin tones": "Teams 🇫🇷🇯🇵 👍🏽 ❤️ " * 150,
    "Hindi": "नमस्ते दुनिया क्षत्रिय " * 100,
    "Thai": "ระบบจะสำรองข้อมูลฐานข้อมูลทุกวันเวลาตีสอง " * 60,
}


def _splits_a_grapheme(shown: str, text: str) -> bool:
    """Whether ``text`` goes on after its prefix ``shown`` with a character that continues shown's last cluster."""
    return len(shown) < len(text) and len(regex.findall(r"\X", text[: len(shown) + 1])) == len(
        regex.findall(r"\X", shown)
    )


@pytest.mark.parametrize("name", GRAPHEME_TEXTS)
def test_the_cut_never_splits_a_grapheme_cluster(name: str) -> None:
    # "résumé" in NFD reached the LLM as "re", a family emoji ended in a dangling ZWJ, Thai and Hindi lost vowel signs
    text = GRAPHEME_TEXTS[name]
    cuts = 0
    for budget in range(60, 400, 3):
        result = format_context([_chunk(1, GUIDE, 0.9, text)], max_tokens=budget)
        assert result.total_tokens == count_tokens(result.text) <= budget
        if result.cut_chunk_id is None:
            continue
        cuts += 1
        shown = result.included[0]
        assert text[shown.start_char : shown.end_char] == shown.content and text.startswith(shown.content)
        assert shown.content in result.text
        assert not _splits_a_grapheme(shown.content, text), (budget, shown.content[-8:], text[shown.end_char :][:3])
    assert cuts > 50


@pytest.mark.parametrize("name", GRAPHEME_TEXTS)
def test_a_line_is_cut_between_grapheme_clusters(name: str) -> None:
    line = "no relevant passages for '" + GRAPHEME_TEXTS[name][:300] + "'"
    for budget in range(1, 60):
        shown, tokens = format_module.fit_line(line, max_tokens=budget)
        assert tokens == count_tokens(shown) <= budget and line.startswith(shown)
        assert not _splits_a_grapheme(shown, line), (budget, shown[-8:])


def test_percentages_are_clamped_and_rounded() -> None:
    chunks = [_chunk(1, GUIDE, 1.7, "a"), _chunk(2, FAQ, -0.2, "b"), _chunk(3, "x", 0.125, "c")]
    text = format_context(chunks, max_tokens=200).text
    assert "(relevance 100%)" in text and "(relevance 0%)" in text and "(relevance 12%)" in text


texts = st.lists(
    st.one_of(
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
        st.sampled_from(["🚀", "👩‍👩‍👧‍👦", "日本語", "مرحبا", "שלום", " ", "\n", "\n\n", ".", "<|endoftext|>", "é"]),
        st.sampled_from(["word ", "token", "Install with pip. ", "  ", "ab"]),
    ),
    max_size=300,
).map("".join)
chunk_specs = st.lists(
    st.tuples(
        st.sampled_from([GUIDE, FAQ, "a/b.rst", "emoji🚀.md", "src/app.py", "deploy/app.yaml"]),
        st.floats(0.0, 1.0),
        texts,
    ),
    max_size=8,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk_specs, st.integers(1, 700))
def test_budget_is_never_exceeded(specs: list[tuple[str, float, str]], max_tokens: int) -> None:
    chunks = [  # each a document of its own: none joins another (``overlaps``)
        replace(
            _chunk(i, source, rel, text, header_path="H > Sub" if i % 2 else "", title="T" if i % 3 else ""),
            document_id=i,
            start_line=10 * i + 1,
        )
        for i, (source, rel, text) in enumerate(specs)
    ]
    result = format_context(chunks, max_tokens=max_tokens)
    assert result.total_tokens == count_tokens(result.text) <= max_tokens
    included = {c.chunk_id for c in result.included}
    assert sorted(included) == sorted(cid for s in result.sources for cid in s.chunk_ids)
    assert [s.number for s in result.sources] == list(range(1, len(result.sources) + 1))
    assert {s.source for s in result.sources} == {c.source for c in result.included}
    for chunk in result.included:
        if body := shown_text(chunk):
            assert body in result.text  # as shown (code from its first line's indentation): whole, or the cut part
        assert chunk.end_char - chunk.start_char == len(chunk.content)
        assert chunk.start_char <= chunk.match_start <= chunk.match_end <= chunk.end_char
    if result.cut_chunk_id is not None:
        assert result.truncated and result.text.count(f"\n{TRUNCATION_MARKER}") >= 1
    else:
        assert TRUNCATION_MARKER not in result.text or any(TRUNCATION_MARKER in c.content for c in chunks)
    if len(included) < len(chunks):
        assert result.truncated


class _CountingEncoding:
    """A tiktoken encoding that counts the characters it is asked to encode."""

    def __init__(self, inner: tiktoken.Encoding) -> None:
        self.inner = inner
        self.chars = 0

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        self.chars += len(text)
        return self.inner.encode(text, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_many_chunks_are_encoded_about_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work stays linear: each chunk is tokenised once, the whole text a few times (not once per chunk)."""
    encoding = _CountingEncoding(get_encoding())
    monkeypatch.setattr(format_module, "get_encoding", lambda name=None: encoding)
    chunks = [_chunk(i, f"docs/{i % 7}.md", 1 - i / 200, " ".join(f"w{i}x{j}" for j in range(120))) for i in range(200)]
    result = format_context(chunks, max_tokens=8000)
    assert result.total_tokens == count_tokens(result.text) <= 8000
    assert 10 < len(result.included) < len(chunks)  # the budget binds: many offers, many admissions
    assert encoding.chars <= sum(len(c.content) for c in chunks) + 4 * len(result.text), encoding.chars


@pytest.mark.parametrize("words", [3, 40, 400])
def test_the_smallest_budget_is_the_first_that_shows_the_chunk(words: int) -> None:
    chunk = _chunk(1, "docs/guide.md", 0.9, "backups run nightly " * words, header_path="Guide > Ops", title="Guide")
    need = format_module.smallest_budget(chunk)
    assert [c.chunk_id for c in format_context([chunk], max_tokens=need).included] == [1]  # in part, maybe
    assert format_context([chunk], max_tokens=need - 1).included == []


@pytest.mark.parametrize("budget", [1, 2, 5, 10, 17, 200])
def test_a_line_is_cut_to_the_budget_at_a_character_boundary(budget: int) -> None:
    line = "no relevant passages for 'sauvegardes 夜間 バックアップ 🚀🚀': the best relevance was 3%"
    shown, tokens = format_module.fit_line(line, max_tokens=budget)
    assert tokens == count_tokens(shown) <= budget
    assert line.startswith(shown) and "\ufffd" not in shown
    assert shown == line or budget < count_tokens(line)


def test_a_budget_that_skips_the_first_result_for_smaller_ones_says_so() -> None:
    # a 1% passage stood in for the 74% answer without a word (format audit): the line names the first's need
    first = _chunk(1, "docs/guide.md", 0.74, "backups run nightly " * 400, header_path="Guide > Ops", title="Guide")
    small = _chunk(2, "notes.txt", 0.01, "cucumbers", title="Notes")
    need, small_need = format_module.smallest_budget(first), format_module.smallest_budget(small)
    assert small_need < need - 2
    budget = need - 1
    shown = format_context([first, small], max_tokens=budget)
    assert shown.included == [small]
    line = format_module.budget_shortfall([first, small], shown, max_tokens=budget)
    assert line == (
        f"max_tokens {budget} does not hold the first result (it needs {need} tokens), so the context shows 1 "
        f"lower-ranked of the 2 results; raise max_tokens to at least {need}"
    )
    roomy = format_context([first, small], max_tokens=need)
    assert format_module.budget_shortfall([first, small], roomy, max_tokens=need) is None
    starved = format_context([first, small], max_tokens=small_need - 1)
    assert format_module.budget_shortfall([first, small], starved, max_tokens=small_need - 1).startswith(
        f"max_tokens {small_need - 1} holds none of the 2 results: the first needs {need} tokens"
    )


def _lines_in_code(text: str) -> list[str]:
    """The lines of ``text`` a markdown reader takes for code (inside a fenced block), fences excluded."""
    inside: str | None = None  # the opening fence (CommonMark: a closer is as long at least, with nothing after)
    out = []
    for line in text.split("\n"):
        bare = line.lstrip(" ")
        fence = bare[: len(bare) - len(bare.lstrip(bare[:1]))] if bare[:1] in ("`", "~") else ""
        if len(fence) >= 3 and len(line) - len(bare) <= 3:
            if inside is None:
                inside = fence
                continue
            if fence[0] == inside[0] and len(fence) >= len(inside) and not bare[len(fence) :].strip():
                inside = None
                continue
        if inside is not None:
            out.append(line)
    return out


def _layout_lines(text: str) -> list[str]:
    layout = ("§ ", "(relevance", "[")
    return [line for line in text.split("\n") if line.startswith(layout) or line == TRUNCATION_MARKER]


def test_a_passage_that_opens_a_code_block_closes_it_before_the_next_line_of_the_layout() -> None:
    """A chunk cut from a fenced block left it open: later section and citation lines were read as code."""
    code = "Setup:\n\n```python\n" + "\n".join(f"value_{i} = compute({i})" for i in range(12))  # never closed
    chunks = [
        _chunk(1, GUIDE, 0.9, code, header_path="Guide > Setup"),
        _chunk(2, GUIDE, 0.8, "Run it nightly.", header_path="Guide > Ops"),
        _chunk(3, FAQ, 0.7, "~~~~\nlisting\n```\nstill code\n", header_path="FAQ"),  # a ``` inside ~~~~
    ]
    result = format_context(chunks, max_tokens=2000)
    assert [c.chunk_id for c in result.included] == [1, 2, 3]
    assert _layout_lines(result.text) and not set(_layout_lines(result.text)) & set(_lines_in_code(result.text))
    assert "value_11 = compute(11)\n```\n\n§ Guide > Ops" in result.text and result.text.endswith("still code\n~~~~")
    assert result.total_tokens == count_tokens(result.text)


def test_a_cut_inside_a_code_block_closes_it_before_the_marker() -> None:
    code = "```sql\n" + "\n".join(f"SELECT {i} FROM backups WHERE night = {i};" for i in range(300)) + "\n```"
    result = format_context([_chunk(1, GUIDE, 0.9, code, header_path="Guide")], max_tokens=120)
    assert result.cut_chunk_id == 1 and result.text.endswith(f"\n```\n{TRUNCATION_MARKER}")
    assert TRUNCATION_MARKER not in _lines_in_code(result.text)
    assert result.total_tokens == count_tokens(result.text) <= 120
    [cut] = result.included  # its content is the part shown, without the closing fence the layout added
    assert code.startswith(cut.content) and cut.content.count("```") == 1 and cut.content in result.text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.sampled_from(["```", "~~~", "````", "x", " ", "\n", "py"]), max_size=60).map("".join),
        min_size=1,
        max_size=5,
    ),
    st.integers(20, 400),
)
def test_no_layout_line_is_ever_inside_a_code_block(texts: list[str], max_tokens: int) -> None:
    chunks = [_chunk(i, f"doc{i % 2}.md", 1 - i / 10, text or "x", header_path=f"H{i}") for i, text in enumerate(texts)]
    result = format_context(chunks, max_tokens=max_tokens)
    assert not set(_layout_lines(result.text)) & set(_lines_in_code(result.text)), result.text
    assert result.total_tokens == count_tokens(result.text) <= max_tokens
