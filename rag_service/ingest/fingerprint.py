"""What decides whether a document is chunked and embedded again, and whether a chunk's vector is reused.

Each stored document carries its text's ``content_hash`` and a fingerprint of how it was indexed
(``documents.chunker``); a run skips a document whose two are unchanged. The fingerprint is assembled
here alone, e.g. ``"markdown:500:100:50:v1:tsv2:eh:kw:3f2a9c01d4e5"``: the chunker and its sizes
(``chunker_fingerprint``), the chunk row format (``db.documents.INDEX_FORMAT``), ``:eh`` when headers
are embedded, ``:kw`` when keywords are indexed by BM25, ``:np`` when the keyword arm reads the names' parts
(``keyword_text.name_parts``: code), and a hash of the caller's metadata. A chunk's
vector is reused when the ``content_hash`` of the text it embeds is stored.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from rag_service.config import Settings
from rag_service.db.documents import INDEX_FORMAT
from rag_service.ingest.chunkers import checked_sizes, resolve_strategy
from rag_service.ingest.strategies import DEFAULT_MIN_CHUNK_CHARS, TABLE_STRATEGIES
from rag_service.ingest.tokenchunk import load_encoding
from rag_service.keyword_text import reads_name_parts
from rag_service.tokens import DEFAULT_ENCODING

#: bump whenever a change to chunking logic changes the chunks of some text: stored fingerprints then
#: differ and documents are chunked again
#: 10: code chunks one definition each with their doc comments, indentation kept (audit 56b);
#: 9: LaTeX \\[2pt] opens no math; .py over 1 MB split by definition lines; 8: window fit
CHUNKING_VERSION = 10
#: bump a strategy's revision when a change alters only that strategy's chunks: only its documents are chunked again
#: (``v10.2``); reset them all when CHUNKING_VERSION is bumped.
#: code 1: JS/TS regex literals, signatures over lines; code 2: Go's and Rust's items (audit 58); code 3: JS/TS
#: classes assigned or anonymous, object methods' keys, long doc comments named after their definition; code 4:
#: Rust ``macro_rules!`` in parens or brackets, TS interface members no definitions, ``key: function`` after a value.
#: config 1: YAML documents apart, nothing inside a value opens a section, long sections cut between entries, first
#: lines indented (audit 58c); config 2: YAML list items and ``[[array]]`` tables named, a merged section names its
#: parts (``image, service``)
STRATEGY_REVISIONS = {"code": 4, "config": 2}


def content_hash(text: str) -> str:
    """sha256 of the text, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunker_fingerprint(
    strategy: str,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
    encoding: str = DEFAULT_ENCODING,
) -> str:
    """A short stable string naming the chunking of a document, e.g. ``"markdown:500:100:50:v1"``.

    The first part of a document's fingerprint. Defaults are resolved first, so ``None`` and the
    explicit default agree. The encoding appears only for ``token``, the one strategy it affects
    (``"token:256:32:50:cl100k_base:v1"``); a strategy revised since the last ``CHUNKING_VERSION`` carries its
    revision (``"code:1500:0:50:v10.2"``). Raises ChunkingError where ``make_chunker`` would.
    """
    strategy = resolve_strategy(strategy)
    size, overlap = checked_sizes(strategy, chunk_size, chunk_overlap, min_chunk_chars)
    revision = STRATEGY_REVISIONS.get(strategy)
    version = f"v{CHUNKING_VERSION}" if revision is None else f"v{CHUNKING_VERSION}.{revision}"
    if strategy == "token":
        load_encoding(encoding)
        return f"token:{size}:{overlap}:{min_chunk_chars}:{encoding}:{version}"
    return f"{strategy}:{size}:{overlap}:{min_chunk_chars}:{version}"


def document_fingerprint(chunker: str, settings: Settings, metadata: dict[str, Any]) -> str:
    """The fingerprint stored with a document chunked as ``chunker`` (a ``chunker_fingerprint``),
    indexed with ``settings`` and carrying the caller's ``metadata``: a change to any part re-writes it."""
    embed_format = ":eh" if settings.embed_headers else ""
    embed_format += ":kw" if settings.keywords_in_bm25 and settings.chunk_keywords > 0 else ""
    embed_format += ":tr" if settings.table_rows and fingerprint_strategy(chunker) in TABLE_STRATEGIES else ""
    embed_format += ":np" if reads_name_parts(chunker) else ""  # keyword_text.name_parts
    tagged = ":" + content_hash(json.dumps(metadata, sort_keys=True))[:12] if metadata else ""
    return f"{chunker}:{INDEX_FORMAT}{embed_format}{tagged}"


def fingerprint_strategy(fingerprint: str) -> str:
    """The chunking strategy a stored document fingerprint names (its first part)."""
    return fingerprint.split(":", 1)[0]
