"""A large corpus with the term statistics of real text, assembled from the sentences of the visible datasets.

The synthetic corpus of ``bench_lib.corpus`` draws words independently, so no word is much more
frequent in one chunk than in the rest, and a query's best chunks hold several of its words once.
Real text is not like that: a few words are everywhere, most are rare, and a chunk about a topic
repeats that topic's words. This corpus keeps that: each chunk is 3-7 prose sentences of ONE source
document (a SciFact abstract, a Ray or Anthropic documentation page), drawn at random without
replacement and joined, so its vocabulary, its word frequencies and its topic are those of real
writing; a million chunks reuse each of the ~60k sentences about 60 times, in other combinations.
Queries are the real questions of the three datasets.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bench_lib.corpus import Corpus, Vocabulary, make_corpus

#: sentence ends: ., ! or ? followed by white space and an upper-case letter or a digit
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
_FENCE = re.compile(r"^\s*(```|~~~)")
_MARKUP = re.compile(r"^\s*(#|\||<|:::|\{|\}|- |\* |\d+\. |>|\.\. )")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
MIN_SENTENCE_CHARS = 30
SENTENCES_PER_CHUNK = (3, 7)


def _prose_paragraphs(markdown: str) -> Iterator[str]:
    """Paragraphs of plain prose: no code fences, headings, tables, lists, HTML or directives."""
    in_fence = False
    paragraph: list[str] = []
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line.strip() or _MARKUP.match(line):
            if paragraph:
                yield " ".join(paragraph)
                paragraph = []
            continue
        paragraph.append(line.strip())
    if paragraph:
        yield " ".join(paragraph)


def _sentences(text: str) -> list[str]:
    text = _LINK.sub(r"\1", text).replace("`", "")
    return [s.strip() for s in _SENTENCE_END.split(text) if len(s.strip()) >= MIN_SENTENCE_CHARS]


def source_sentences(datasets: Path) -> list[list[str]]:
    """Per source document of every dataset under ``datasets``, its prose sentences (documents with at least 3)."""
    sources: list[list[str]] = []
    for corpus in sorted(datasets.glob("*/corpus.jsonl")):
        with corpus.open() as lines:
            for line in lines:
                record = json.loads(line)
                title = str(record.get("title", "")).rstrip(".")
                sources.append(_sentences(f"{title}. {record.get('text', '')}"))
    for page in sorted(datasets.glob("*/docs/**/*.md")):
        sentences = [s for p in _prose_paragraphs(page.read_text(errors="replace")) for s in _sentences(p)]
        sources.append(sentences)
    return [s for s in sources if len(s) >= SENTENCES_PER_CHUNK[0]]


def chunk_sentences(sources: list[list[str]], *, size: int, seed: int) -> list[tuple[int, list[int]]]:
    """``size`` chunks as (source, sentence indexes): 3-7 sentences of one source drawn without replacement
    (all of a source's when it has fewer), in their order there; sources picked in proportion to their
    number of sentences."""
    rng = np.random.default_rng(seed)
    weights = np.array([len(s) for s in sources], dtype=np.float64)
    picks = rng.choice(len(sources), size=size, p=weights / weights.sum())
    lengths = rng.integers(SENTENCES_PER_CHUNK[0], SENTENCES_PER_CHUNK[1] + 1, size=size)
    chunks: list[tuple[int, list[int]]] = []
    for source, length in zip(picks.tolist(), lengths.tolist(), strict=True):
        chosen = rng.choice(len(sources[source]), size=min(length, len(sources[source])), replace=False)
        chunks.append((source, sorted(chosen.tolist())))
    return chunks


def make_chunks(sources: list[list[str]], *, size: int, seed: int) -> list[str]:
    """The text of each of ``chunk_sentences``' chunks: its sentences joined by spaces."""
    return _texts(sources, chunk_sentences(sources, size=size, seed=seed))


def _texts(sources: list[list[str]], chunks: list[tuple[int, list[int]]]) -> list[str]:
    return [" ".join(sources[s][i] for i in picked) for s, picked in chunks]


def chunk_vectors(
    sources: list[list[str]], chunks: list[tuple[int, list[int]]], sentence_vectors: np.ndarray
) -> np.ndarray:
    """Unit vectors for ``chunks``: the normalised mean of their sentences' vectors (``sentence_vectors``
    in the order of ``sources`` flattened), a stand-in for embedding a million chunks (hours here)."""
    offsets = np.cumsum([0] + [len(s) for s in sources])
    out = np.empty((len(chunks), sentence_vectors.shape[1]), dtype=np.float32)
    for row, (source, picked) in enumerate(chunks):
        out[row] = sentence_vectors[offsets[source] + np.asarray(picked)].mean(axis=0)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def real_queries(datasets: Path, *, per_set: int, seed: int) -> list[str]:
    """Up to ``per_set`` questions of each dataset under ``datasets`` (SciFact's claims, the docs sets'
    questions), drawn at random, in one shuffled list."""
    rng = np.random.default_rng(seed)
    queries: list[str] = []
    for path in sorted(datasets.glob("*/queries.jsonl")):
        with path.open() as lines:
            texts = [json.loads(line)["text"] for line in lines]
        queries.extend(texts[i] for i in rng.permutation(len(texts))[:per_set].tolist())
    return [queries[i] for i in rng.permutation(len(queries)).tolist()]


def sentence_vectors(sources: list[list[str]], cache: Path) -> np.ndarray:
    """Every sentence's vector by the default model (~10 min here for the ~65k sentences), cached in ``cache``."""
    from tqdm import tqdm

    from rag_service.config import BUNDLED_MINILM, load_settings
    from rag_service.embed import embedder_for

    flat = [s for source in sources for s in source]
    if cache.is_file():
        vectors: np.ndarray = np.load(cache)
        if vectors.shape[0] == len(flat):
            return vectors
    settings = load_settings()
    embedder = embedder_for(BUNDLED_MINILM, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models")
    vectors = np.empty((len(flat), 384), dtype=np.float32)
    for start in tqdm(range(0, len(flat), 2048), desc="embedding sentences", unit="batch"):
        vectors[start : start + 2048] = embedder.embed_documents(flat[start : start + 2048])
    np.save(cache, vectors)
    return vectors


def realistic_corpus(datasets: Path, *, size: int, seed: int, cache: Path) -> Corpus:
    """``size`` real-text chunks (``make_chunks``) with realistic vectors (``chunk_vectors``), as a ``Corpus``
    the synthetic benchmarks' loaders and timers take."""
    sources = source_sentences(datasets)
    picked = chunk_sentences(sources, size=size, seed=seed)
    texts = _texts(sources, picked)
    vectors = chunk_vectors(sources, picked, sentence_vectors(sources, cache))
    fingerprint = hashlib.sha256(f"real:{size}:{seed}:{texts[0]}:{texts[-1]}".encode()).hexdigest()[:16]
    return Corpus(texts=texts, vectors=vectors, fingerprint=fingerprint)


def benchmark_corpus(kind: str, *, size: int, datasets: Path, data_dir: Path, vocabulary: Vocabulary) -> Corpus:
    """The benchmarks' corpus of ``size`` chunks: ``synthetic`` (``bench_lib.corpus``, from ``vocabulary``) or
    ``real`` (``realistic_corpus`` of ``datasets``, sentence vectors cached in ``data_dir``)."""
    if kind == "real":
        return realistic_corpus(datasets, size=size, seed=42, cache=data_dir / "sentences.npy")
    return make_corpus(vocabulary, size=size, seed=42)
