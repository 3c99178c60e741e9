"""Query handling: websearch parsing, inert terms for PostgreSQL, expansion and validation."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_service.errors import QueryError
from rag_service.retrieve.query import (
    MAX_QUERY_CHARS,
    ParsedQuery,
    bounds_note,
    cut_note,
    excluded_terms,
    parse_query,
    validate_query,
    websearch_parts,
)
from rag_service.retrieve.variants import expand_query, split_identifier
from tests.complexity import assert_linear

# characters PostgreSQL's websearch parser interprets inside an unquoted word
_UNSAFE_IN_WORD = re.compile(r"""["'\\!&|()<>:*\x00]""")


def _assert_inert(any_terms: str) -> None:
    if not any_terms:
        return
    for word in any_terms.split(" or "):
        assert word and " " not in word
        assert not _UNSAFE_IN_WORD.search(word), word
        assert not word.startswith("-"), word
        assert word.casefold() != "or"


def test_plain_question_is_an_or_of_its_words() -> None:
    parsed = parse_query("How does AgentFactory work?")
    assert parsed == ParsedQuery(words=["How", "does", "AgentFactory", "work"])
    assert websearch_parts(parsed) == ("How or does or AgentFactory or work", "")


def test_phrases_and_exclusions_are_required_terms() -> None:
    parsed = parse_query('install "docker compose" -windows -"old version" linux')
    assert parsed.words == ["install", "linux"]
    assert parsed.phrases == ["docker compose"]
    assert parsed.excluded == ["windows", "old version"]
    assert websearch_parts(parsed) == ("install or linux", '"docker compose" -windows -"old version"')


def test_sql_injection_text_is_just_words() -> None:
    parsed = parse_query("'); DROP TABLE documents; --")
    assert parsed == ParsedQuery(words=["DROP", "TABLE", "documents"])
    any_terms, required = websearch_parts(parsed)
    assert (any_terms, required) == ("DROP or TABLE or documents", "")


def test_operator_soup_leaves_only_words() -> None:
    parsed = parse_query("a & | ! ( ) : * '")
    assert parsed == ParsedQuery(words=["a"])
    assert websearch_parts(parsed) == ("a", "")
    assert websearch_parts(parse_query("foo<->bar <2> baz:* x|y")) == ("foo or bar or 2 or baz or x or y", "")


def test_apostrophes_and_backslashes_cannot_swallow_the_or() -> None:
    # PostgreSQL parses "don't or it's or bar" to just 'bar': the quote starts a quoted value
    any_terms, _ = websearch_parts(parse_query("don't or it's or bar's a\\b"))
    assert any_terms == "don or t or it or s or bar or a or b"


def test_or_and_lone_dash_are_dropped() -> None:
    parsed = parse_query("cats OR dogs or, Or - -- birds")
    assert parsed == ParsedQuery(words=["cats", "dogs", "birds"])


def test_dash_inside_a_word_is_not_an_exclusion() -> None:
    parsed = parse_query("state-of-the-art x-ray -legacy")
    assert parsed.words == ["state-of-the-art", "x-ray"]
    assert parsed.excluded == ["legacy"]


def test_flags_and_numbers_after_a_dash_are_words() -> None:
    # a question quoting a command line, or listing numbers, excludes nothing (ray-docs-qa and SciFact have both)
    parsed = parse_query("call serve deploy config.yaml --address <remote address> with E2f-1, -2, -3 cells -v -it")
    assert parsed.excluded == ["it"]  # one letter is a flag; two letters or more a word to exclude
    assert {"address", "2", "3", "v"} <= set(parsed.words)
    assert websearch_parts(parse_query("--address")) == ("address", "")


def test_excluded_token_with_special_characters_becomes_a_phrase() -> None:
    parsed = parse_query("good -don't")
    assert parsed.excluded == ["don t"]
    assert websearch_parts(parsed) == ("good", '-"don t"')


@pytest.mark.parametrize(
    ("text", "words", "phrases"),
    [
        ('"unbalanced phrase here', ["unbalanced", "phrase", "here"], []),
        ('start "closed" then "open rest', ["start", "then", "open", "rest"], ["closed"]),
        ('how to run "TorchTrainer on gpu?', ["how", "to", "run", "TorchTrainer", "on", "gpu"], []),
        ('-"not closed', ["not", "closed"], []),
        ('a"b"c', ["a", "c"], ["b"]),
        ('"" "   " word', ["word"], []),
        ('"', [], []),
    ],
)
def test_unbalanced_and_empty_quotes(text: str, words: list[str], phrases: list[str]) -> None:
    parsed = parse_query(text)
    assert (parsed.words, parsed.phrases) == (words, phrases)
    _, required = websearch_parts(parsed)
    assert required.count('"') % 2 == 0


def test_an_unbalanced_quote_is_literal_not_a_phrase_to_the_end() -> None:
    """Audit 56a D1: a stray quote made the rest of the question one phrase no chunk holds."""
    assert websearch_parts(parse_query('how to run "TorchTrainer on gpu?')) == (
        "how or to or run or TorchTrainer or on or gpu",
        "",
    )
    assert parse_query('"a b" c "d').phrases == ["a b"]  # quotes pair from the left; the last one is odd


def test_phrases_named_in_as_words_are_read_as_words() -> None:
    text = 'run "Torch Trainer" on "GPU nodes" -"old api"'
    parsed = parse_query(text, as_words=["torch trainer"])  # any case, as phrases holds them
    assert parsed.words == ["run", "Torch", "Trainer", "on"]
    assert parsed.phrases == ["GPU nodes"]
    assert parsed.excluded == ["old api"]  # an exclusion is never turned into words
    assert parse_query(text, as_words=["GPU nodes", "Torch Trainer"]).phrases == []
    assert parse_query(text) == parse_query(text, as_words=["not a phrase of it"])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("/tmp/ray/session_latest/logs", ["/tmp/ray/session_latest/logs"]),
        ("see ~/.aws/credentials", ["see", "/.aws/credentials"]),  # PostgreSQL's lexeme after a space
        ("run ./run.sh or ../a/b.py", ["run", "/run.sh", "/a/b.py"]),
        ("(/api/v1/jobs), and/or", ["/api/v1/jobs", "and/or"]),
        ("~/ / ./", []),
        ("/home/dev/.venv/lib/python3.10/site-packages/x.py", ["/home/dev/.venv/lib/python3.10/site-packages/x.py"]),
    ],
)
def test_a_path_keeps_its_leading_slash(text: str, words: list[str]) -> None:
    assert parse_query(text).words == words


def test_a_long_word_is_never_cut_to_a_prefix_no_lexeme_equals() -> None:
    twenty = "/" + "/".join("abcdefghijklmnopqrst")
    assert parse_query(twenty).words == []  # a cut path matches nothing: left out, and said
    assert "left out" in (bounds_note(parse_query(twenty)) or "")
    assert parse_query("a-b-c-d-e-f-g-h-i-j").words == ["a b c d e f g h"]  # the parts, not a cut compound
    assert parse_query("x_1_2_3_4_5_6_7_8_9").words == ["x 1 2 3 4 5 6 7"]


def test_emoji_and_right_to_left_text() -> None:
    parsed = parse_query("🚀 rocket مرحبا بالعالم -שלום 日本語のテキスト 👍")
    pairs = ["日本", "本語", "語の", "のテ", "テキ", "キス", "スト"]  # Japanese is read in pairs (keyword_text)
    assert parsed.words == ["rocket", "مرحبا", "بالعالم", *pairs]
    assert parsed.excluded == ["שלום"]
    assert websearch_parts(parsed) == (" or ".join(["rocket", "مرحبا", "بالعالم", *pairs]), "-שלום")


def test_a_run_without_spaces_is_words_of_pairs_a_phrase_of_them_in_a_phrase_or_exclusion() -> None:
    parsed = parse_query('全量备份 "增量备份" -冷备份 ＡＰＩ')
    assert parsed.words == ["全量", "量备", "备份", "API"]
    assert parsed.phrases == ["增量 量备 备份"]
    assert parsed.excluded == ["冷备 备份"]
    assert websearch_parts(parsed) == ("全量 or 量备 or 备份 or API", '"增量 量备 备份" -"冷备 备份"')
    assert parse_query("全量备份", pairs=False).words == ["全量备份"]


def test_combining_marks_stay_on_their_word() -> None:
    word = "हिन्दी"  # ends with a vowel sign (category Mc), not punctuation
    assert parse_query(word).words == [word]


def test_duplicates_are_dropped_case_insensitively() -> None:
    assert parse_query("Pool pool POOL size").words == ["Pool", "size"]


def test_hand_built_parsed_query_is_made_inert() -> None:
    parsed = ParsedQuery(words=['ev"il', "-neg", "or", "a b"], phrases=['x "y'], excluded=["it's"])
    any_terms, required = websearch_parts(parsed)
    _assert_inert(any_terms)
    assert any_terms == "ev or il or neg or a or b"
    assert required == '"x y" -"it s"'


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=200)
    | st.text(alphabet="ab -\"'\\&|!():*<>orOR🚀日", max_size=60)
)
def test_any_text_parses_to_inert_parts(text: str) -> None:
    parsed = parse_query(text)
    any_terms, required = websearch_parts(parsed)
    _assert_inert(any_terms)
    assert required.count('"') % 2 == 0
    assert "\x00" not in any_terms + required
    variants = expand_query(text)
    assert 1 <= len(variants) <= 3 and variants[0] == text.strip()


def _huge_query(n: int) -> str:
    return ('AgentFactory retrieval 🚀 "quoted part" -skip مرحبا ' * (n // 40 + 1))[:n]


def _parse_all(text: str) -> None:
    websearch_parts(parse_query(text))
    expand_query(text)


def test_huge_query_parses_in_linear_time() -> None:
    parsed = parse_query(_huge_query(100_000))
    assert parsed.words == ["AgentFactory", "retrieval", "مرحبا"]
    assert_linear(_huge_query, _parse_all, n=100_000)


def test_expand_query_variants() -> None:
    assert expand_query("How does AgentFactory work?") == [
        "How does AgentFactory work?",
        "AgentFactory work",
        "Agent Factory work",
    ]
    assert expand_query("connection_pool_size") == ["connection_pool_size", "connection pool size"]
    assert expand_query("AgentFactory") == ["AgentFactory", "Agent Factory"]
    assert expand_query("what is it?") == ["what is it?"]  # nothing but stop words
    assert expand_query("pool size") == ["pool size"]  # core equals the original
    assert expand_query('How to install "docker compose" -windows') == [
        'How to install "docker compose" -windows',
        'install "docker compose" -windows',
    ]


def test_expand_query_dedupes_case_insensitively() -> None:
    assert expand_query("AGENTFACTORY?") == ["AGENTFACTORY?"]


@pytest.mark.parametrize(
    ("word", "split"),
    [
        ("AgentFactory", "Agent Factory"),
        ("HTTPServer", "HTTP Server"),
        ("getHTTPResponse", "get HTTP Response"),
        ("snake_case_name", "snake case name"),
        ("v2Model", "v2 Model"),
        ("plain", "plain"),
        ("__init__", "init"),
    ],
)
def test_split_identifier(word: str, split: str) -> None:
    assert split_identifier(word) == split


def test_validate_query_rejects_empty() -> None:
    for text in ["", "   ", "\n\t ", "\x00\x01"]:
        with pytest.raises(QueryError, match="query is empty; pass the question to search for"):
            validate_query(text)


def test_validate_query_cleans() -> None:
    assert validate_query("  how to\x00 install \n") == "how to  install"
    assert validate_query("bad \ud800 surrogate") == "bad ? surrogate"


def test_validate_query_keeps_the_head_and_tail_of_a_long_query_cut_at_words() -> None:
    text = "word " * 20_000 + "how do I restore a backup?"  # 100,000 characters, the question last
    cut = validate_query(text)
    assert MAX_QUERY_CHARS - 10 < len(cut) <= MAX_QUERY_CHARS
    head, tail = cut.split("\n")
    assert text.startswith(head) and head.endswith("word") and tail.endswith("a backup?") and tail.startswith("word")
    assert cut_note(text) == (
        "the query is 100,026 characters: searched its first and last 4,000 (a query's bound, 8,000); ask the "
        "question alone, or put it first or last"
    )
    assert cut_note("short question") is None


def test_validate_query_hard_cuts_text_without_spaces() -> None:
    text = "日本語" * 40_000
    half = MAX_QUERY_CHARS // 2
    assert validate_query(text) == f"{text[:half]}\n{text[-(half - 1):]}"
    assert validate_query("abc def", max_chars=5) == "ab\nef"
    assert validate_query("abc def", max_chars=1) == "a"


def _hostile(seed: int, length: int = 20_000) -> str:
    import random
    import string

    rng = random.Random(seed)
    return "".join(rng.choice(string.printable) for _ in range(length))


def _worded(seed: int, length: int = 20_000) -> str:
    import random

    rng = random.Random(seed)
    words = ["-" + w if rng.random() < 0.3 else w for w in (f"w{rng.randrange(100_000)}" for _ in range(length // 6))]
    text = " ".join(words)
    return text[:length]


@pytest.mark.parametrize("text", [_hostile(1), _hostile(2), _worded(3), '"' + "a b " * 5000 + '"', "-" + "-x " * 6000])
def test_any_query_is_bounded_in_words_filters_and_phrase_length(text):
    from rag_service.retrieve.query import MAX_PHRASE_WORDS, MAX_QUERY_FILTERS, MAX_QUERY_WORDS

    for variant in expand_query(validate_query(text)):
        parsed = parse_query(variant)
        assert len(parsed.words) <= MAX_QUERY_WORDS
        assert len(parsed.phrases) + len(parsed.excluded) <= MAX_QUERY_FILTERS
        assert all(len(p.split()) <= MAX_PHRASE_WORDS for p in [*parsed.phrases, *parsed.excluded])


def test_the_longest_words_are_kept_in_order_and_the_cut_is_reported():
    from rag_service.retrieve.query import MAX_QUERY_WORDS, bounds_note

    words = [f"{'x' * (i % 7 + 1)}{i}" for i in range(MAX_QUERY_WORDS + 10)]
    parsed = parse_query(" ".join(words))
    assert len(parsed.words) == MAX_QUERY_WORDS and parsed.dropped_words == 10
    assert parsed.words == [w for w in words if w in set(parsed.words)], "original order kept"
    assert min(map(len, parsed.words)) >= max(len(w) for w in words if w not in set(parsed.words))
    assert "kept the 32 longest of 42 distinct words" in (bounds_note(parsed) or "")
    assert bounds_note(parse_query("how do backups work")) is None


def test_exclusions_alone_become_one_positive_or_query() -> None:
    assert excluded_terms(parse_query('replica -backups -"write ahead" log')) == 'backups or "write ahead"'
    assert excluded_terms(parse_query('replica "log" -backups')) == ""  # a phrase: the filtered path decides
    assert excluded_terms(parse_query("replica --address -2")) == ""
    assert excluded_terms(parse_query("a -don't")) == '"don t"'
