"""Turning the results into stable JSON, a latency plot and the generated section of docs/benchmarks.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench_lib.retrievers import SPEC_BY_KEY, SPECS

SCHEMA_VERSION = 1
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
HYBRID_P95_TARGET_MS = 20.0
RETRIEVE_P95_TARGET_MS = 60.0
ENSEMBLE_RATIO_TARGET = 5.0

TEMPLATE = f"""# Benchmarks

Speed of retrieval and ingestion, measured by `scripts/bench.py` on this repository's code, and
retrieval quality on SciFact.

## How to run

```bash
make bench                                    # installs the `bench` extra, then runs scripts/bench.py
.venv/bin/python scripts/bench.py             # 10k and 100k chunks, 200 queries each (about 30 minutes
                                              # the first time: the corpora and their indexes are built
                                              # once and reused; --rebuild builds them again)
.venv/bin/python scripts/bench.py --quick     # a small smoke run; writes bench_out/ only
.venv/bin/python scripts/bench.py --wait-idle 1.2          # wait for a quiet machine before each timed phase
.venv/bin/python scripts/bench.py --only ingestion,rerank  # re-measure some phases, keep the rest of the JSON
.venv/bin/python scripts/bench.py --report-only            # redraw the plot and this section from the JSON
```

The corpora are synthetic and need no model: chunks of 80-100 words drawn from SciFact's vocabulary
with its word frequencies (Zipfian), and 384-d unit vectors around 200 centroids. A query is a few
words of one chunk and a vector near that chunk's. Everything is loaded with `COPY` into databases of
their own (`rag_bench_<size>`) on the embedded server, indexed as the migration does (HNSW m=16,
ef_construction=128 since migration 0012; GIN on the tsvector; the BM25 postings filled by the migration's triggers) and
analysed. Our retrievers run through the package's own
code (`hybrid_search`, `UniversalRAGService.retrieve`); the baselines get the same data, the same
queries and the same precomputed vectors. All retrievers are interleaved step by step after a
warm-up, in a fresh random order at each step, so load from elsewhere slows them alike and none
always follows the same neighbour; each walks the queries in its own random order, so none finds
its query's pages freshly cached by the one before it. Raw numbers: `bench_out/bench.json`.

## Speed

{START}
(run `scripts/bench.py` to fill this section)
{END}

## Retrieval quality (SciFact)

filled by `rag eval`; see below
"""


def write_json(path: Path, results: dict[str, Any]) -> None:
    """Stable JSON: sorted keys, two-space indent, trailing newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, **results}, indent=2, sort_keys=True) + "\n")


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}x"


def _yes(met: bool | None) -> str:
    return "—" if met is None else ("**yes**" if met else "**no**")


def plot(results: dict[str, Any], path: Path) -> None:
    """p50 and p95 against corpus size for every retriever, log-log, targets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(s) for s in results["sizes"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 7.0), sharey=True)
    colours = plt.get_cmap("tab20")
    styles = {"ours": ("-", "o", 2.2), "baseline": ("--", "s", 1.4), "langchain": (":", "^", 1.6)}
    for ax, stat in zip(axes, ("p50", "p95"), strict=True):
        for n, spec in enumerate(SPECS):
            points = [
                (size, results["sizes"][str(size)]["latency"][spec.key][stat])
                for size in sizes
                if spec.key in results["sizes"][str(size)]["latency"]
            ]
            if not points:
                continue
            line, marker, width = styles[spec.family]
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                linestyle=line,
                marker=marker,
                linewidth=width,
                color=colours((2 * n) % 20 + (2 * n) // 20),
                label=spec.label,
            )
        if stat == "p95":
            ax.axhline(HYBRID_P95_TARGET_MS, color="0.5", linewidth=0.8, linestyle="-.")
            ax.axhline(RETRIEVE_P95_TARGET_MS, color="0.5", linewidth=0.8, linestyle="-.")
            for target, what in ((HYBRID_P95_TARGET_MS, "hybrid SQL"), (RETRIEVE_P95_TARGET_MS, "retrieve()")):
                ax.annotate(
                    f"{what} target {target:.0f} ms",
                    xy=(1.0, target),
                    xycoords=("axes fraction", "data"),
                    xytext=(-4, 3),
                    textcoords="offset points",
                    ha="right",
                    fontsize=8,
                    color="0.3",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
        ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.4)
        ax.minorticks_off()
        ax.set_xlabel("chunks in the corpus")
        ax.set_title(f"{stat} latency per query")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("milliseconds (log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8.5, frameon=False, bbox_to_anchor=(0.5, 0.01))
    fig.tight_layout(rect=(0, 0.25, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each issue target with the measured value at the largest size and whether it holds."""
    largest = str(max(int(s) for s in results["sizes"]))
    at = results["sizes"][largest]
    label = at["label"]
    lat = at["latency"]
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, shown: str, met: bool | None) -> None:
        out.append({"target": name, "value": value, "shown": shown, "met": met})

    hybrid = lat.get("ours_hybrid", {}).get("p95")
    add(
        f"hybrid SQL p95 at {label} <= 20 ms",
        hybrid,
        f"{_ms(hybrid)} ms",
        None if hybrid is None else hybrid <= HYBRID_P95_TARGET_MS,
    )
    retrieve = lat.get("ours_retrieve", {}).get("p95")
    add(
        f"retrieve() without rerank p95 at {label} <= 60 ms",
        retrieve,
        f"{_ms(retrieve)} ms",
        None if retrieve is None else retrieve <= RETRIEVE_P95_TARGET_MS,
    )
    for key, what in (("langchain_ensemble", "PGVector as shipped"), ("langchain_ensemble_hnsw", "PGVector + HNSW")):
        ratio = results["ratios"].get(largest, {}).get(key, {}).get("p95")
        add(
            f"hybrid SQL >= 5x faster than EnsembleRetriever at p95, {label} ({what})",
            ratio,
            _ratio(ratio),
            None if ratio is None else ratio >= ENSEMBLE_RATIO_TARGET,
        )
    ingest = results.get("ingestion") or {}
    if "overhead" in ingest:
        add(
            "ingestion overhead over the embedding model alone <= 15%",
            ingest["overhead"],
            f"{ingest['overhead'] * 100:.1f}%",
            ingest["overhead_met"],
        )
        add(
            "re-indexing unchanged documents >= 20x faster",
            ingest["speedup"],
            f"{ingest['speedup']:.0f}x",
            ingest["speedup_met"],
        )
    rerank = results.get("rerank") or {}
    default = next(
        (r for r in rerank.get("results", []) if r["variant"] == "onnx-int8" and r["max_length"] == 256), None
    )
    if default:
        add(
            "rerank 20 candidates p95 <= 300 ms (default: int8 ONNX, 256 tokens)",
            default["p95_ms"],
            f"{default['p95_ms']:.0f} ms",
            default["meets_budget"],
        )
    return out


def _budget(settings: dict[str, Any]) -> str:
    budget = settings.get("bm25_max_postings")
    if budget is None:
        return "all (exact; measured before the budget existed)"
    return "all (exact)" if budget == 0 else f"at most {budget:,}"


def _latency_table(results: dict[str, Any], sizes: list[str]) -> list[str]:
    labels = [results["sizes"][s]["label"] for s in sizes]
    head = "| retriever | " + " | ".join(f"{lb} p50 | {lb} p95" for lb in labels) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(sizes)]
    for spec in SPECS:
        cells = []
        present = False
        for s in sizes:
            stats = results["sizes"][s]["latency"].get(spec.key)
            present = present or stats is not None
            cells += [_ms(stats["p50"]) if stats else "—", _ms(stats["p95"]) if stats else "—"]
        if present:
            lines.append(f"| {spec.label} | " + " | ".join(cells) + " |")
    return lines


def _stage_table(results: dict[str, Any], sizes: list[str]) -> list[str]:
    labels = [results["sizes"][s]["label"] for s in sizes]
    names = {
        "embedding": "query embedding (MiniLM)",
        "sql": "hybrid SQL (incl. transaction)",
        "parents": "parent expansion",
        "mmr": "MMR",
        "format": "formatting (tiktoken)",
        "total": "total (metrics.total_time_ms)",
    }
    lines = [
        "| retrieve() stage | " + " | ".join(f"{lb} p50 | {lb} p95" for lb in labels) + " |",
        "|---|" + "---:|---:|" * len(sizes),
    ]
    for key, name in names.items():
        cells = []
        for s in sizes:
            st = results["sizes"][s].get("retrieve_stages_ms", {}).get(key)
            cells += [_ms(st["p50"]) if st else "—", _ms(st["p95"]) if st else "—"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _ratio_table(results: dict[str, Any], sizes: list[str]) -> list[str]:
    labels = [results["sizes"][s]["label"] for s in sizes]
    lines = [
        "| baseline | " + " | ".join(f"{lb} p50 | {lb} p95" for lb in labels) + " |",
        "|---|" + "---:|---:|" * len(sizes),
    ]
    keys = [
        k for k in SPEC_BY_KEY if not k.startswith("ours") and any(k in results["ratios"].get(s, {}) for s in sizes)
    ]
    for key in keys:
        cells = []
        for s in sizes:
            r = results["ratios"].get(s, {}).get(key)
            cells += [_ratio(r["p50"]) if r else "—", _ratio(r["p95"]) if r else "—"]
        lines.append(f"| {SPEC_BY_KEY[key].label} | " + " | ".join(cells) + " |")
    return lines


def _corpus_table(results: dict[str, Any], sizes: list[str]) -> list[str]:
    lines = [
        "| corpus | build: COPY + INSERT (tsvector, BM25 triggers) / GIN / HNSW | table + indexes | HNSW | GIN | HNSW recall@20 vs exact "
        "| chunks matched by the keyword arm, median (p95) | ... top-20-term queries, median |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        r = results["sizes"][s]
        b = r["build"]
        built = (
            f"{b['copy_s'] + b['tsvector_insert_s']:.0f} s / {b['gin_build_s']:.0f} s / {b['hnsw_build_s']:.0f} s"
            if "copy_s" in b
            else "—"
        ) + (" (built by an earlier run)" if b.get("reused") else "")
        km, kf = r["keyword_matches"], r["keyword_matches_frequent"]
        lines.append(
            f"| {r['label']} chunks | {built} | {r['relation_sizes']['document_chunks_total']} "
            f"| {r['relation_sizes']['hnsw_index']} | {r['relation_sizes']['gin_index']} "
            f"| {r['hnsw_recall_at_20']:.3f} "
            f"| {km['median']:,.0f} ({km['p95']:,.0f}) = {km['median_share'] * 100:.0f}% "
            f"| {kf['median']:,.0f} = {kf['median_share'] * 100:.0f}% |"
        )
    return lines


def _ingestion_lines(ing: dict[str, Any]) -> list[str]:
    if not ing:
        return ["(not run)"]
    if "error" in ing:
        return [f"Could not run: {ing['error']}"]
    return [
        f"{ing['documents']} SciFact documents (title, blank line, abstract), recursive chunking 500/100 -> "
        f"{ing['chunks']} chunks; all-MiniLM-L6-v2 on the CPU, batch 64. Alternating runs, best of each.",
        "",
        "| measurement | seconds (each run) | best | chunks/s |",
        "|---|---|---:|---:|",
        f"| model alone: `embed_documents(all chunk texts)` | {', '.join(map(str, ing['model_alone_s']))} "
        f"| {ing['best_model_alone_s']:.2f} | {ing['model_chunks_per_s']:.0f} |",
        f"| `Indexer.index_texts` into a fresh database (chunk + embed + write) "
        f"| {', '.join(map(str, ing['ingest_s']))} | {ing['best_ingest_s']:.2f} | {ing['ingest_chunks_per_s']:.0f} |",
        f"| ... of which inside the embedding model | {', '.join(map(str, ing['ingest_embedding_s']))} | | |",
        f"| `index_texts` again, nothing changed ({ing['rerun_unchanged']} skipped, "
        f"{ing['rerun_chunks_embedded']} embedded) | {', '.join(map(str, ing['rerun_s']))} "
        f"| {ing['best_rerun_s']:.3f} | |",
        "",
        f"Overhead of ingestion over the model alone: **{ing['overhead'] * 100:.1f}%** (target <= 15%). "
        f"Re-indexing unchanged documents: **{ing['speedup']:.0f}x** faster than the first run (target >= 20x).",
    ]


def _rerank_lines(rr: dict[str, Any]) -> list[str]:
    if not rr:
        return ["(not run)"]
    if "error" in rr:
        return [f"Could not run: {rr['error']}"]
    lines = [
        f"`scripts/bench_rerank.py`: {rr['candidates']} candidates of ~{rr['chars_per_candidate']} characters "
        f"({rr['tokens_per_pair']['min']}-{rr['tokens_per_pair']['max']} tokens per pair), a model of "
        f"ms-marco-MiniLM-L-6-v2's shape, {rr['repetitions']} interleaved rounds after {rr['warmup']} warm-up. "
        "The service's default is int8 ONNX at 256 tokens.",
        "",
        "| variant | runtime | max_length | p50 ms | p95 ms | Spearman vs torch fp32 @512 | p95 <= 300 |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in rr["results"]:
        lines.append(
            f"| {r['variant']} | {r['runtime']} | {r['max_length']} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} "
            f"| {r['spearman_vs_torch512']:.3f} | {'yes' if r['meets_budget'] else 'no'} |"
        )
    return lines


def _excerpt(plan: str, *, limit: int = 40) -> str:
    lines = plan.splitlines()
    return "\n".join(lines[:limit] + (["..."] if len(lines) > limit else []))


def markdown_section(results: dict[str, Any], *, plot_name: str) -> str:
    """The generated section (between the markers) of docs/benchmarks.md."""
    sizes = sorted(results["sizes"], key=int)
    largest = sizes[-1]
    m = results["machine"]
    st = results["settings"]
    at = results["sizes"][largest]
    pr = at["preset"]
    lines = [
        f"_Generated by `scripts/bench.py` on {results['generated_at']}{' (--quick)' if st['quick'] else ''}: "
        f"{st['queries']} queries per size after {st['warmup']} warm-up queries, every retriever returning "
        f"{st['top_k']} results (retrieve(): the `workflow` preset's 5); "
        f"{m['cores']} cores, Python {m['python']}, PostgreSQL {m['postgres']}, pgvector {m['pgvector']} "
        f"(shared_buffers {m['shared_buffers']}, jit {m['jit']}), hnsw.ef_search {st['ef_search']}; "
        f"load average {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])} at the start._",
        "",
        "_Measured: latency "
        + ", ".join(f"{results['sizes'][s]['label']} {results['sizes'][s].get('measured_at', '?')}" for s in sizes)
        + f"; ingestion {(results.get('ingestion') or {}).get('measured_at', '—')}"
        + f"; reranking {(results.get('rerank') or {}).get('measured_at', '—')} (the machine is shared: phases"
        " can be re-measured alone with `--only`)._",
        "",
        "### Targets",
        "",
        "| target | measured | met |",
        "|---|---:|---|",
        *[f"| {t['target']} | {t['shown']} | {_yes(t['met'])} |" for t in results["targets"]],
        "",
        "### Latency per query (ms)",
        "",
        "Ours: the SQL rows are one `hybrid_search` call in its own transaction (the per-transaction HNSW",
        "settings included) with the precomputed query vector; `retrieve()` is the whole pipeline of",
        "`UniversalRAGService.retrieve(context='workflow', rerank_enabled=False, expand_query=False)`",
        "including the query embedding by all-MiniLM-L6-v2 (the synthetic vectors are not in MiniLM's",
        "space, which does not matter for latency). Baselines get the precomputed vectors. The hybrid",
        f"statement is the stored `{pr['name']}` preset's: {pr['fusion_method']} fusion, weights "
        f"{pr['vector_weight']}/{pr['keyword_weight']} (rrf_k {pr['rrf_k']} for the RRF row), keyword scorer "
        f"{pr['keyword_scorer']}, candidate_k {pr['candidate_k']}; BM25 postings per query "
        f"{_budget(st)} (`RAG_BM25_MAX_POSTINGS`; its trade-off is measured below the generated section).",
        "",
        *_latency_table(results, sizes),
        "",
        f"![p50 and p95 latency against corpus size]({plot_name})",
        "",
        "Where `retrieve()` spends its time, from the `metrics` of the same timed calls:",
        "",
        *_stage_table(results, sizes),
        "",
        "### Ours vs the others",
        "",
        "Baseline latency divided by our hybrid SQL latency (above 1x: ours is faster).",
        "",
        *_ratio_table(results, sizes),
        "",
    ]
    lc = at.get("langchain") or {}
    if "error" in lc:
        lines += [f"LangChain could not run: {lc['error']}", ""]
    else:
        lines += [
            "LangChain: `EnsembleRetriever(weights=[0.5, 0.5])` over `BM25Retriever` (rank_bm25, in memory) and",
            "langchain-postgres `PGVector` in its own database on the same server, fed our vectors through an",
            "`Embeddings` that looks them up. PGVector creates no vector index, so as shipped it scans every",
            "vector (timed with index scans off for its sessions); the second ensemble adds an HNSW index like",
            "ours. Installing langchain-postgres pins pgvector-python below 0.4 in the same environment.",
            "",
        ]
    lines += [
        "### Corpora and indexes",
        "",
        *_corpus_table(results, sizes),
        "",
        "The 20 most frequent terms (one per lexeme) used for the `top-20 frequent terms` queries, with the",
        f"share of chunks containing each at {at['label']}: "
        + ", ".join(f"{t['word']} {t['chunk_share'] * 100:.0f}%" for t in at["frequent_terms"])
        + ".",
        "",
        "### Ingestion with the real embedding model",
        "",
        *_ingestion_lines(results.get("ingestion") or {}),
        "",
        "### Reranking stage",
        "",
        *_rerank_lines(results.get("rerank") or {}),
        "",
        f"### Query plan at {at['label']} chunks",
        "",
        f"`EXPLAIN` of the hybrid statement as `hybrid_search` sends it (planner settings untouched): the vector "
        f"arm {'uses' if at['explain_uses_hnsw'] else '**does not use**'} `ix_document_chunks_embedding_hnsw`.",
        "",
        "```",
        _excerpt(at["explain"]),
        "```",
        "",
    ]
    for name, plan in at.get("explain_analyze", {}).items():
        lines += [
            f"<details><summary>EXPLAIN (ANALYZE, BUFFERS): {name}</summary>",
            "",
            "```",
            _excerpt(plan, limit=60),
            "```",
            "",
            "</details>",
            "",
        ]
    for name, plan in (lc.get("plans") or {}).items():
        lines += [
            f"<details><summary>EXPLAIN of LangChain's PGVector search: {name}</summary>",
            "",
            "```",
            _excerpt(plan),
            "```",
            "",
            "</details>",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def write_markdown(path: Path, section: str) -> None:
    """Replace the text between the markers of ``path`` (created from the template when it has none)."""
    current = path.read_text() if path.exists() else ""
    if START not in current or END not in current:
        current = TEMPLATE
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    updated = pattern.sub(lambda _: f"{START}\n{section}{END}", current, count=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(updated)
