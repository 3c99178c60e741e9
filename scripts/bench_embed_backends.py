"""The bundled MiniLM on torch (sentence-transformers) against ONNX Runtime (fp32 and int8), side by side in one run.

1. Agreement: 1,000 real chunks (SciFact documents, title + abstract, recursive 500/100, in corpus
   order), per-vector cosine of each ONNX variant to torch: mean and min.
2. The encoder alone: those chunks through ``embed_documents`` (batch 64), each backend in turn,
   ``--rounds`` times; best chunks/s of each.
3. Query embedding: 200 SciFact queries through ``embed_query``, each backend in turn per round;
   p50 / p95 over all rounds.
4. The whole ``Indexer`` against the encoder alone (``bench_lib.ingestion.measure_ingestion``, 300
   SciFact documents into a fresh database), torch, ONNX fp32, ONNX int8.

Threads: torch's own setting for batches (one for a query, as ``SentenceTransformerEmbedder`` does);
onnxruntime ``rag_service.onnx_runtime.intra_op_threads()``. The load average is recorded.

    RAG_DATA_DIR=bench_out/embed-data .venv/bin/python scripts/bench_embed_backends.py --json bench_out/embed.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the rag command sets it

import numpy as np
from bench_lib.ingestion import measure_ingestion, scifact_documents
from bench_lib.measure import load_average

from rag_service.config import load_settings
from rag_service.db.embedded import start_embedded_server
from rag_service.embed import BUNDLED_MINILM_ID, SentenceTransformerEmbedder, bundled_model_path
from rag_service.embed_onnx import OnnxEmbedder, ensure_export
from rag_service.ingest.chunkers import make_chunker
from rag_service.onnx_runtime import intra_op_threads

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def chunks(count: int) -> list[str]:
    chunker = make_chunker("recursive", chunk_size=500, chunk_overlap=100)
    out: list[str] = []
    for _, _, body in scifact_documents(SCIFACT / "corpus.jsonl", count=count):
        out.extend(c.content for c in chunker.split(body).chunks)
        if len(out) >= count:
            break
    return out[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ingest-documents", type=int, default=300)
    parser.add_argument("--ingest-rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import torch

    settings = load_settings()
    export = ensure_export(bundled_model_path(), settings.data_dir / "models" / "embed-onnx")
    backends: dict[str, Any] = {
        "torch": SentenceTransformerEmbedder(batch_size=64),
        "onnx": OnnxEmbedder(export, model_id=BUNDLED_MINILM_ID, batch_size=64),
        "onnx-int8": OnnxEmbedder(export, model_id=BUNDLED_MINILM_ID, precision="int8", batch_size=64),
    }
    texts = chunks(args.chunks)
    with (SCIFACT / "queries.jsonl").open() as lines:
        queries = [json.loads(line)["text"] for line, _ in zip(lines, range(args.queries), strict=False)]
    result: dict[str, Any] = {
        "chunks": len(texts),
        "queries": len(queries),
        "torch_threads": torch.get_num_threads(),
        "onnx_threads": intra_op_threads(),
        "load_before": load_average(),
    }

    vectors = {name: model.embed_documents(texts) for name, model in backends.items()}  # also the warm-up
    for name in ("onnx", "onnx-int8"):
        cosine = np.sum(vectors["torch"] * vectors[name], axis=1)
        result[f"cosine_{name}_vs_torch"] = {"mean": float(cosine.mean()), "min": float(cosine.min())}
        print(f"cosine {name} vs torch over {len(texts)} chunks: mean {cosine.mean():.6f}, min {cosine.min():.6f}")

    encode_s: dict[str, list[float]] = {name: [] for name in backends}
    query_ms: dict[str, list[float]] = {name: [] for name in backends}
    for _ in range(args.rounds):
        for name, model in backends.items():
            started = time.perf_counter()
            model.embed_documents(texts)
            encode_s[name].append(time.perf_counter() - started)
            for query in queries:
                started = time.perf_counter()
                model.embed_query(query)
                query_ms[name].append((time.perf_counter() - started) * 1000)
    for name in backends:
        rate = len(texts) / min(encode_s[name])
        cuts = statistics.quantiles(query_ms[name], n=20)
        result[name] = {
            "encode_s": [round(s, 2) for s in encode_s[name]],
            "chunks_per_s": round(rate, 1),
            "query_p50_ms": round(statistics.median(query_ms[name]), 2),
            "query_p95_ms": round(cuts[18], 2),
        }
        print(f"{name}: {rate:.1f} chunks/s; query p50 {result[name]['query_p50_ms']} ms, p95 {cuts[18]:.2f} ms")

    url = start_embedded_server(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)
    for name in ("torch", "onnx", "onnx-int8"):
        ingest = measure_ingestion(
            url, backends[name], SCIFACT / "corpus.jsonl", documents=args.ingest_documents, rounds=args.ingest_rounds
        )
        result[f"ingest_{name}"] = ingest
        print(
            f"ingest {name}: Indexer {ingest['ingest_chunks_per_s']} chunks/s, "
            f"encoder alone {ingest['model_chunks_per_s']} chunks/s (overhead {ingest['overhead']:.1%})"
        )
    result["load_after"] = load_average()
    print(f"load average before {result['load_before']}, after {result['load_after']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
