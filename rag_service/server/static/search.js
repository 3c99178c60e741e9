// The search page: plain DOM, no build step, no outside resources. Text is inserted with
// textContent only, so document content can never inject markup.
"use strict";

const $ = (id) => document.getElementById(id);

// The token field alone says what is sent: an empty field sends no token. A token is kept for this tab
// (sessionStorage, to fill the field after a reload) only once the server took it, and dropped when refused.
async function call(path, options = {}) {
  const token = $("token").value;
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  let response;
  try {
    response = await fetch(path, { ...options, headers });
  } catch (err) {  // no answer at all: the browser's own words ("Failed to fetch") say nothing useful
    if (err.name === "AbortError") throw err;
    throw new Error("the server cannot be reached (is rag serve still running?); try again once it is");
  }
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    if (sessionStorage.getItem("rag-token") === token) sessionStorage.removeItem("rag-token");
  } else if (token) {
    sessionStorage.setItem("rag-token", token);
  }
  if (!response.ok || body.success === false) {
    const message = body.error ? body.error.message : response.status + " " + response.statusText;
    throw Object.assign(new Error(message), { status: response.status });
  }
  return body;
}

// The names, with `preferred` selected; a preferred name the server does not know stays as an option of
// its own, so the search says it does not exist (and what was meant) rather than quietly using another.
function fill(select, names, preferred) {
  const shown = preferred && !names.includes(preferred) ? [...names, preferred] : names;
  select.replaceChildren(...shown.map((name) => new Option(name, name, false, name === preferred)));
}

// Which collection to show: the URL's (?collection=), else the one searched last in this browser,
// else the one with the most documents; never merely the alphabetically first.
function pickCollection(collections, params) {
  if (params.get("collection")) return params.get("collection");
  const names = collections.map((c) => c.name);
  const last = localStorage.getItem("rag-collection");
  if (last && names.includes(last)) return last;
  const largest = collections.reduce((best, c) => (best && best.documents >= c.documents ? best : c), null);
  return largest ? largest.name : "default";
}

// The pickers filled from the server (the URL's choices kept): a promise of true, or false when they
// could not load (the status says why). Loaded again when the token changes, and on a search while failed.
let pickers = null;

function pickersReady({ again = false } = {}) {
  if (again || pickers === null) {
    const loading = loadPickers();
    pickers = loading;
    loading.then((ok) => { if (!ok && pickers === loading) pickers = null; });
  }
  return pickers;
}

async function loadPickers() {
  const params = new URLSearchParams(location.search);
  let collections, presets;
  try {
    [collections, presets] = await Promise.all([call("/api/collections"), call("/api/presets")]);
  } catch (err) {
    const hint = err.status === 401 ? "; enter the token" : "";
    setStatus("could not load collections and presets: " + err.message + hint, true);
    return false;
  }
  const names = collections.collections.map((c) => c.name);
  const contexts = presets.presets.map((p) => p.context_type);
  fill($("collection"), names, pickCollection(collections.collections, params));
  fill($("preset"), contexts, params.get("context") || "search");
  if ($("status").textContent.startsWith("could not load collections")) setStatus("");
  // a name from the address the server lacks is said now, not only when a search runs (it stays picked)
  const missing = unknownName("collection", params.get("collection"), names)
    || unknownName("preset", params.get("context"), contexts);
  if (missing) setStatus(missing, true);
  return true;
}

// At most this many names in the line; of more, those sharing the longest start with the name first (the
// server's errors name ten too): a team's hundreds of collections made one line of thousands of characters.
const NAMED = 10;

function unknownName(kind, name, names) {
  if (!name || names.includes(name)) return "";
  const typed = name.toLowerCase();
  const shared = (n) => { let i = 0; while (i < n.length && n[i].toLowerCase() === typed[i]) i++; return i; };
  const closest = names.length > NAMED ? [...names].sort((a, b) => shared(b) - shared(a)).slice(0, NAMED) : names;
  const more = names.length > NAMED ? ` and ${names.length - NAMED} more` : "";
  const known = names.length ? closest.map((n) => `'${n}'`).join(", ") + more : "none yet";
  return `${kind} '${name}' does not exist here; the ${kind}s are ${known} (pick one above)`;
}

// A query from the address that has not run yet because the pickers could not load (a token is missing)
let pendingQuery = null;

async function start() {
  $("token").value = sessionStorage.getItem("rag-token") || "";
  const query = new URLSearchParams(location.search).get("q");
  if (query) $("query").value = query;  // kept when it cannot run yet
  pendingQuery = query;
  if (await pickersReady() && query && pendingQuery === query) {  // a shared or bookmarked search runs at once
    pendingQuery = null;
    runSearch(query);
  }
}

async function tokenChanged() {
  if (await pickersReady({ again: true }) && pendingQuery && $("query").value === pendingQuery) {
    const query = pendingQuery;
    pendingQuery = null;
    runSearch(query);
  }
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

// The chunk's text with the span that matched (match_start..match_end, document offsets) in <mark>;
// when the whole chunk is the match, the query's whole words are marked instead ("PostgreS" does not
// mark part of "PostgreSQL"). Markdown code fences become <pre><code> blocks without the ``` lines.
function passage(chunk, query) {
  const node = document.createElement("div");
  node.className = "passage";
  node.dir = "auto";  // a passage in Arabic or Hebrew reads right to left
  const text = chunk.content;
  const from = utf16Index(text, chunk.match_start - chunk.start_char);
  const to = utf16Index(text, chunk.match_end - chunk.start_char);
  const marks = from > 0 || to < text.length ? [[from, to]] : wordRanges(text, query);
  for (const block of blocks(text)) {
    const target = block.code ? document.createElement("code") : node;
    appendMarked(target, text, block.start, block.end, marks);
    if (block.code) {
      const pre = document.createElement("pre");
      if (block.language) target.className = "language-" + block.language;
      pre.append(target);
      node.append(pre);
    }
  }
  return node;
}

// The API counts offsets in code points (Python's str); JavaScript strings index UTF-16 units, in which
// an emoji or any other character beyond the BMP takes two. The UTF-16 index of code point `points`
// of text (clamped to the text).
function utf16Index(text, points) {
  let units = 0;
  for (const character of text) {
    if (points <= 0) break;
    units += character.length;
    points -= 1;
  }
  return units;
}

// Scripts written without spaces between words (Chinese, Japanese, Thai, ...): their query words are found
// anywhere, inside a sentence, not only between non-letters. Script_Extensions, so "ー" belongs to katakana.
const NO_SPACE = /[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Thai}\p{scx=Lao}\p{scx=Khmer}\p{scx=Myanmar}]/u;
// a query word's pieces: a run of one of those scripts (全量备份, ロールバック, の, 方法), or of any other letters
const PIECE = /\p{scx=Han}+|\p{scx=Katakana}+|\p{scx=Hiragana}+|[\p{scx=Thai}\p{scx=Lao}]+|\p{scx=Khmer}+|\p{scx=Myanmar}+|[^\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Thai}\p{scx=Lao}\p{scx=Khmer}\p{scx=Myanmar}]+/gu;
const WORD_CHAR = /[\p{L}\p{M}\p{N}_]/u;

// [start, end) of every occurrence of the query's words in text: a word of a spaced script (3+ letters, not a
// stop word) whole, between characters that are no letters of a spaced script ("PostgreSQLの" holds
// "postgresql"); a word of a script without spaces (2+ characters; a hiragana particle or ending beside other
// pieces is none) anywhere. Both sides are compared in NFC, so "Résumé" typed marks the text's decomposed
// "Re\u0301sume\u0301"; the ranges are offsets into text itself, whole grapheme clusters.
function wordRanges(text, query) {
  const words = [];
  for (const token of query.normalize("NFC").toLowerCase().match(/[\p{L}\p{M}\p{N}_]+/gu) || []) {
    const pieces = token.match(PIECE);
    for (const piece of pieces) {
      if (!NO_SPACE.test(piece)) {
        if ([...piece].length >= 3 && !STOP.has(piece)) words.push({ piece, whole: true });
      } else if ([...piece].length >= 2 && (pieces.length === 1 || !/^\p{scx=Hiragana}+$/u.test(piece))) {
        words.push({ piece, whole: false });
      }
    }
  }
  if (!words.length) return [];
  const { normal, starts, ends } = nfcMap(text);
  const ranges = [];
  for (const { piece, whole } of words) {
    const pattern = new RegExp(piece.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "giu");
    for (const m of normal.matchAll(pattern)) {
      const a = m.index, b = m.index + m[0].length;
      const before = [...normal.slice(Math.max(0, a - 2), a)].pop();
      if (!whole || !(joinsWord(before) || joinsWord(normal.slice(b, b + 2)))) ranges.push([starts[a], ends[b - 1]]);
    }
  }
  ranges.sort((x, y) => x[0] - y[0] || y[1] - x[1]);
  const kept = [];  // of overlapping ranges the first, the longest where they start together
  for (const range of ranges) if (!kept.length || range[0] >= kept[kept.length - 1][1]) kept.push(range);
  return kept;
}

// Whether the character starting s is a letter of a spaced script: one that would continue a word.
function joinsWord(s) {
  const character = s ? String.fromCodePoint(s.codePointAt(0)) : "";
  return WORD_CHAR.test(character) && !NO_SPACE.test(character);
}

// text in NFC, and for each of its UTF-16 units the start and end in text of the grapheme cluster it comes from
// (NFC composes only inside a cluster: "e\u0301" is one, "é" after).
function nfcMap(text) {
  let normal = "";
  const starts = [], ends = [];
  const clusters = typeof Intl.Segmenter === "function"
    ? [...new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(text)].map((s) => [s.index, s.segment])
    : [...text.matchAll(/\P{M}\p{M}*|\p{M}+/gsu)].map((m) => [m.index, m[0]]);
  for (const [index, cluster] of clusters) {
    const composed = cluster.normalize("NFC");
    normal += composed;
    for (let i = 0; i < composed.length; i++) {
      starts.push(index);
      ends.push(index + cluster.length);
    }
  }
  return { normal, starts, ends };
}

// The text cut into prose and fenced-code blocks (offsets); fence lines belong to neither. A fence
// left open (the chunk ends inside it) runs to the end.
function blocks(text) {
  const found = [];
  let start = 0, code = null, offset = 0;
  for (const line of text.split("\n")) {
    const end = offset + line.length;
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
    if (fence && (code === null || line.trim().startsWith(code.marker))) {
      if (offset - 1 > start) found.push({ start, end: offset - 1, code: code !== null, language: code && code.language });
      code = code === null ? { marker: fence[1], language: fence[2] } : null;
      start = Math.min(end + 1, text.length);
    }
    offset = end + 1;
  }
  if (text.length > start) found.push({ start, end: text.length, code: code !== null, language: code && code.language });
  return found;
}

// text[start, end) into target, with the parts inside any of the ranges in <mark>.
function appendMarked(target, text, start, end, ranges) {
  let at = start;
  for (const [from, to] of ranges) {
    const a = Math.max(from, at), b = Math.min(to, end);
    if (a >= b) continue;
    target.append(text.slice(at, a), markText(text.slice(a, b)));
    at = b;
  }
  target.append(text.slice(at, end));
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
    path.dir = "auto";
    const score = document.createElement("span");
    score.className = "relevance";
    score.textContent = "relevance " + Math.round(chunk.relevance_score * 100) + "%";
    meta.append(source, path, score);
    item.append(meta, passage(chunk, query));
    list.append(item);
  }
  const n = result.chunks.length;
  const why = n ? "" : noResultsReason(result, metrics);
  setStatus(n + (n === 1 ? " result" : " results") + (why ? ": " + why + "; took " : " in ") +
            metrics.total_time_ms.toFixed(1) + " ms" +
            " (server; search " + metrics.retrieval_time_ms.toFixed(1) + " ms, reranker " + metrics.reranker + ")");
  $("degraded").textContent = metrics.degraded.length ? "degraded: " + metrics.degraded.join("; ") : "";
}

// Why nothing came back: the formatted context's one line ("no relevant passages for ...: the best
// relevance was 12%, below min_relevance 35% (ask differently, ...)"), else the count held back.
function noResultsReason(result, metrics) {
  if (result.formatted_context) return result.formatted_context.trim();
  const below = metrics.filtered_below_relevance;
  return below ? below + " below the preset's min_relevance" : "";
}

async function search(event) {
  event.preventDefault();
  pendingQuery = null;
  const query = $("query").value.trim();
  if (!query) {  // only spaces: the browser's "required" lets them through
    setStatus("type a question to search for", true);
    return;
  }
  if (!(await pickersReady())) return;  // the status says why
  // the address names the search, so it can be bookmarked, shared or reloaded
  const params = new URLSearchParams({ q: query, collection: $("collection").value, context: $("preset").value });
  history.replaceState(null, "", "?" + params);
  localStorage.setItem("rag-collection", $("collection").value);
  await runSearch(query);
}

// Only the latest search renders: starting one aborts the one in flight, and a response that
// arrives after a newer search started is dropped, so a slow earlier answer never replaces a newer one.
let inFlight = null;

async function runSearch(query) {
  if (inFlight) inFlight.abort();
  const mine = new AbortController();
  inFlight = mine;
  $("results").setAttribute("aria-busy", "true");  // the old results stay, dimmed, until the new ones come
  setStatus("searching…");
  const started = performance.now();
  try {
    const body = await call("/api/rag/retrieve", {
      method: "POST",
      body: JSON.stringify({ query, context: $("preset").value, collection: $("collection").value }),
      signal: mine.signal,
    });
    if (inFlight !== mine) return;
    render(body, query);
    $("status").textContent += ", " + Math.round(performance.now() - started) + " ms round trip";
  } catch (err) {
    if (inFlight !== mine) return;  // aborted by a newer search, which shows its own state
    $("results").replaceChildren();
    $("degraded").textContent = "";  // it was the previous search's
    setStatus(err.message, true);
  } finally {
    if (inFlight === mine) {
      inFlight = null;
      $("results").removeAttribute("aria-busy");
    }
  }
}

// A new collection or preset searches again when there is a query; the address follows either way.
function pickerChanged() {
  if ($("query").value.trim()) {
    $("search-form").requestSubmit();
    return;
  }
  const params = new URLSearchParams({ collection: $("collection").value, context: $("preset").value });
  history.replaceState(null, "", "?" + params);
}

$("search-form").addEventListener("submit", search);
$("collection").addEventListener("change", pickerChanged);
$("preset").addEventListener("change", pickerChanged);
$("token").addEventListener("change", tokenChanged);
start();
