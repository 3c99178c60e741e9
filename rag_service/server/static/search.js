// The search page: plain DOM, no build step, no outside resources. Text is inserted with
// textContent only, so document content can never inject markup.
"use strict";

const $ = (id) => document.getElementById(id);

function headers() {
  const h = { "Content-Type": "application/json" };
  const token = $("token").value || sessionStorage.getItem("rag-token") || "";
  if (token) { h.Authorization = "Bearer " + token; sessionStorage.setItem("rag-token", token); }
  return h;
}

async function call(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers() });
  const body = await response.json().catch(() => ({}));
  if (!response.ok || body.success === false) {
    const message = body.error ? body.error.message : response.status + " " + response.statusText;
    throw new Error(message);
  }
  return body;
}

function fill(select, names, preferred) {
  select.replaceChildren(...names.map((name) => new Option(name, name, false, name === preferred)));
}

async function loadPickers() {
  try {
    const [collections, presets] = await Promise.all([call("/api/collections"), call("/api/presets")]);
    const names = collections.collections.map((c) => c.name);
    fill($("collection"), names.length ? names : ["default"], names.includes("default") ? "default" : names[0]);
    fill($("preset"), presets.presets.map((p) => p.context_type), "search");
  } catch (err) {
    setStatus("could not load collections and presets: " + err.message, true);
  }
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

// The chunk's text with the span that matched (match_start..match_end, document offsets) in <mark>;
// when the whole chunk is the match, the query's words are marked instead.
function passage(chunk, query) {
  const node = document.createElement("p");
  node.className = "passage";
  const text = chunk.content;
  const from = Math.max(0, chunk.match_start - chunk.start_char);
  const to = Math.min(text.length, chunk.match_end - chunk.start_char);
  if (from > 0 || to < text.length) {
    node.append(text.slice(0, from), markText(text.slice(from, to)), text.slice(to));
    return node;
  }
  const words = (query.toLowerCase().match(/[\p{L}\p{N}_]{3,}/gu) || []).filter((w) => !STOP.has(w));
  if (!words.length) { node.textContent = text; return node; }
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp("(" + escaped.join("|") + ")", "giu");
  for (const [i, piece] of text.split(pattern).entries()) {
    node.append(i % 2 ? markText(piece) : piece);
  }
  return node;
}

const STOP = new Set(["the", "and", "are", "how", "what", "with", "for", "from", "that", "this", "does", "why",
                      "when", "which", "who", "can", "into", "about", "you", "your", "was", "were", "not"]);

function markText(text) {
  const mark = document.createElement("mark");
  mark.textContent = text;
  return mark;
}

function render(body, query) {
  const { result, metrics } = body;
  const list = $("results");
  list.replaceChildren();
  for (const chunk of result.chunks) {
    const item = document.createElement("li");
    item.className = "result";
    const meta = document.createElement("div");
    meta.className = "meta";
    const source = document.createElement("span");
    source.className = "source";
    source.textContent = chunk.source;
    const path = document.createElement("span");
    path.className = "header-path";
    path.textContent = chunk.header_path || "(no header)";
    const score = document.createElement("span");
    score.className = "relevance";
    score.textContent = "relevance " + Math.round(chunk.relevance_score * 100) + "%";
    meta.append(source, path, score);
    item.append(meta, passage(chunk, query));
    list.append(item);
  }
  const n = result.chunks.length;
  setStatus(n + (n === 1 ? " result" : " results") + " in " + metrics.total_time_ms.toFixed(1) + " ms" +
            " (server; search " + metrics.retrieval_time_ms.toFixed(1) + " ms, reranker " + metrics.reranker + ")");
  $("degraded").textContent = metrics.degraded.length ? "degraded: " + metrics.degraded.join("; ") : "";
}

async function search(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query) return;
  setStatus("searching…");
  const started = performance.now();
  try {
    const body = await call("/api/rag/retrieve", {
      method: "POST",
      body: JSON.stringify({ query, context: $("preset").value, collection: $("collection").value }),
    });
    render(body, query);
    $("status").textContent += ", " + Math.round(performance.now() - started) + " ms round trip";
  } catch (err) {
    $("results").replaceChildren();
    setStatus(err.message, true);
  }
}

$("search-form").addEventListener("submit", search);
loadPickers();
