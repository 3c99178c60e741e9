"""The LLM context: chunks grouped by source with citation numbers, within an exact token budget.

Layout (groups and chunks separated by a blank line)::

    [1] docs/guide.md — Guide Title
    § Guide > Install > Linux (relevance 87%)
    <chunk text>

    § Guide > Usage (relevance 80%)
    <chunk text>

    [2] docs/faq.md
    (relevance 64%)
    <chunk text>
    [… truncated]

With ``show_metadata`` (the preset's column), a group header is followed by its document's summary
(``Summary: ...``) and a chunk's header line ends with its keywords (``· keywords: a, b``), where
ingestion stored them.

Groups are ordered by their best chunk's relevance, chunks inside a group by relevance; ``[n]`` is
``Source.number``. Chunks are admitted in relevance order while they fit. A chunk that does not fit
whole is cut at a token boundary between two grapheme clusters (never inside what a reader sees as one character:
a decomposed accent, a ZWJ emoji, a Thai or Indic vowel sign stays whole) and followed by the marker line
``[… truncated]`` if at least ``min_cut_tokens`` of its tokens fit; the cut chunk is the last one
admitted. Otherwise it is left out and the next, less relevant chunks are still tried whole.

A code or configuration result (by its source's suffix) is cited by its lines and fenced with its language
(``fences``): ``§ src/app.py:L120-145 · App > run (relevance 87%)``, then its text in a fence; prose as above.
A cut one cites the lines it shows, and its cut is sized with that header.

Results of one document that overlap are shown once, joined into the better one (``overlaps``).
A chunk's text that leaves a fenced code block open (a passage cut out of one, or the cut itself) gets the
block's fence on a line after it, so no header, citation or marker line is ever read as code.

The budget is exact: the returned text, counted by tiktoken as one string, never has more than
``max_tokens`` tokens, and ``total_tokens`` is that count. Parts are counted once each to decide
quickly (joining rarely changes a count by more than a token per seam); near the limit, and always at
the end, the whole string is counted, and the last admitted chunk is cut or dropped if it is over.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import tiktoken

from rag_service.errors import ConfigurationError
from rag_service.fences import citation, opener_chars, pages_cited, shown_body, shown_start, shown_text
from rag_service.fences import clean as _clean
from rag_service.fences import closes_fences as _closes_fences
from rag_service.lines import span_end_line
from rag_service.overlaps import joined_overlaps
from rag_service.result import RetrievedChunk, Source
from rag_service.text_breaks import grapheme_starts
from rag_service.tokens import DEFAULT_ENCODING, get_encoding

TRUNCATION_MARKER = "[… truncated]"
#: fewest tokens of a chunk worth showing when it has to be cut
MIN_CUT_TOKENS = 50
_SEPARATOR = "\n\n"


@dataclass(slots=True)
class FormattedContext:
    """The formatter's output.

    ``included`` lists the chunks that appear in ``text``, in text order (group by group); the one shown only in
    part (``cut_chunk_id``, if any) holds only that part: its ``content`` and ``end_char`` end where the text stops
    (``document[start_char:end_char] == content`` still holds) and its ``match_*`` are kept inside them.
    ``truncated`` is true when any chunk was cut or left out.
    """

    text: str
    total_tokens: int
    sources: list[Source]
    included: list[RetrievedChunk]
    truncated: bool
    cut_chunk_id: int | None = None


@dataclass(slots=True)
class _Entry:
    chunk: RetrievedChunk
    block: str  # chunk header line + "\n" + shown text
    #: a cut entry's chunk as its block shows it (``_part``), None for a whole one
    part: RetrievedChunk | None = None

    @property
    def cut(self) -> bool:
        return self.part is not None


@dataclass(slots=True)
class _Group:
    source: str
    title: str
    entries: list[_Entry] = field(default_factory=list)
    summary: str = ""


def _one_line(text: str) -> str:
    return " ".join(_clean(text).split())


def _relevance(chunk: RetrievedChunk) -> float:
    value = float(chunk.relevance_score)
    return 0.0 if math.isnan(value) else value


def _group_header(number: int, group: _Group) -> str:
    head = f"[{number}] {_one_line(group.source)}"
    head = f"{head} — {group.title}" if group.title and group.title != group.source else head
    return f"{head}\nSummary: {group.summary}" if group.summary else head


def _new_group(chunk: RetrievedChunk, show_metadata: bool) -> _Group:
    summary = _one_line(chunk.summary) if show_metadata else ""
    return _Group(chunk.source, _one_line(chunk.title), summary=summary)


def _chunk_header(chunk: RetrievedChunk, show_metadata: bool = False) -> str:
    percent = round(min(1.0, max(0.0, _relevance(chunk))) * 100)
    path, cited = _one_line(chunk.header_path), citation(chunk) or pages_cited(chunk)
    path = f"{cited} · {path}" if cited and path else cited or path
    line = f"§ {path} (relevance {percent}%)" if path else f"(relevance {percent}%)"
    keywords = chunk.metadata.get("keywords") if show_metadata else None
    if keywords and isinstance(keywords, list):
        line += " · keywords: " + ", ".join(_one_line(str(k)) for k in keywords)
    return line


def _render(groups: Sequence[_Group]) -> str:
    sections = []
    for number, group in enumerate(groups, start=1):
        if group.entries:
            blocks = _SEPARATOR.join(entry.block for entry in group.entries)
            sections.append(f"{_group_header(number, group)}\n{blocks}")
    return _SEPARATOR.join(sections)


class _Builder:
    """Admits chunks one at a time and keeps the layout and a running token estimate."""

    def __init__(self, enc: tiktoken.Encoding, max_tokens: int, min_cut_tokens: int, show_metadata: bool) -> None:
        self.enc = enc
        self.show_metadata = show_metadata
        self.max_tokens = max_tokens
        self.min_cut_tokens = min_cut_tokens
        self.groups: dict[str, _Group] = {}
        self.admitted: list[_Entry] = []  # in admission (relevance) order
        self.estimate = 0
        self.cut_entry: _Entry | None = None

    def count(self, text: str) -> int:
        return len(self.enc.encode(text, disallowed_special=()))

    def exact(self) -> int:
        return self.count(_render(list(self.groups.values())))

    def _add(self, entry: _Entry) -> None:
        chunk = entry.chunk
        group = self.groups.get(chunk.source)
        if group is None:
            group = self.groups[chunk.source] = _new_group(chunk, self.show_metadata)
        group.entries.append(entry)
        self.admitted.append(entry)

    def _remove(self, entry: _Entry) -> None:
        group = self.groups[entry.chunk.source]
        group.entries.remove(entry)
        if not group.entries:
            del self.groups[entry.chunk.source]
        self.admitted.remove(entry)

    def _overhead(self, chunk: RetrievedChunk) -> int:
        """Estimated tokens a new entry adds besides its block: separator and maybe a group header."""
        cost = 1 if self.admitted else 0  # "\n\n" before it
        if chunk.source not in self.groups:
            header = _group_header(len(self.groups) + 1, _new_group(chunk, self.show_metadata))
            cost += self.count(header) + 1  # header line and its "\n"
        return cost

    def offer(self, chunk: RetrievedChunk, header: str, body: str) -> bool:
        """Admit ``chunk`` whole if it fits, else cut it if enough fits; report whether it is in."""
        block = f"{header}\n{body}" if body else header
        added = self._overhead(chunk) + self.count(block)
        entry = _Entry(chunk, block)
        if self.estimate + added <= self.max_tokens:
            self._add(entry)
            self.estimate += added
            return True
        if self.estimate + added - self.max_tokens <= len(self.admitted) + 2:  # near: count exactly
            self._add(entry)
            exact = self.exact()
            if exact <= self.max_tokens:
                self.estimate = exact
                return True
            self._remove(entry)
        return self.try_cut(chunk, body)

    def try_cut(self, chunk: RetrievedChunk, body: str) -> bool:
        """Admit the longest token prefix of ``body`` (>= min_cut_tokens) that fits, with the marker, under a
        header citing the lines that prefix shows (each prefix is counted with its own header)."""
        if self.cut_entry is not None:
            return False
        shortest = _chunk_header(_part(chunk, 0), self.show_metadata)  # a citation of one line: the fewest tokens
        room = self.max_tokens - self.estimate - self._overhead(chunk) - self.count(shortest)
        if room - self.count(TRUNCATION_MARKER) - 2 < self.min_cut_tokens - len(self.admitted) - 2:
            return False
        tokens = self.enc.encode(body, disallowed_special=())
        data = body.encode("utf-8")
        starts = grapheme_starts(body)
        offsets: list[int] = []  # byte length of each cuttable prefix, shortest first
        end = 0
        for count, piece in enumerate(self.enc.decode_tokens_bytes(tokens), start=1):
            end += len(piece)
            if self.min_cut_tokens <= count < len(tokens) and (end == len(data) or end in starts):
                offsets.append(end)
        if not offsets:
            return False

        def entry_at(index: int) -> _Entry:
            shown = data[: offsets[index]].decode("utf-8").rstrip()
            part = _part(chunk, len(shown))
            header = _chunk_header(part, self.show_metadata)
            return _Entry(chunk, f"{header}\n{_closes_fences(chunk, shown)}\n{TRUNCATION_MARKER}", part=part)

        def fits(index: int) -> int | None:
            entry = entry_at(index)
            self._add(entry)
            exact = self.exact()
            self._remove(entry)
            return exact if exact <= self.max_tokens else None

        if fits(0) is None:
            return False
        low, high = 0, len(offsets) - 1  # invariant: offsets[low] fits
        while low < high:
            mid = (low + high + 1) // 2
            if fits(mid) is None:
                high = mid - 1
            else:
                low = mid
        entry = entry_at(low)
        self._add(entry)
        self.cut_entry = entry
        self.estimate = self.exact()
        return True

    def settle(self) -> tuple[str, int, bool]:
        """The final text and its exact count; drops or cuts the last admitted chunks if over."""
        dropped = False
        text = _render(list(self.groups.values()))
        total = self.count(text)
        while total > self.max_tokens and self.admitted:
            last = self.admitted[-1]
            self._remove(last)
            dropped = True
            if last.cut:
                self.cut_entry = None
            else:
                self.estimate = self.exact()
                self.try_cut(last.chunk, last.block.partition("\n")[2])  # the header is one line
            text = _render(list(self.groups.values()))
            total = self.count(text)
        return text, total, dropped


def format_context(
    chunks: Sequence[RetrievedChunk],
    *,
    max_tokens: int,
    encoding: str = DEFAULT_ENCODING,
    min_cut_tokens: int = MIN_CUT_TOKENS,
    show_metadata: bool = False,
) -> FormattedContext:
    """Lay out ``chunks`` for an LLM within ``max_tokens`` tokens (see the module docstring).

    An empty ``chunks`` gives an empty text with 0 tokens. ``sources`` lists only the sources that
    appear in the text, numbered as cited. ``show_metadata`` adds summaries and keywords.
    """
    if isinstance(max_tokens, numbers.Integral) and not isinstance(max_tokens, bool):
        max_tokens = int(max_tokens)  # np.int64(500), as the max_tokens knob takes it
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ConfigurationError(f"max_tokens ({max_tokens!r}) must be an int of at least 1; pass e.g. 2000")
    if isinstance(min_cut_tokens, bool) or not isinstance(min_cut_tokens, int) or min_cut_tokens < 1:
        raise ConfigurationError(f"min_cut_tokens ({min_cut_tokens!r}) must be an integer >= 1")
    builder = _Builder(get_encoding(encoding), max_tokens, min_cut_tokens, show_metadata)
    omitted = False
    for chunk in joined_overlaps(sorted(chunks, key=lambda c: -_relevance(c))):  # stable: ties keep their order
        if builder.cut_entry is not None:
            omitted = True
            continue
        if not builder.offer(chunk, _chunk_header(chunk, show_metadata), shown_body(chunk)):
            omitted = True
    text, total, dropped = builder.settle()

    groups = list(builder.groups.values())
    sources = [
        Source(number, group.source, group.title, [entry.chunk.chunk_id for entry in group.entries])
        for number, group in enumerate(groups, start=1)
    ]
    included = [entry.part or entry.chunk for group in groups for entry in group.entries]
    cut = builder.cut_entry
    return FormattedContext(
        text=text,
        total_tokens=total,
        sources=sources,
        included=included,
        truncated=omitted or dropped or cut is not None,
        cut_chunk_id=cut.chunk.chunk_id if cut is not None else None,
    )


def _part(chunk: RetrievedChunk, shown_chars: int) -> RetrievedChunk:
    """``chunk`` cut to the part a cut block shows, ``shown_chars`` characters of ``shown_body`` (it was returned
    whole, so a caller handing ``content`` on gave an LLM text the budget had left out; its header cited all its
    lines)."""
    # the shown text starts at shown_start, code's after its fence line; a fence the layout closed is no content
    shown = min(max(shown_chars - opener_chars(chunk), 0), len(shown_text(chunk)))
    content = chunk.content[: shown_start(chunk) + shown]
    end = chunk.start_char + len(content)
    return replace(
        chunk,
        content=content,
        end_char=end,
        end_line=(last := None if chunk.start_line is None else span_end_line(chunk.start_line, content)),
        # a match past the cut is an empty span at its end: its lines too (they were the cut line's and beyond)
        match_start_line=None if last is None or chunk.match_start_line is None else min(chunk.match_start_line, last),
        match_end_line=None if last is None or chunk.match_end_line is None else min(chunk.match_end_line, last),
        match_start=min(chunk.match_start, end),
        match_end=min(chunk.match_end, end),
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )


def layout_overhead(
    chunks: Sequence[RetrievedChunk], *, encoding: str = DEFAULT_ENCODING, show_metadata: bool = False
) -> int:
    """Tokens the layout of ``chunks`` takes besides their texts: group and chunk header lines.

    Counted on the layout with empty texts, plus two tokens per chunk for the line break before its
    text and the seams that joining can add, so ``max_tokens - layout_overhead(chunks)`` tokens of
    text fit.
    """
    groups: dict[str, _Group] = {}
    for chunk in chunks:
        group = groups.setdefault(chunk.source, _new_group(chunk, show_metadata))
        fence = shown_body(replace(chunk, content=""))  # a code result's fence lines are layout too
        group.entries.append(_Entry(chunk, f"{_chunk_header(chunk, show_metadata)}\n{fence}".rstrip("\n")))
    if not groups:
        return 0
    return len(get_encoding(encoding).encode(_render(list(groups.values())), disallowed_special=())) + 2 * len(chunks)


def smallest_budget(
    chunk: RetrievedChunk,
    *,
    encoding: str = DEFAULT_ENCODING,
    min_cut_tokens: int = MIN_CUT_TOKENS,
    show_metadata: bool = False,
) -> int:
    """The fewest ``max_tokens`` that show ``chunk`` (whole, or cut to ``min_cut_tokens`` of its text): what a
    budget that held no result has to grow to. Found by bisection over ``format_context`` itself."""
    whole = layout_overhead([chunk], encoding=encoding, show_metadata=show_metadata)
    # the chunk whole, with slack for the seams the count of its parts can miss: shown at this budget
    high = whole + len(get_encoding(encoding).encode(shown_body(chunk), disallowed_special=())) + 8
    low = 1  # invariant: ``high`` shows the chunk, ``low - 1`` does not
    while low < high:
        mid = (low + high) // 2
        shown = format_context(
            [chunk], max_tokens=mid, encoding=encoding, min_cut_tokens=min_cut_tokens, show_metadata=show_metadata
        )
        if shown.included:
            high = mid
        else:
            low = mid + 1
    return high


def budget_shortfall(
    chunks: Sequence[RetrievedChunk],
    formatted: FormattedContext,
    *,
    max_tokens: int,
    encoding: str = DEFAULT_ENCODING,
    show_metadata: bool = False,
) -> str | None:
    """When ``formatted`` (made within ``max_tokens``) lacks the first result of ``chunks``, one line saying so and
    the budget that result needs: a context of none, or one of lower-ranked results only (a result that does not
    fit is skipped for smaller ones, and a 1% passage stood in for the 74% answer without a word)."""
    if not chunks:
        return None
    first = max(chunks, key=_relevance)
    if any(c.chunk_id == first.chunk_id for c in formatted.included):
        return None
    need = smallest_budget(first, encoding=encoding, show_metadata=show_metadata)
    if not formatted.included:
        return (
            f"max_tokens {max_tokens} holds none of the {len(chunks)} results: the first needs {need} tokens "
            f"(its header and the start of its text); raise max_tokens to at least {need}"
        )
    return (
        f"max_tokens {max_tokens} does not hold the first result (it needs {need} tokens), so the context shows "
        f"{len(formatted.included)} lower-ranked of the {len(chunks)} results; raise max_tokens to at least {need}"
    )


def fit_line(line: str, *, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> tuple[str, int]:
    """``line`` and its token count, cut between grapheme clusters to the longest prefix within ``max_tokens``
    (the budget holds for a message too, e.g. "no relevant passages ..." under a budget of 10)."""
    enc = get_encoding(encoding)
    tokens = enc.encode(line, disallowed_special=())
    if len(tokens) <= max_tokens:
        return line, len(tokens)
    data, starts = line.encode("utf-8"), grapheme_starts(line)
    for keep in range(max_tokens, 0, -1):  # a cut text can encode to more tokens than it was cut to: keep fewer
        end = max(s for s in starts if s <= len(b"".join(enc.decode_tokens_bytes(tokens[:keep]))))
        cut = data[:end].decode("utf-8").rstrip()
        count = len(enc.encode(cut, disallowed_special=()))
        if count <= max_tokens:
            return cut, count
    return "", 0
