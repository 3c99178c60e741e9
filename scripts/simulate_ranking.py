"""Try ranking ideas on every visible set in seconds: an offline replica of the ranking of `retrieve()`.

`dump` reads each eval collection of a data folder (chunks, vectors, postings, the positions of the questions'
lexemes in each chunk, statistics) and each question's vector and lexemes into `OUT/<set>.pkl`; `run` ranks every question under named variants and
prints nDCG@10 per set. The replica: exact vector arm (the sets are small), exact BM25 (k1 1.2, b 0.75),
linear fusion of min-max normalised arms over `candidate_k` each (40 with parents, 300 for SciFact as
`rag eval` asks), identical texts once, sections by noisy-OR of their children (docs sets; SciFact ranks
documents by their best chunk). It reproduces `rag eval`: SciFact 0.7255 (equal), ray-docs-qa 0.3981
(0.3987), anthropic-docs-qa 0.7715 (0.7693): the rest is the posting budget and HNSW.

Why not the service itself: a variant here is a few lines and the whole grid runs in ~10 s; what wins
still has to be built and measured with `scripts/eval_sets.sh`.

    RAG_DATA_DIR=/work/evaldata .venv/bin/python scripts/simulate_ranking.py dump bench_out/sim
    .venv/bin/python scripts/simulate_ranking.py run bench_out/sim

`dump --model PATH` screens another embedding model (a local sentence-transformers folder, any dimension): every
chunk's embedded text (its title and header path first, as the product embeds it) and every question are embedded
again by that model on torch, so the replica ranks with its vectors and the same chunks, postings and questions.
On 2 cores a 110M-parameter model takes ~2.5 hours for the three sets' 31k chunks (progress on stderr).

`dump --late-chunking [--window N]` screens late chunking (Guenther et al., 2024) with the model of `--model` (the
bundled one by default): each chunk's vector pools the final token embeddings of its own tokens, the model run over
its context (its parent section, or its document when it has none) after its embedded text's prefix; a context
longer than the window is cut to one centred on the chunk, the prefix kept. `vectors` pools the [CLS] token, the
prefix and the chunk; `--vectors child` in `run` the chunk's tokens alone; `stored+late` / `stored+child` average
each with the stored vector. `dump --sets a,b` dumps only those sets; `run` ranks the sets its folder holds.

    RAG_DATA_DIR=/work/evaldata .venv/bin/python scripts/simulate_ranking.py dump bench_out/late --late-chunking
    .venv/bin/python scripts/simulate_ranking.py run bench_out/late --vectors child
"""

from __future__ import annotations

import argparse
import math
import pickle
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rag_service.evaluation.beir import read_judged_queries
from rag_service.evaluation.docset import SectionIndex, load_docset
from rag_service.evaluation.metrics import evaluate_run
from rag_service.ingest.loaders import load_document

SETS = {"scifact": "beir-scifact", "ray-docs-qa": "docs-ray-docs-qa", "anthropic-docs-qa": "docs-anthropic-docs-qa"}
DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
K1, B = 1.2, 0.75
_CHUNKS = (
    "SELECT c.id, c.document_id, d.source, c.start_char, coalesce(c.parent_start, -1), c.lexeme_count, "
    "vector_send(c.embedding), md5(c.content), md5(coalesce(c.parent_content, c.content)), d.title, c.header_path, "
    "c.content, c.end_char, coalesce(c.parent_end, -1) FROM document_chunks c "
    "JOIN documents d ON d.collection = c.collection AND d.id = c.document_id WHERE c.collection = :c ORDER BY c.id"
)

_DOCUMENTS = "SELECT id, content FROM documents WHERE collection = :c"


def dump(out: Path, model: str | None = None, *, late: int = 0, sets: list[str] | None = None) -> None:
    """Write `<set>.pkl` for every visible set indexed in `RAG_DATA_DIR` (as `scripts/eval_sets.sh` leaves it);
    with ``model``, the chunks' and questions' vectors are that model's instead of the stored ones; with ``late``
    (a window in tokens), the chunks' are that model's late-chunked ones (`_late_vectors`)."""
    from sqlalchemy import text

    from rag_service.db.chunk_text import embedded_text
    from rag_service.db.vector_type import vector_from_send
    from rag_service.embed import SentenceTransformerEmbedder, bundled_model_path
    from rag_service.retrieve.query import bm25_text, parse_query
    from rag_service.service import get_universal_rag

    service = get_universal_rag()
    model = model or (str(bundled_model_path()) if late else None)
    embedder = SentenceTransformerEmbedder(model) if model else service.embedder()
    out.mkdir(parents=True, exist_ok=True)
    for name, collection in SETS.items():
        if sets and name not in sets:
            continue
        started = time.monotonic()
        queries, qrels = read_judged_queries(DATASETS / name, "test")
        with service.db.transaction() as session:
            rows = session.execute(text(_CHUNKS), {"c": collection}).all()
            postings = session.execute(
                text("SELECT chunk_id, lexeme, tf FROM chunk_terms WHERE collection = :c"), {"c": collection}
            ).all()
            lexemes = {
                qid: session.execute(
                    text("SELECT tsvector_to_array(to_tsvector('english', :t))"), {"t": bm25_text(parse_query(q))}
                ).scalar()
                or []
                for qid, q in queries.items()
            }
            vectors = session.execute(
                text("SELECT id, content_tsv::text FROM document_chunks WHERE collection = :c"), {"c": collection}
            ).all()
            documents = dict(session.execute(text(_DOCUMENTS), {"c": collection}).all()) if late else {}
        wanted = {lexeme for found in lexemes.values() for lexeme in found}
        stored = np.stack([vector_from_send(r[6]) for r in rows]).astype(np.float32)
        other: dict[str, np.ndarray[Any, Any]] = {}
        if late:
            pooled = _late_vectors(embedder._model, rows, documents, late, name)
            vectors_of_chunks, other["child"] = pooled["prefix"], pooled["child"]
            unit = stored / np.linalg.norm(stored, axis=1, keepdims=True)
            other["stored+late"], other["stored+child"] = unit + pooled["prefix"], unit + pooled["child"]
        elif model:
            vectors_of_chunks = _embed_again(
                embedder, [embedded_text(r[9] or "", r[10] or "", r[11]) for r in rows], name
            )
        else:
            vectors_of_chunks = stored
        data = {
            "rows": [(r[0], r[1], r[2], r[3], r[4], r[5], r[7], r[8]) for r in rows],
            "vectors": vectors_of_chunks,
            "postings": postings,
            "qrels": qrels,
            "lexemes": lexemes,
            "query_vectors": {qid: embedder.embed_query(q) for qid, q in queries.items()},
            "positions": {int(i): _positions(tsv or "", wanted) for i, tsv in vectors},
            "other_vectors": other,
        }
        (out / f"{name}.pkl").write_bytes(pickle.dumps(data))
        seconds = time.monotonic() - started
        print(f"{name}: {len(rows)} chunks, {len(postings)} postings, {len(queries)} questions, {seconds:.0f} s")


def _embed_again(embedder: Any, texts: list[str], name: str) -> np.ndarray[Any, Any]:
    """``texts`` embedded in batches of 256, with a progress line per batch (a large model takes hours here)."""
    started, parts = time.monotonic(), []
    for at in range(0, len(texts), 256):
        parts.append(embedder.embed_documents(texts[at : at + 256]))
        done = min(at + 256, len(texts))
        rate = done / (time.monotonic() - started)
        print(f"{name}: {done}/{len(texts)} chunks, {rate:.1f}/s", file=sys.stderr, flush=True)
    return np.vstack(parts).astype(np.float32)


def _late_vectors(
    model: Any, rows: list[Any], documents: dict[int, str], window: int, name: str
) -> dict[str, np.ndarray[Any, Any]]:
    """Every chunk's late-chunked unit vectors: ``prefix`` pools [CLS], its prefix's and its own tokens' final
    embeddings, ``child`` its own tokens'; the model runs over the prefix and the chunk's context, at most
    ``window`` tokens with [CLS] and [SEP], a longer context cut to a window centred on the chunk (a context
    that fits is one sequence for all its chunks)."""
    import torch

    from rag_service.db.chunk_text import search_prefix

    tokenizer, budget = model.tokenizer, window - 2
    sequences: dict[tuple[int, ...], int] = {}
    requests: list[tuple[int, list[int], list[int]]] = []  # (sequence, prefix positions, chunk positions)
    groups: dict[tuple[int, int, int, str], list[int]] = defaultdict(list)
    for k, r in enumerate(rows):
        document = documents[r[1]]
        start, end = (r[4], r[13]) if r[4] >= 0 else (0, len(document))
        groups[(r[1], start, end, search_prefix(r[9] or "", r[10]) if r[10] else "")].append(k)
    for (document_id, start, end, prefix), members in groups.items():
        shift = len(prefix) + 1 if prefix else 0
        encoded = tokenizer(
            f"{prefix}\n{documents[document_id][start:end]}" if prefix else documents[document_id][start:end],
            add_special_tokens=False,
            return_offsets_mapping=True,
        )
        ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
        held = sum(1 for a, _ in offsets if a < shift)  # the prefix's tokens
        for k in members:
            lo, hi = shift + rows[k][3] - start, shift + rows[k][12] - start
            own = [t for t, (a, b) in enumerate(offsets) if b > lo and a < hi and t >= held] or [len(ids) - 1]
            first, last = own[0], own[-1] + 1
            if len(ids) <= budget:
                cut, kept, at = ids, held, held
            else:  # the prefix (at most half the window) and the context's tokens centred on the chunk
                kept = min(held, budget // 2)
                room = budget - kept
                last = min(last, first + room)
                at = min(max(first - (room - (last - first)) // 2, held), len(ids) - room)
                cut = ids[:kept] + ids[at : at + room]
            sequence = sequences.setdefault(tuple(cut), len(sequences))  # token t sits at 1 + kept + t - at
            requests.append((sequence, [0, *range(1, 1 + kept)], [1 + kept + t - at for t in range(first, last)]))
    order = sorted(sequences, key=len)
    out = {"prefix": np.zeros((len(rows), model.get_embedding_dimension()), np.float32)}
    out["child"] = out["prefix"].copy()
    by_sequence: dict[int, list[int]] = defaultdict(list)
    for k, (sequence, _, _) in enumerate(requests):
        by_sequence[sequence].append(k)
    transformer, started, done, size = model[0].auto_model.eval(), time.monotonic(), 0, 8192 // window
    for at in range(0, len(order), size):
        batch = [[tokenizer.cls_token_id, *ids, tokenizer.sep_token_id] for ids in order[at : at + size]]
        width = max(len(ids) for ids in batch)
        input_ids = torch.tensor([ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids in batch])
        mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in batch])
        with torch.inference_mode():
            states = transformer(input_ids=input_ids, attention_mask=mask, token_type_ids=torch.zeros_like(mask))
        for ids, state in zip(order[at : at + size], states.last_hidden_state.numpy(), strict=True):
            for k in by_sequence[sequences[ids]]:
                _, prefix_positions, chunk = requests[k]
                out["prefix"][k] = state[prefix_positions + chunk].mean(axis=0)
                out["child"][k] = state[chunk].mean(axis=0)
        done += len(batch)
        if done % (size * 50) < size or done == len(order):
            rate = done / (time.monotonic() - started)
            print(f"{name}: {done}/{len(order)} sequences, {rate:.1f}/s", file=sys.stderr, flush=True)
    return {key: v / np.linalg.norm(v, axis=1, keepdims=True) for key, v in out.items()}


def _positions(tsvector: str, wanted: set[str]) -> dict[str, list[int]]:
    """The positions of each ``wanted`` lexeme in a tsvector's text form (``'word':3,7B``)."""
    out = {}
    for match in re.finditer(r"'((?:[^']|'')*)':([0-9A-D,]+)", tsvector):
        lexeme = match.group(1).replace("''", "'")
        if lexeme in wanted:
            out[lexeme] = [int(p.rstrip("ABCD")) for p in match.group(2).split(",")]
    return out


class Replica:
    """One set's chunks, postings and questions, with the pipeline's arms computed exactly."""

    def __init__(self, name: str, data: dict[str, Any], vectors: str = "vectors") -> None:
        self.name, self.docs = name, name != "scifact"
        rows = data["rows"]
        self.n = len(rows)
        self.ids = np.array([r[0] for r in rows])
        self.source = [r[2] for r in rows]
        self.start = [r[3] for r in rows]
        self.length = np.array([r[5] for r in rows], dtype=float)
        self.text_hash, self.parent_hash = [r[6] for r in rows], [r[7] for r in rows]
        vectors = data["vectors"] if vectors == "vectors" else data["other_vectors"][vectors]
        self.unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        self.qrels, self.lexemes, self.query_vectors = data["qrels"], data["lexemes"], data["query_vectors"]
        self.positions: dict[int, dict[str, list[int]]] = data.get("positions", {})
        # a chunk's context: its section (parent), or its whole document when it has none
        contexts: dict[tuple[int, int], int] = {}
        self.context = np.array([contexts.setdefault((r[1], r[4]), len(contexts)) for r in rows])
        self.contexts = len(contexts)
        self.context_length = np.bincount(self.context, weights=self.length, minlength=self.contexts)
        position = {int(i): k for k, i in enumerate(self.ids)}
        lists: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
        for chunk_id, lexeme, tf in data["postings"]:
            lists[lexeme][0].append(position[chunk_id])
            lists[lexeme][1].append(tf)
        self.lists = {k: (np.array(a), np.array(b, dtype=float)) for k, (a, b) in lists.items()}
        self.section = self._sections() if self.docs else self.source
        sums = np.zeros((self.contexts, self.unit.shape[1]))
        np.add.at(sums, self.context, self.unit)
        self.context_unit = sums / np.linalg.norm(sums, axis=1, keepdims=True)  # each context's mean direction

    def _sections(self) -> list[str]:
        docset = load_docset(DATASETS / self.name)
        index = {n: SectionIndex(load_document(p, max_bytes=10**9).text) for n, p in docset.files.items()}
        names = sorted(index, key=len, reverse=True)
        out = []
        for source, start in zip(self.source, self.start, strict=True):
            name = next(n for n in names if source == n or source.endswith("/" + n))
            out.append(f"{name}#{index[name].section_at(start)}")
        return out

    def bm25(self, qid: str, by_context: bool = False) -> np.ndarray[Any, Any]:
        """Every chunk's (or context's) BM25; a context's tf and length sum its chunks', idf is the chunks'."""
        size = self.contexts if by_context else self.n
        lengths = self.context_length if by_context else self.length
        average = float(lengths.mean())
        scores = np.zeros(size)
        for lexeme in self.lexemes[qid]:
            if lexeme not in self.lists:
                continue
            where, tf = self.lists[lexeme]
            weight = math.log(1 + (self.n - len(where) + 0.5) / (len(where) + 0.5)) * (K1 + 1)
            if by_context:
                where, inverse = np.unique(self.context[where], return_inverse=True)
                tf = np.bincount(inverse, weights=tf)
            scores[where] += weight * tf / (tf + K1 * (1 - B) + K1 * B * lengths[where] / average)
        return scores

    def proximity(self, qid: str, i: int, power: float) -> float:
        """Term proximity of chunk ``i`` (BM25TP-like): over each pair of the question's lexemes it holds,
        ``idf_a * idf_b / distance ** power`` with the pair's nearest occurrences ``distance`` words apart."""
        held = self.positions.get(int(self.ids[i]), {})
        found = [lexeme for lexeme in dict.fromkeys(self.lexemes[qid]) if lexeme in held]
        idf = {x: math.log(1 + (self.n - len(self.lists[x][0]) + 0.5) / (len(self.lists[x][0]) + 0.5)) for x in found}
        total = 0.0
        for a, first in enumerate(found):
            at = np.array(held[first])
            for second in found[a + 1 :]:
                distance = int(np.abs(at[:, None] - np.array(held[second])[None, :]).min())
                total += idf[first] * idf[second] / max(distance, 1) ** power
        return total

    def cosine(self, qid: str) -> np.ndarray[Any, Any]:
        query = self.query_vectors[qid]
        return np.asarray(self.unit @ (query / np.linalg.norm(query)))


def _minmax(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    lo, hi = x.min(), x.max()
    return np.ones_like(x) if hi == lo else (x - lo) / (hi - lo)


def fused(s: Replica, qid: str, *, vector_weight: float) -> list[tuple[int, float]]:
    """The hybrid statement's rows: linear fusion of the arms' min-max scores, identical texts once."""
    depth = 40 if s.docs else 300
    cosine, bm25 = s.cosine(qid), s.bm25(qid)
    arms = [(np.argsort(-cosine, kind="stable")[:depth], cosine, vector_weight)]
    top = np.argsort(-bm25, kind="stable")[:depth]
    arms.append((top[bm25[top] > 0], bm25, 1 - vector_weight))
    score: dict[int, float] = defaultdict(float)
    best: dict[int, int] = {}
    for ids, values, weight in arms:
        for rank, (i, norm) in enumerate(
            zip(ids.tolist(), _minmax(values[ids]).tolist() if len(ids) else [], strict=True)
        ):
            score[i] += weight * norm
            best[i] = min(best.get(i, rank + 1), rank + 1)
    order = sorted(score, key=lambda i: (-score[i], best[i], s.ids[i]))[:depth]
    return [(i, score[i]) for i in _first_of_each(order, s.text_hash)]


def _first_of_each(order: list[int], key: list[str]) -> list[int]:
    """`order` without the entries whose key an earlier entry had (the pipeline's de-duplication)."""
    seen: set[str] = set()
    kept = []
    for i in order:
        if key[i] not in seen:
            seen.add(key[i])
            kept.append(i)
    return kept


Variant = Callable[[Replica, str], list[int]]


def variant(
    *,
    vector_weight: float = 0.6,
    context_weight: float = 0.0,
    proximity_weight: float = 0.0,
    power: float = 1.0,
    similarity_weight: float = 0.0,
) -> Variant:
    """Sections (docs) or documents (SciFact) in rank order; `context_weight` adds the min-max BM25 of each
    one's context (its section, or its document) over the candidates, after the noisy-OR; `proximity_weight`
    the min-max of each one's best candidate chunk's term proximity (`Replica.proximity`); `similarity_weight`
    the min-max of the question's cosine with each one's context's mean vector (`db.context_vector`)."""

    def rank(s: Replica, qid: str) -> list[int]:
        rows = fused(s, qid, vector_weight=vector_weight)
        miss: dict[int, float] = {}
        first: dict[int, int] = {}
        near: dict[int, float] = defaultdict(float)
        for i, score in rows:
            unit = int(s.context[i]) if s.docs else i  # SciFact: documents by their best chunk, no noisy-OR
            first.setdefault(unit, i)
            miss[unit] = miss.get(unit, 1.0) * (1 - score) if s.docs else 1 - score
            if proximity_weight:
                near[unit] = max(near[unit], s.proximity(qid, i, power))
        units = list(first)
        total = np.array([1 - miss[u] for u in units])
        if context_weight:
            total = total + context_weight * _minmax(s.bm25(qid, by_context=True)[s.context[[first[u] for u in units]]])
        if proximity_weight:
            total = total + proximity_weight * _minmax(np.array([near[u] for u in units]))
        if similarity_weight:
            query = s.query_vectors[qid] / np.linalg.norm(s.query_vectors[qid])
            similarity = s.context_unit[s.context[[first[u] for u in units]]] @ query
            total = total + similarity_weight * _minmax(similarity)
        return _first_of_each([first[units[j]] for j in np.argsort(-total, kind="stable")], s.parent_hash)

    return rank


def ndcg(s: Replica, rank: Variant) -> float:
    run: dict[str, dict[str, float]] = {}
    for qid in s.qrels:
        units: dict[str, float] = {}
        for i in rank(s, qid):
            units.setdefault(s.section[i], 1.0 / (len(units) + 1))
            if len(units) == 100:
                break
        run[qid] = units
    return evaluate_run(run, s.qrels, measures=("ndcg@10",))["ndcg@10"]


VARIANTS: dict[str, Variant] = {
    "today (linear 0.6/0.4, noisy-OR sections)": variant(),
    "vector arm alone (linear 1.0/0.0)": variant(vector_weight=1.0),
    "linear 0.5/0.5": variant(vector_weight=0.5),
    "context BM25 0.4": variant(context_weight=0.4),
    "context BM25 0.6": variant(context_weight=0.6),
    "context BM25 0.8": variant(context_weight=0.8),
    "linear 0.5/0.5 + context BM25 0.6": variant(vector_weight=0.5, context_weight=0.6),
    "context BM25 0.6 + proximity 0.05": variant(context_weight=0.6, proximity_weight=0.05),
    "context BM25 0.6 + proximity 0.1": variant(context_weight=0.6, proximity_weight=0.1),
    "context BM25 0.6 + proximity 0.15": variant(context_weight=0.6, proximity_weight=0.15),
    "context BM25 0.6 + proximity 0.1, 1/distance^2": variant(context_weight=0.6, proximity_weight=0.1, power=2),
    "context BM25 0.6 + proximity 0.15 + context similarity 0.1": variant(
        context_weight=0.6, proximity_weight=0.15, similarity_weight=0.1
    ),
}


def run(folder: Path, vectors: str = "vectors") -> None:
    replicas = [
        Replica(n, pickle.loads((folder / f"{n}.pkl").read_bytes()), vectors)
        for n in SETS
        if (folder / f"{n}.pkl").exists()
    ]
    print("| variant | " + " | ".join(r.name for r in replicas) + " | mean |\n|---|" + "---:|" * (len(replicas) + 1))
    for label, rank in VARIANTS.items():
        values = [ndcg(r, rank) for r in replicas]
        print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in values) + f" | {sum(values) / len(values):.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("dump", "run"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--model", help="dump: embed chunks and questions again with this sentence-transformers folder")
    parser.add_argument("--late-chunking", action="store_true", help="dump: late-chunked chunk vectors")
    parser.add_argument("--window", type=int, default=256, help="dump: late chunking's window in tokens")
    parser.add_argument("--sets", help="dump: only these sets, comma-separated")
    parser.add_argument("--vectors", default="vectors", help="run: another vector set of the dump (child, stored+late)")
    args = parser.parse_args()
    if args.command == "dump":
        sets = args.sets.split(",") if args.sets else None
        dump(args.folder, args.model, late=args.window if args.late_chunking else 0, sets=sets)
    else:
        run(args.folder, args.vectors)


if __name__ == "__main__":
    main()
