#!/usr/bin/env python
"""The calibrated relevance on small collections: does a question its collection answers pass the floors, and one
from another set not? (session 39; ``retrieve/relevance.py``'s ``FULL_BACKGROUND_CHUNKS``)

A small collection is a question's own judged documents plus ``--extra`` random others of its set, built from the
chunk vectors the eval collections already hold (``rag eval`` indexes them). Each sub-collection is asked its
question (in-domain) and one random question of another set (out-of-domain); and the question is also asked of as
many documents of its own set without its judged ones (a near miss: the same kind of documents, not the answer,
though an unjudged document may still answer it). In a collection this small every
chunk is a candidate and the first result's relevance is the largest calibrated value of its chunks (``finalize``
keeps the running maximum), so this is computed from the vectors alone: the relevance of each chunk is the
bundled model's ``Calibration`` against the sub-collection's own background, weighed in full from ``N`` chunks
(``--full-chunks``: 1 is the rule before session 39, the weight at any size; ``inf`` no background at all).
The lexical pass of a first result just under a floor (``db.coverage``) is left out.

    RAG_DATA_DIR=/work/evaldata scripts/eval_small_collections.py --extra 0,2,10 --full-chunks 1,10,30,100,inf
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from rag_service.db.vector_type import vector_from_send
from rag_service.evaluation.docset import is_docset
from rag_service.retrieve import relevance
from rag_service.service import UniversalRAGService, build_service

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SETS = {"scifact": "beir-scifact", "ray-docs-qa": "docs-ray-docs-qa", "anthropic-docs-qa": "docs-anthropic-docs-qa"}
FLOORS = (0.2, 0.43)  # the stock chatbot and agent presets' min_relevance

_CHUNKS = text(
    "SELECT d.source, vector_send(c.embedding) FROM document_chunks c JOIN documents d ON d.id = c.document_id "
    "WHERE c.collection = :collection"
)


def chunks_by_document(service: UniversalRAGService, collection: str) -> tuple[np.ndarray[Any, Any], dict[str, list[int]]]:
    """The collection's unit chunk vectors, and each document's (by file name) row numbers."""
    with service.db.transaction() as session:
        rows = session.execute(_CHUNKS, {"collection": collection}).all()
    vectors = np.stack([vector_from_send(blob) for _, blob in rows]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    documents: dict[str, list[int]] = defaultdict(list)
    for i, (source, _) in enumerate(rows):
        documents[Path(source).name].append(i)
    return vectors, documents


def judged_questions(root: Path, documents: dict[str, list[int]]) -> tuple[list[str], dict[str, set[str]]]:
    """A set's test questions (texts) whose judged documents are all in the collection, and those documents."""
    judged: dict[str, set[str]] = defaultdict(set)
    for line in (root / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, corpus_id, score = line.split("\t")
        if int(score) > 0:
            judged[qid].add(corpus_id.split("#")[0] if is_docset(root) else corpus_id)
    texts = {row["_id"]: row["text"] for row in map(json.loads, (root / "queries.jsonl").read_text().splitlines())}
    asked = [q for q in judged if q in texts and judged[q] <= documents.keys()]
    return [texts[q] for q in asked], {texts[q]: judged[q] for q in asked}


def _unit(vector: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(vector / np.linalg.norm(vector), dtype=np.float32)


def first_relevance(chunks: np.ndarray[Any, Any], query: np.ndarray[Any, Any], full_chunks: float, model_id: str) -> float:
    """The first result's relevance: the best chunk's calibrated value against the collection's background, as
    the product computes it (``CollectionReference``) with its ``FULL_BACKGROUND_CHUNKS`` set to ``full_chunks``."""
    setattr(relevance, "FULL_BACKGROUND_CHUNKS", full_chunks)  # noqa: B010 (the rule measured: a product constant)
    background = relevance.CollectionReference(chunks.mean(axis=0), len(chunks)).background(query)
    curve = relevance.CALIBRATIONS[model_id]
    return max(curve.relevance(float(c), background) for c in chunks @ query)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extra", default="0,2,10", help="other documents added to each question's own")
    parser.add_argument("--full-chunks", default="1,10,30,100,inf", help="chunks from which the background counts")
    parser.add_argument("--questions", type=int, default=150, help="questions per set and size (sampled)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    service = build_service()
    embedder = service.embedder()
    rnd = random.Random(args.seed)
    data = {name: chunks_by_document(service, collection) for name, collection in SETS.items()}
    asked = {name: judged_questions(DATASETS / name, data[name][1]) for name in SETS}
    query_vectors = {name: {q: _unit(embedder.embed_query(q)) for q in texts} for name, (texts, _) in asked.items()}
    variants = [float(v) for v in args.full_chunks.split(",")]
    print("| set, extra documents (median chunks) | background in full from | in-domain pass@0.2 / @0.43 "
          "| near miss pass@0.2 / @0.43 | out-of-domain pass@0.2 / @0.43 |")
    print("|---|---:|---|---|---|")
    for extra in (int(e) for e in args.extra.split(",")):
        for name in SETS:
            vectors, documents = data[name]
            texts, judged = asked[name]
            others = [o for o in SETS if o != name]
            firsts: dict[float, tuple[list[float], list[float], list[float]]] = {v: ([], [], []) for v in variants}
            sizes = []
            for question in rnd.sample(texts, min(args.questions, len(texts))):
                pool = [d for d in documents if d not in judged[question]]
                unjudged = rnd.sample(pool, min(extra + len(judged[question]), len(pool)))
                rows = np.array([i for d in sorted(judged[question]) + unjudged[:extra] for i in documents[d]])
                near = np.array([i for d in unjudged for i in documents[d]])
                sizes.append(len(rows))
                other = rnd.choice(others)
                stranger = query_vectors[other][rnd.choice(asked[other][0])]
                own = query_vectors[name][question]
                asked_of = ((vectors[rows], own), (vectors[near], own), (vectors[rows], stranger))
                for v in variants:
                    for kept, (chunks, query) in zip(firsts[v], asked_of, strict=True):
                        kept.append(first_relevance(chunks, query, v, embedder.model_id))
            for v in variants:
                label = "never (no background)" if v == float("inf") else f"{v:g}" + (" (before)" if v == 1 else "")
                cells = [" / ".join(f"{np.mean(np.array(x) >= f):.2f}" for f in FLOORS) for x in firsts[v]]
                print(f"| {name}, {extra} ({int(np.median(sizes))}) | {label} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
