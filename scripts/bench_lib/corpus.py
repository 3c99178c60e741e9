"""A synthetic corpus that needs no model: Zipfian text over a real vocabulary, clustered unit vectors.

* Vocabulary and word frequencies come from a BEIR corpus (SciFact by default): its most frequent
  ``vocab_size`` lower-case words with their counts, so both the head (``the``, ``of``, ``cells``)
  and the long tail are those of real scientific English. Chunks draw 80-100 words from that
  distribution and are cut into sentences of 8-20 words.
* Vectors are 384-d unit vectors drawn around ``clusters`` Gaussian centroids (which share a common
  direction, as sentence embeddings do), so neighbourhoods exist and HNSW behaves as on real data.
* A query is a few words sampled from one chunk's text plus a vector near that chunk's vector.

Everything is a pure function of the seed: a later run regenerates exactly the stored corpus.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

DIM = 384
WORDS_PER_CHUNK = (80, 100)
WORDS_PER_SENTENCE = (8, 20)
CHUNKS_PER_DOCUMENT = 10
_WORD = re.compile(r"[a-z]{2,}")

Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """Words by decreasing frequency and their sampling probabilities."""

    words: list[str]
    probabilities: npt.NDArray[np.float64]

    @property
    def fingerprint(self) -> str:
        """A short hash of the words and counts (part of the corpus fingerprint)."""
        digest = hashlib.sha256("\n".join(self.words).encode())
        digest.update(np.round(self.probabilities, 12).tobytes())
        return digest.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Corpus:
    """``size`` chunk texts with their vectors, grouped into documents of ``CHUNKS_PER_DOCUMENT`` chunks."""

    texts: list[str]
    vectors: Matrix
    fingerprint: str

    @property
    def size(self) -> int:
        """Number of chunks."""
        return len(self.texts)


@dataclass(frozen=True, slots=True)
class QuerySet:
    """Query texts, their vectors and the chunk each was drawn from (index into the corpus)."""

    texts: list[str]
    vectors: Matrix
    source_chunks: list[int]


def load_vocabulary(corpus_jsonl: Path, *, vocab_size: int = 30_000) -> Vocabulary:
    """The ``vocab_size`` most frequent words of a BEIR ``corpus.jsonl`` (title and text), with frequencies."""
    counts: Counter[str] = Counter()
    with corpus_jsonl.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            counts.update(_WORD.findall(f"{record.get('title', '')} {record.get('text', '')}".lower()))
    common = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:vocab_size]
    frequencies = np.asarray([count for _, count in common], dtype=np.float64)
    return Vocabulary(words=[word for word, _ in common], probabilities=frequencies / frequencies.sum())


def _unit(rows: npt.NDArray[Any]) -> Matrix:
    normed: Matrix = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return normed


def _sentences(words: list[str], rng: np.random.Generator) -> str:
    out: list[str] = []
    i = 0
    while i < len(words):
        n = int(rng.integers(WORDS_PER_SENTENCE[0], WORDS_PER_SENTENCE[1] + 1))
        sentence = words[i : i + n]
        out.append(" ".join([sentence[0].capitalize(), *sentence[1:]]) + ".")
        i += n
    return " ".join(out)


def make_corpus(vocabulary: Vocabulary, *, size: int, seed: int = 42, clusters: int = 200) -> Corpus:
    """``size`` chunks of 80-100 Zipf-distributed words, with clustered unit vectors."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(WORDS_PER_CHUNK[0], WORDS_PER_CHUNK[1] + 1, size=size)
    draws = rng.choice(len(vocabulary.words), size=int(lengths.sum()), p=vocabulary.probabilities)
    words = vocabulary.words
    texts: list[str] = []
    start = 0
    for length in lengths.tolist():
        texts.append(_sentences([words[j] for j in draws[start : start + length]], rng))
        start += length

    shared = rng.standard_normal(DIM)
    shared /= np.linalg.norm(shared)
    centroids = _unit(rng.standard_normal((clusters, DIM)) / np.sqrt(DIM) + 0.35 * shared)
    # Zipf-like cluster sizes: some topics are much larger than others
    weights = 1.0 / np.arange(1, clusters + 1) ** 0.7
    assignment = rng.choice(clusters, size=size, p=weights / weights.sum())
    noise = rng.standard_normal((size, DIM)) * (0.9 / np.sqrt(DIM))
    vectors = _unit(centroids[assignment] + noise)

    fingerprint = hashlib.sha256(
        f"v1:{size}:{seed}:{clusters}:{vocabulary.fingerprint}:{WORDS_PER_CHUNK}:{CHUNKS_PER_DOCUMENT}".encode()
    ).hexdigest()[:16]
    return Corpus(texts=texts, vectors=vectors, fingerprint=fingerprint)


def _query_words(text: str, rng: np.random.Generator, count: int) -> list[str]:
    words = list(dict.fromkeys(_WORD.findall(text.lower())))
    picked = sorted(rng.choice(len(words), size=min(count, len(words)), replace=False).tolist())
    return [words[i] for i in picked]


def make_queries(corpus: Corpus, *, count: int, seed: int = 7, words: tuple[int, int] = (3, 6)) -> QuerySet:
    """``count`` distinct queries: 3-6 words of a random chunk, and a vector close to that chunk's."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    sources: list[int] = []
    seen: set[str] = set()
    while len(texts) < count:
        chunk = int(rng.integers(corpus.size))
        text = " ".join(_query_words(corpus.texts[chunk], rng, int(rng.integers(words[0], words[1] + 1))))
        if text and text not in seen:
            seen.add(text)
            texts.append(text)
            sources.append(chunk)
    noise = rng.standard_normal((count, DIM)) * (0.5 / np.sqrt(DIM))
    vectors = _unit(corpus.vectors[sources] + noise)
    return QuerySet(texts=texts, vectors=vectors, source_chunks=sources)


def make_frequent_queries(
    frequent_words: list[str], corpus: Corpus, *, count: int, seed: int = 11, words: tuple[int, int] = (3, 5)
) -> QuerySet:
    """``count`` distinct queries made only of the given (most frequent) words; vectors as ``make_queries``."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    seen: set[str] = set()
    attempts = 0
    while len(texts) < count:
        n = int(rng.integers(words[0], words[1] + 1))
        picked = rng.choice(len(frequent_words), size=min(n, len(frequent_words)), replace=False)
        text = " ".join(frequent_words[i] for i in sorted(picked.tolist()))
        attempts += 1
        if text not in seen or attempts > 50 * count:  # few words: allow repeats rather than loop forever
            seen.add(text)
            texts.append(text)
    sources = rng.integers(corpus.size, size=count).tolist()
    noise = rng.standard_normal((count, DIM)) * (0.5 / np.sqrt(DIM))
    return QuerySet(texts=texts, vectors=_unit(corpus.vectors[sources] + noise), source_chunks=sources)


def documents(corpus: Corpus) -> list[tuple[int, list[int]]]:
    """``(document index, chunk indices)`` for every document of the corpus."""
    return [
        (d, list(range(start, min(start + CHUNKS_PER_DOCUMENT, corpus.size))))
        for d, start in enumerate(range(0, corpus.size, CHUNKS_PER_DOCUMENT))
    ]


def simple_tokens(text: str, stop_words: frozenset[str]) -> list[str]:
    """The tokeniser shared by both BM25 baselines: lower-case words of 2+ letters, stop words removed."""
    return [w for w in _WORD.findall(text.lower()) if w not in stop_words]
