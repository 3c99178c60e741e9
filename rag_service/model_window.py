"""What the embedding model reads of a text: its tokenizer and its window (``max_seq_length``).

Chunk sizes are characters, tuned on English, where 500 characters are ~110 of MiniLM's tokens; the model reads 256
and drops the rest unseen. In Cyrillic or Arabic 500 characters are ~400 tokens, in Chinese 500, in Korean 700: the
end of every full chunk was left out of its vector (audit 54a). ``ingest.window_fit`` cuts such chunks to the
window with this count. The bundled model's tokenizer is read from its files, so counting loads no model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rag_service.embed import BUNDLED_MINILM_ID, LazyEmbedder, bundled_model_path


@dataclass(frozen=True, slots=True)
class ModelWindow:
    """``count``: the tokens of each text, the model's special tokens left out; ``max_tokens``: what it reads,
    special tokens included (``special`` of them); ``unknown``: the share of each text's characters (but spaces)
    the vocabulary cannot read (its ``[UNK]`` token: Thai, most Han characters, emoji for MiniLM; a word of them
    is one such token, so tokens would undercount it), None when the tokenizer has no such token."""

    count: Callable[[Sequence[str]], list[int]]
    max_tokens: int
    special: int = 2
    unknown: Callable[[Sequence[str]], list[float]] | None = None


#: a text with at least this share of characters unknown to the model is one its vector cannot represent
UNREADABLE_SHARE = 0.5


def unknown_shares(
    texts: Sequence[str], ids: Sequence[Sequence[int]], offsets: Sequence[Sequence[tuple[int, int]]], unknown_id: int
) -> list[float]:
    """The share of each text's characters, spaces left out, within its tokens of ``unknown_id`` (0 for a text of
    spaces only)."""
    shares = []
    for text, row, spans in zip(texts, ids, offsets, strict=True):
        unknown = sum(len(text[start:end].replace(" ", "")) for i, (start, end) in zip(row, spans, strict=True)
                      if i == unknown_id)
        written = len("".join(text.split()))
        shares.append(unknown / written if written else 0.0)
    return shares


@cache
def tokenizer_window(directory: Path) -> ModelWindow:
    """The window of the sentence-transformers model (or its ONNX export) in ``directory``: its ``tokenizer.json``
    without truncation, and ``max_seq_length``."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    max_tokens = int(json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"])

    def count(texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    unknown_token = getattr(tokenizer.model, "unk_token", None)
    unknown_id = tokenizer.token_to_id(unknown_token) if unknown_token else None
    if unknown_id is None:
        return ModelWindow(count, max_tokens)

    def unknown(texts: Sequence[str]) -> list[float]:
        encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return unknown_shares(texts, [e.ids for e in encoded], [e.offsets for e in encoded], unknown_id)

    return ModelWindow(count, max_tokens, unknown=unknown)


def model_window(embedder: Any) -> ModelWindow | None:
    """The window of ``embedder``'s model, or None when it has none (the hashing embedder of the tests) or does
    not say. Wrappers (``inner``) are looked through; the bundled model's is read without loading it."""
    while hasattr(embedder, "inner"):
        embedder = embedder.inner
    if isinstance(embedder, LazyEmbedder):
        if embedder.model_id.split("+")[0] == BUNDLED_MINILM_ID and not embedder.loaded:
            return tokenizer_window(bundled_model_path())
        embedder = embedder.model()
    window = getattr(embedder, "window", None)
    return window() if callable(window) else None
