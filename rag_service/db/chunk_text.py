"""The texts made of a chunk besides its own: what the keyword arm reads before it, what its vector is made from."""

from __future__ import annotations

from rag_service.keyword_text import bare_tag_names, name_parts, reads_name_parts


def search_prefix(title: str, header_path: str, lead: str = "") -> str:
    """Text matched with a chunk besides its own: the document title, the chunk's header path and its lead
    (``ChunkRow.lead``).

    A chunk rarely repeats its document's title, yet queries often name it; the title is left out
    when the header path already starts with it (a markdown h1).
    """
    parts = [title] if title and not header_path.startswith(title) else []
    parts.extend(p for p in (header_path, lead) if p)
    return "\n".join(parts)


def keyword_prefix(title: str, header_path: str, lead: str, content: str, *, chunker: str) -> str:
    """What the keyword arm reads before a chunk's ``content``: its ``search_prefix``, then the words the parser does
    not make of the names the two hold: their bare ``<name>``s, and in a document chunked as code (``chunker``, a
    fingerprint, of ``NAME_PART_STRATEGIES``) also the parts of dotted and CamelCase names (``keyword_text``)."""
    prefix = search_prefix(title, header_path, lead)
    read = name_parts if reads_name_parts(chunker) else bare_tag_names
    words = read(f"{prefix}\n{content}")
    return f"{prefix}\n{words}" if words and prefix else words or prefix


def embedded_text(title: str, header_path: str, content: str, lead: str = "") -> str:
    """The text a chunk's vector is made from (``RAG_EMBED_HEADERS``): a chunk under headers gets its
    ``search_prefix`` first (as BM25 sees it); a chunk without headers, its lead (if any)."""
    prefix = search_prefix(title, header_path, lead) if header_path else lead
    return f"{prefix}\n{content}" if prefix else content
