#!/usr/bin/env bash
# Every arm (hybrid, vector, BM25) on every visible set, without rerank, into OUT_DIR/<set>-<arm>.json.
# usage: RAG_DATA_DIR=... [RAG_EMBEDDING_BACKEND=...] scripts/eval_sets.sh OUT_DIR
# SciFact with the `search` preset and no query expansion (as its baselines were measured); the docs sets
# with `workflow`. Indexes each set once per data folder; later runs only query.
set -u
out=${1:?usage: scripts/eval_sets.sh OUT_DIR}
sets=${RAG_EVAL_DATASETS:-../shared/datasets}
mkdir -p "$out"
run() {
  local name=$1
  shift
  echo "== $name $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >>"$out/log"
  .venv/bin/rag eval "$@" --no-rerank --quiet --json >"$out/$name.json" 2>>"$out/log"
  echo "   exit $? $(date +%T)" >>"$out/log"
}
run scifact-hybrid "$sets/scifact" --set expand_query=false
run scifact-vector "$sets/scifact" --retriever vector --set expand_query=false
run scifact-bm25 "$sets/scifact" --retriever fulltext --set expand_query=false
for d in ray-docs-qa anthropic-docs-qa; do
  run "$d-hybrid" "$sets/$d" --context workflow
  run "$d-vector" "$sets/$d" --context workflow --retriever vector
  run "$d-bm25" "$sets/$d" --context workflow --retriever fulltext
done
echo done >>"$out/log"
