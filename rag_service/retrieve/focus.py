"""A long query searched by its question: pasted machine text and background left out (audit 56a, D2-D4, F1).

People paste a traceback or a log before or after their question, or write paragraphs of background first. The
embedding model reads the first 254 word pieces and the keyword arm keeps the 32 longest words: both read the paste
and the background, not the question (ray-docs-qa nDCG@10 0.003 with a trace before the question, 0.025 after ~330
words of background). ``focus_query`` keeps what the question is made of, by the shape of lines and the punctuation
of sentences only (no word of any language or product):

1. machine text is left out: a traceback (its header lines, ``File "...", line N`` and indented ``at ...`` frames,
   ``SomethingError: ...`` lines, Go's and Rust's panics, and the lines run together with them), lines that start
   with a timestamp, a log level, a glog prefix (``E0501 12:00:06``), a client address (an access log) or a JSON
   log's key, a short line ending in ``:`` right before those (their label: ``I get this error:``), lines holding
   only a URL, and a URL standing apart from its sentence (at a line's start, after a sentence's end, in a bracketed
   aside). A line ending in ``?`` is a question however it starts (``Error: ... What did I miss?``), unless it is run
   together with machine text. Code is left out of a query over ``FOCUS_WORDS`` words too: lines indented by a tab
   or 4 spaces, fenced blocks (but a question in one), lines where fewer than half the tokens are plain words, and
   in a block holding such lines those that end no sentence and are not mostly words (``for x in y.items:``); a
   name or a short command on its own line inside a sentence stays in it; a short question keeps its line of code,
   and code alone is searched as written.
2. when more than ``FOCUS_WORDS`` words remain, the sentences ending in ``?`` and the last paragraph are kept (the
   last that does not end in ``:``, which introduces what was pasted after it; a list's last item brings the list and
   its introducing line): the background before them goes.
3. when that is still past the embedding model's window (one long paragraph), its questions and its last sentences
   up to ``FOCUS_WORDS`` words are kept, cut from the front until they fit: questions come last.

A query that loses nothing is searched as written, character for character: every question of the visible sets.
A query of machine text alone is searched by its error lines (``KeyError: 'x'``), or as written when it has none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: past this many words of prose a query is cut to its questions and last paragraph (its code lines left out)
FOCUS_WORDS = 40
#: a line of at most this many words ending in ``:`` right before a traceback or a log is its label, left out with it
LABEL_WORDS = 6
#: a text this short fits any embedding model's window (a token covers a character at least; none reads fewer)
_FITS_ANY_WINDOW = 128
#: the embedding model's window: its token count of each text, and how many tokens of a query it reads
Window = tuple[Callable[[Sequence[str]], list[int]], int]

_TRACE_HEADER = re.compile(
    r"\s*(?:Traceback \(most recent call last\)|During handling of the above exception"
    r"|The above exception was the direct cause|Caused by:|Exception in thread "
    # Go: the panic, its signal, each goroutine, go run's exit; Rust: the panic, its backtrace and note
    r"|panic: |\[signal |goroutine \d+ \[|exit status \d+\s*$|thread '[^']*' panicked at |stack backtrace:\s*$"
    r"|note: run with `RUST_BACKTRACE)"
)
_FRAME = re.compile(r'\s*File "[^"]*", line \d+|\s+at \S+|\s*\.\.\. \d+ more\s*$')
_ERROR = re.compile(r"\s*(?:Uncaught (?:\(in promise\) )?)?(?:[\w$]+\.)*[\w$]*(?:Error|Exception|Warning)(?::|\s*$)")
_LOG = re.compile(
    r"\s*[\[(]?(?:\d{4}[-/.]\d\d[-/.]\d\d[ T]\d|\d{1,2}:\d\d:\d\d|[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d"
    r"|(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL|SEVERE)\b"
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d"  # glog/klog (Kubernetes): E0501 12:00:06.123456
    r'|\{\s*"(?:level|lvl|severity|time|timestamp|ts|@timestamp|msg|message)"\s*:'  # a JSON log line
    r"|\d{1,3}(?:\.\d{1,3}){3} \S+ \S+ \[)"  # an access log: 127.0.0.1 - - [01/May/2024:12:00:07 +0000]
)
_URL = re.compile(r"<?\b(?:https?|ftp)://[^\s<>]+")
_URL_LINE = re.compile(r"\s*(?:<?\b(?:https?|ftp)://[^\s<>]+>?\s*)+$")
_FENCE = re.compile(r"\s*(?:```|~~~)")
_INDENTED = re.compile(r"(?:\t| {4})")
_PLAIN_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
# tokens end at spaces, and at the punctuation of Chinese and Japanese, which write no spaces
_TOKEN_BREAK = re.compile(r"[\s\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]+")
_EDGE = "\"'“”‘’`«»()[]{}<>,.;:!?¿¡。，、；：！？"
_SENTENCE_END = re.compile(r"(?<=[.?!؟])\s+|(?<=[。？！])\s*")  # CJK sentences need no space after their end
_QUESTION_END = ("?", "？", "؟")
_SENTENCE_ENDS = (".", "!", "…", "。", "！", *_QUESTION_END)
#: a numbered or bulleted list's item (``1. ...``, ``2) ...``, ``- ...``)
_LIST_ITEM = re.compile(r"\s*(?:\d{1,3}[.)]|[-*•])\s")
#: a line of at most this many tokens between two lines of one sentence is a name or a command it holds
INLINE_TOKENS = 3
#: a line with fewer plain words than this share, in a block of lines holding code, is code too (``x = f(y)``)
CODE_BLOCK_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class Focus:
    """What a query is searched by: ``text`` (the query itself when nothing was left out), and what was left out
    (``note``, one line for ``metrics.degraded``; None when nothing was)."""

    text: str
    note: str | None = None


@dataclass(slots=True)
class _Left:
    """What focusing left out: lines by kind, URLs, words of prose."""

    trace: int = 0
    log: int = 0
    code: int = 0
    urls: int = 0
    words: int = 0

    def __bool__(self) -> bool:
        return bool(self.trace or self.log or self.code or self.urls or self.words)

    def described(self) -> str:
        parts = [
            f"{n} {one if n == 1 else many}"
            for n, one, many in (
                (self.trace, "line of traceback", "lines of traceback"),
                (self.log, "log line", "log lines"),
                (self.code, "line of code or output", "lines of code or output"),
                (self.urls, "URL", "URLs"),
                (self.words, "word of background", "words of background"),
            )
            if n
        ]
        return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]


def _plain_share(line: str) -> float:
    """The share of ``line``'s tokens that are plain words (letters, an inner ``'`` or ``-``)."""
    tokens = _TOKEN_BREAK.split(line.strip())
    plain = sum(bool(_PLAIN_WORD.fullmatch(t.strip(_EDGE))) for t in tokens)
    return plain / len(tokens) if tokens else 1.0


def _machine_kind(line: str) -> str | None:
    """``trace`` or ``log`` for a line of a traceback or a log, ``url`` for a line of URLs only, else None."""
    if _TRACE_HEADER.match(line) or _FRAME.match(line) or _ERROR.match(line):
        return "trace"
    if _LOG.match(line):
        return "log"
    return "url" if _URL_LINE.match(line) else None


def _kinds(lines: Sequence[str]) -> list[str]:
    """Each line's kind: ``blank``, ``prose``, ``code`` (fenced, indented, or mostly not words), or machine text
    (``trace``, ``log``, ``url``); code run together with a traceback's or a log's lines is one with them."""
    kinds: list[str] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            kinds.append("code")
        elif fenced:  # a question written in a fence is still one
            question = line.rstrip().endswith(_QUESTION_END) and _plain_share(line) >= 0.5
            kinds.append(_machine_kind(line) or ("prose" if question else "code"))
        elif not line.strip():
            kinds.append("blank")
        else:
            machine = _machine_kind(line)
            code = _INDENTED.match(line) or _plain_share(line) < 0.5
            kinds.append(machine or ("code" if code else "prose"))
    start = 0
    while start < len(kinds):  # each run of non-blank, non-prose lines holding a traceback or a log line
        end = start
        while end < len(kinds) and kinds[end] not in ("blank", "prose"):
            end += 1
        machine = next((k for k in kinds[start:end] if k in ("trace", "log")), None)
        for i in range(start, end):
            kinds[i] = machine if machine and kinds[i] == "code" else kinds[i]
        start = end + 1
    _questions_and_names(lines, kinds)
    _code_blocks(lines, kinds)
    return kinds


def _questions_and_names(lines: Sequence[str], kinds: list[str]) -> None:
    """A question that starts like a log or an error line (``Error: ... What did I miss?``) is prose, unless it is
    run together with machine text (a traceback's ``Did you mean: 'x'?``); so is a name or a short command on its own
    line between two lines of one sentence (``How do I call`` / ``retrieve_with_context`` / ``with a filter?``)."""
    machine = ("trace", "log")
    for i, line in enumerate(lines):
        before = kinds[i - 1] if i else "blank"
        after = kinds[i + 1] if i + 1 < len(kinds) else "blank"
        if kinds[i] in machine and line.rstrip().endswith(_QUESTION_END):
            kinds[i] = kinds[i] if before in machine or after in machine else "prose"
        elif kinds[i] == "code" and before == after == "prose" and not _INDENTED.match(line):
            inline = len(line.split()) <= INLINE_TOKENS and not lines[i - 1].rstrip().endswith((*_SENTENCE_ENDS, ":"))
            kinds[i] = "prose" if inline else kinds[i]


def _code_blocks(lines: Sequence[str], kinds: list[str]) -> None:
    """In a block of lines (between blank lines) holding code, a line of few plain words that ends no sentence is
    code too: a pasted block's unindented lines (``results = svc.retrieve(q)``, ``for chunk in results:``)."""
    start = 0
    while start < len(kinds):
        end = start
        while end < len(kinds) and kinds[end] != "blank":
            end += 1
        if "code" in kinds[start:end]:
            for i in range(start, end):
                stripped = lines[i].rstrip()
                shaped = _plain_share(stripped) < CODE_BLOCK_SHARE and not stripped.endswith(_SENTENCE_ENDS)
                kinds[i] = "code" if kinds[i] == "prose" and shaped else kinds[i]
        start = end + 1


def _without_bare_urls(line: str) -> tuple[str, int]:
    """``line`` without the URLs standing apart from its sentence: at its start, after a sentence's end, or in a
    bracketed aside (``(see https://...)``: the aside goes with it; a markdown link's text stays). A URL a sentence
    runs through (``what does https://x/y return?``) stays."""
    kept, dropped, at = [], 0, 0
    for match in _URL.finditer(line):
        url = match.group()
        while url[-1] in ".,;:!?)]" and not (url[-1] == ")" and url.count("(") >= url.count(")")):
            url = url[:-1]  # trailing punctuation, and a closing bracket the URL did not open
        start, end = match.start(), match.start() + len(url)
        aside = _open_bracket(line[:start])
        link = aside is not None and line[aside] == "(" and line[aside - 1 : aside] == "]"  # [text](url)
        before = line[at:start].rstrip()
        if aside is not None and not link:  # the whole aside, to its closing bracket
            closing = [i for i in (line.find(")", end), line.find("]", end)) if i >= 0]
            start, end = max(aside, at), min(closing, default=end - 1) + 1
        elif not link and before and before[-1] not in ".?!:;,":
            continue  # a sentence runs through it
        kept.append(line[at:start])
        at, dropped = end, dropped + 1
    return "".join([*kept, line[at:]]), dropped


def _open_bracket(text: str) -> int | None:
    """Where the last bracket ``text`` leaves open starts, or None."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] in ")]":
            depth += 1
        elif text[i] in "([":
            if not depth:
                return i
            depth -= 1
    return None


def _labels(lines: Sequence[str], kinds: list[str]) -> None:
    """Give the labels of tracebacks and logs (``I get this error:``, ``Logs:``: a line of at most ``LABEL_WORDS``
    words ending in ``:`` right before one) the kind of what they label: they are left out with it."""
    for i, line in enumerate(lines):
        if kinds[i] != "prose" or not line.rstrip().endswith(":") or _words(line) > LABEL_WORDS:
            continue
        following = next((j for j in range(i + 1, len(lines)) if kinds[j] != "blank"), None)
        if following is not None and kinds[following] in ("trace", "log"):
            kinds[i] = kinds[following]


def _paragraphs(lines: Sequence[str], keep: Sequence[bool]) -> list[str]:
    """The kept lines as paragraphs: a blank or a left-out line ends one."""
    paragraphs: list[list[str]] = [[]]
    for line, kept in zip(lines, keep, strict=True):
        if kept and line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return ["\n".join(p) for p in paragraphs if p]


def _sentences(text: str) -> list[str]:
    return [sentence for sentence in _SENTENCE_END.split(text) if sentence.strip()]


def _words(text: str) -> int:
    return len(text.split())


def _questions_and_last(paragraphs: list[str], left: _Left) -> list[str]:
    """The sentences ending in ``?`` before the last paragraph, then that paragraph (the last not ending in ``:``);
    a last paragraph that is a list's item brings the list's other items and the line introducing them (``...:``)."""
    last = next((i for i in range(len(paragraphs) - 1, -1, -1) if not paragraphs[i].endswith(":")), None)
    last = len(paragraphs) - 1 if last is None else last
    first = last
    if _LIST_ITEM.match(paragraphs[last]):
        while first > 0 and _LIST_ITEM.match(paragraphs[first - 1]):
            first -= 1
        first -= first > 0 and paragraphs[first - 1].endswith(":")
    kept = []
    for i, paragraph in enumerate(paragraphs):
        whole = first <= i <= last
        sentences = [paragraph] if whole else _sentences(paragraph)
        for sentence in sentences:
            if whole or sentence.rstrip().endswith(_QUESTION_END):
                kept.append(sentence)
            else:
                left.words += _words(sentence)
    return kept


def _fit(pieces: list[str], count: Callable[[Sequence[str]], list[int]], room: int, left: _Left) -> list[str]:
    """``pieces`` when their tokens fit ``room``; else their questions and last sentences, up to ``FOCUS_WORDS`` words
    (with no paragraph to tell the question from its background, a sentence stands for one), cut from the front
    until they fit: the other sentences, then the questions, then the last one's first words. Token counts add up
    over text split at whitespace."""
    sentences = [s for piece in pieces for s in _sentences(piece)]
    tokens = count(sentences)
    if sum(tokens) <= room:
        return pieces
    tail, words = len(sentences) - 1, _words(sentences[-1])
    while tail > 0 and words + _words(sentences[tail - 1]) <= FOCUS_WORDS:
        tail, words = tail - 1, words + _words(sentences[tail - 1])
    kept = [i for i, s in enumerate(sentences) if i >= tail or s.rstrip().endswith(_QUESTION_END)]
    left.words += sum(_words(s) for i, s in enumerate(sentences) if i not in kept)
    sentences, tokens = [sentences[i] for i in kept], [tokens[i] for i in kept]
    while sum(tokens) > room and len(sentences) > 1:
        i = next((j for j, s in enumerate(sentences[:-1]) if not s.rstrip().endswith(_QUESTION_END)), 0)
        left.words += _words(sentences.pop(i))
        tokens.pop(i)
    if sum(tokens) <= room:
        return sentences
    words_of_last = sentences[0].split()
    per_word = count(words_of_last)
    total, start = sum(per_word), 0
    while total > room and start < len(words_of_last) - 1:
        total, start = total - per_word[start], start + 1
    left.words += start
    return [" ".join(words_of_last[start:])]


def focus_query(text: str, *, window: Callable[[], Window | None]) -> Focus:
    """``text`` focused on its question (the module's rules). ``window`` gives the embedding model's token count and
    how many tokens it reads (None: no window to fit); it is asked only for a focused text of over 128 characters."""
    lines = text.splitlines()
    kinds = _kinds(lines)
    _labels(lines, kinds)
    left = _Left(**{kind: kinds.count(kind) for kind in ("trace", "log", "code")}, urls=kinds.count("url"))
    cleaned = []
    for line, kind in zip(lines, kinds, strict=True):
        line, urls = _without_bare_urls(line) if kind == "prose" else (line, 0)
        left.urls += urls
        cleaned.append(line)
    prose = sum(_words(line) for line, kind in zip(cleaned, kinds, strict=True) if kind == "prose")
    code = sum(_words(line) for line, kind in zip(cleaned, kinds, strict=True) if kind == "code")
    if not prose + code:  # machine text alone: its error lines, else all of it
        return _without_prose(text, lines, left)
    drop_code = prose > 0 and prose + code > FOCUS_WORDS  # a short question keeps its code, as does code alone
    keep = [kind == "prose" or (kind == "code" and not drop_code) for kind in kinds]
    left.code = left.code if drop_code else 0
    paragraphs = _paragraphs(cleaned, keep)
    what, remedy = "its prose" if prose else "its code", "put it in the question"
    if prose and sum(map(_words, paragraphs)) > FOCUS_WORDS:
        before = len(paragraphs), sum(map(_words, paragraphs))
        paragraphs = _questions_and_last(paragraphs, left)
        if (len(paragraphs), sum(map(_words, paragraphs))) != before:
            what = "its questions and last paragraph"
    if prose and len("".join(paragraphs)) > _FITS_ANY_WINDOW and (model := window()) is not None:
        fitted = _fit(paragraphs, *model, left)
        if fitted is not paragraphs:
            paragraphs, what = [" ".join(fitted)], "its questions and last sentences"
            remedy = f"{remedy} (the query was past the {model[1]} tokens the embedding model reads)"
    if not left:
        return Focus(text)
    focused = "\n\n".join(paragraphs)
    return Focus(focused, _note(what, focused, left, remedy))


def _without_prose(text: str, lines: Sequence[str], left: _Left) -> Focus:
    """A query without prose: searched by its traceback's error lines, or as written when it holds none."""
    errors = [line.strip() for line in lines if _ERROR.match(line)]
    searched = "\n".join(errors)
    if not errors or searched == text.strip():
        return Focus(text)
    left.trace -= len(errors)
    left.code = 0
    return Focus(searched, _note("its error lines", searched, left, "ask about it in words"))


def _note(what: str, searched: str, left: _Left, remedy: str) -> str:
    """The ``metrics.degraded`` line: what was searched, what was left out, how to search what was."""
    return f"searched {what} ({_words(searched)} words); left out {left.described()}: to search any of it, {remedy}"
