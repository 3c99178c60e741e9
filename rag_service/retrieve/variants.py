"""A query's cheap variants: its keyword core and its identifiers split, searched beside it (``expand_query``)."""

from __future__ import annotations

import re

from rag_service.retrieve.query import parse_query, websearch_parts

_KEY_WORD = re.compile(r"\w+")
# question and function words a keyword core leaves out
_STOP_WORDS = frozenset(
    (
        "a",
        "about",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "for",
        "from",
        "get",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "she",
        "should",
        "so",
        "some",
        "tell",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "explain",
        "describe",
        "show",
        "give",
        "find",
        "list",
    )
)


def split_identifier(word: str) -> str:
    """``AgentFactory`` -> ``Agent Factory``, ``HTTPServer`` -> ``HTTP Server``, ``a_b`` -> ``a b``."""
    out: list[str] = []
    for i, ch in enumerate(word):
        if ch == "_":
            out.append(" ")
            continue
        if i and ch.isupper():
            prev = word[i - 1]
            nxt = word[i + 1] if i + 1 < len(word) else ""
            if prev.islower() or prev.isdigit() or (prev.isupper() and nxt.islower()):
                out.append(" ")
        out.append(ch)
    return " ".join("".join(out).split())


def expand_query(text: str) -> list[str]:
    """Up to three deterministic variants of ``text``, the original first; no model involved.

    1. the original text;
    2. its keyword core: the words without stop and question words
       (``How does AgentFactory work?`` -> ``AgentFactory work``);
    3. the core with identifiers split (``Agent Factory work``).

    Quoted phrases and ``-exclusions`` are carried into variants 2 and 3 in websearch syntax.
    Variants equal to an earlier one (ignoring case and spacing) or empty are dropped.
    """
    parsed = parse_query(text, pairs=False)  # a variant is embedded too: its words as written
    core_words = [w for w in parsed.words if w.casefold() not in _STOP_WORDS]
    _, required = websearch_parts(parsed)
    core = " ".join([*core_words, required]).strip()
    split = " ".join([*(split_identifier(w) for w in core_words), required]).strip()
    original = text.strip()
    variants = [original]
    seen = {_variant_key(original)}
    for variant in (core, split):
        key = _variant_key(variant)
        if key and key not in seen:
            seen.add(key)
            variants.append(variant)
    return variants


def _variant_key(text: str) -> str:
    """What makes two variants the same: their word characters, ignoring case and punctuation."""
    return " ".join(_KEY_WORD.findall(text.casefold()))
