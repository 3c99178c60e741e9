"""A document's extractive summary: its most central prose sentences by LexRank, leaning to the opening.

Only prose counts: YAML front matter, fenced code, header lines (ATX and setext; these four as the
markdown scanner, ``rag_service.markdown_lines``, finds them), tables, HTML lines and link lists are
left out; markdown links keep their text and inline code its content (backticks and asterisks go).
A candidate must read like a sentence: it ends with ``.``, ``!`` or ``?`` (or a full-width ``。！？``), has
``MIN_WORDS`` to ``MAX_WORDS`` words, is mostly letters (or marks on them), and has no glued-together text
(``review.Instructions``, a scraped table's cells) and no URL or template braces. A sentence mostly in a script
written without spaces (Chinese, Japanese, Thai) is measured by its characters instead (``MIN_CHARS`` to
``MAX_CHARS``: a CJK sentence is one regex word), its words for LexRank are character bigrams, and no space
follows its ``。`` in the summary. Thai has no sentence mark: a Thai paragraph's sentences are the runs between
its spaces, and one ends at its last letter. The first candidate always opens the summary
and LexRank's centrality of the others is weighted by position (``LEAD_WEIGHT``): a documentation page
says what it is about in its opening prose, while the most central sentence of a long page is often a
detail that repeats its vocabulary (the README's summary was three such details). Sentences come
from the ``sentence`` strategy's splitter, words from a regex; the LexRank graph is sumy's, computed in
``ingest.lexrank`` (sumy's own summarizers import NLTK: ~2.4 s in every process). LexRank compares every
pair of sentences, so only the first ``MAX_SENTENCES`` candidates are ranked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from rag_service.errors import LLMError
from rag_service.ingest.lexrank import central_sentences
from rag_service.ingest.sentence import sentence_spans
from rag_service.knobs import SUMMARY_SENTENCES
from rag_service.llm import ChatModel, summarize
from rag_service.markdown_lines import ANCHOR_LINE, LineKind, ScanRules, scan_lines
from rag_service.text_breaks import NO_SPACE_LETTERS, WIDE_CLOSERS

#: prose sentences ranked at most (LexRank is quadratic in them)
MAX_SENTENCES = 200
#: the generated key marking an extractive summary made because the LLM failed: the LLM is asked again
RETRY = "summary_retry"
#: a summary (extractive or the LLM's) is cut at a word boundary past this many characters: three sentences
#: fit (the LLM's are asked for in 200 tokens, ~800 characters), and a stored summary stays small
MAX_SUMMARY_CHARS = 800
#: sentences with fewer words are not summary material ("See below.", list stubs)
MIN_WORDS = 5
#: longer "sentences" are run-ons: scraped tables, examples pasted without punctuation
MAX_WORDS = 80
#: the same bounds for a sentence in a script written without spaces, in its non-space characters (a Chinese word
#: is one to three characters)
MIN_CHARS = 10
MAX_CHARS = 200
#: centrality is divided by ``1 + position / LEAD_WEIGHT`` (the 11th candidate counts half); the 1st is always kept
LEAD_WEIGHT = 10.0

# tables, HTML, images, footnotes, directives, link definitions, MyST targets "(label)=", comment-like
# "# " lines that are no header ("    # comment" in indented code), and LaTeX lines that open with a command
# ("\\begin{abstract}"): glued to the prose after them, they made every sentence of a LaTeX file fail the
# prose test, so LaTeX documents got no summary
_SKIPPED_LINE = re.compile(
    r"^\s*(#{1,6}\s|\||<|!\[|\[\^|:::|\.\. |\[[^\]]+\]:\s|\\[A-Za-z@]|(?:" + ANCHOR_LINE.pattern + r")\s*$)"
)
#: fences inside list items ("  - ```shell", "    ```bash") are code too: their lines are not prose
_PROSE_RULES = ScanRules(list_fences=True)
#: lines of these kinds are never prose
_STRUCTURE = frozenset({LineKind.HEADER, LineKind.FENCE, LineKind.CODE, LineKind.FRONT_MATTER})
_INLINE = re.compile(r"`+|\*{1,3}|\{[\w:-]+\}(?=`)")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_RULE = re.compile(r"^\s*(=+|-+)\s*$")  # a horizontal rule or an underline with no text above
_WORD = re.compile(r"\w+")
# what prose does not contain: words glued by punctuation ("review.Instructions:1."), URLs, templates, arrows
_NOT_PROSE = re.compile(r"[a-z)][.:;!?][A-Z0-9]|://|\{\{|\}\}|[→←|]|\\[a-z]")
# at least this share of a sentence's non-space characters are letters
_MIN_LETTER_SHARE = 0.8
#: a full-width sentence mark and its closers at the end (no space follows it in a summary either)
_WIDE_END = re.compile(rf"[。！？][{WIDE_CLOSERS}]*$")
#: a sentence's end: a Latin mark, a full-width one, or a Thai or Lao letter (these scripts have no sentence mark)
_SENTENCE_END = re.compile(rf"[.!?][\"')\]]*$|{_WIDE_END.pattern}|[\u0e00-\u0eff]$")
_NO_SPACE = re.compile(f"[{NO_SPACE_LETTERS}]")
_NO_SPACE_RUN = re.compile(f"[{NO_SPACE_LETTERS}]+")
#: a space between Thai (or Lao) letters: where a Thai sentence ends
_THAI_SPACE = re.compile(r"(?<=[\u0e00-\u0eff])\s+(?=[\u0e00-\u0eff])")
#: what PostgreSQL cannot store (``jsonb`` refuses ``\u0000``; a lone surrogate is no UTF-8 character)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def prose(text: str) -> str:
    """The prose lines of a (markdown or plain) document, one paragraph per blank-line block."""
    kept: list[str] = []
    for scanned in scan_lines(text, _PROSE_RULES):
        line = text[scanned.start : scanned.end]
        if scanned.kind is LineKind.SETEXT_UNDERLINE:  # "Title\n=====": the line above is the header
            kept[-1] = ""
        if (
            scanned.kind in _STRUCTURE
            or scanned.kind is LineKind.SETEXT_UNDERLINE
            or _SKIPPED_LINE.match(line)
            or _RULE.match(line)
            or _is_link_list_item(line)
        ):
            kept.append("")
            continue
        line = _BULLET.sub("", line)
        kept.append(_INLINE.sub("", _without_links(line, keep_text=True)[0]).strip())
    return "\n".join(kept)


def _is_link_list_item(line: str) -> bool:
    """A line that is (nearly) only links: a table of contents, "see also", a nav bar."""
    rest, linked = _without_links(_BULLET.sub("", line), keep_text=False)
    return linked and len(_WORD.findall(rest)) < 3


def _without_links(line: str, *, keep_text: bool) -> tuple[str, bool]:
    """``line`` with each markdown link ``[text](target)`` or image ``![text](target)`` replaced by its text
    (``keep_text``) or dropped, and whether it had one.

    What ``re.sub`` of ``!?\\[([^\\]]*)\\]\\([^)]*\\)`` gives, in linear time: that regex scanned from every ``[`` to
    the next ``]`` (a line of 40,000 ``[`` and no ``]`` took 14 s); every ``[`` before one ``]`` fails there at once.
    """
    kept: list[str] = []
    done = pos = 0
    while (opener := line.find("[", pos)) >= 0 and (closer := line.find("]", opener + 1)) >= 0:
        pos = closer + 1
        if not line.startswith("(", pos):
            continue
        end = line.find(")", pos + 1)
        if end < 0:  # no later "[" finds a ")" either
            break
        start = opener - 1 if opener > done and line[opener - 1] == "!" else opener
        kept += [line[done:start], line[opener + 1 : closer] if keep_text else ""]
        done = pos = end + 1
    kept.append(line[done:])
    return "".join(kept), done > 0


def _is_letter(character: str) -> bool:
    """A letter or a mark on one (a Thai or Indic vowel sign, a decomposed accent)."""
    return character.isalpha() or unicodedata.category(character).startswith("M")


def _unspaced(sentence: str) -> bool:
    """Whether most letters of ``sentence`` are of a script written without spaces (Chinese, Japanese, Thai)."""
    letters = [c for c in sentence if _is_letter(c)]
    return 2 * sum(_NO_SPACE.match(c) is not None for c in letters) > len(letters)


def _is_prose_sentence(sentence: str) -> bool:
    """Whether ``sentence`` reads like a sentence of prose (see the module docstring)."""
    visible = [c for c in sentence if not c.isspace()]
    if _unspaced(sentence):
        fits = MIN_CHARS <= len(visible) <= MAX_CHARS
    else:
        fits = MIN_WORDS <= len(_WORD.findall(sentence)) <= MAX_WORDS
    if not fits or not _SENTENCE_END.search(sentence) or _NOT_PROSE.search(sentence):
        return False
    return sum(_is_letter(c) for c in visible) >= _MIN_LETTER_SHARE * len(visible)


def _terms(sentence: str) -> list[str]:
    """The words LexRank compares: ``_WORD``'s, and the character bigrams of the letters of a script without spaces."""
    terms = _WORD.findall(_NO_SPACE_RUN.sub(" ", sentence))
    for run in _NO_SPACE_RUN.findall(sentence):  # runs of letters: punctuation (，。) splits them
        for letters in "".join(c if _is_letter(c) or c.isdigit() else " " for c in run).split():
            terms.extend(letters[i : i + 2] for i in range(max(len(letters) - 1, 1)))
    return terms


def _sentences(text: str) -> list[str]:
    found = []
    for start, end in sentence_spans(text, 0, len(text)):
        sentence = " ".join(text[start:end].split())
        for part in _THAI_SPACE.split(sentence):
            if _is_prose_sentence(part):
                found.append(part)
    return found


def extractive_summary(text: str, *, sentences: int = SUMMARY_SENTENCES.default) -> str:
    """The ``sentences`` most central prose sentences of ``text`` in their order, or ``""`` if none.

    A document with at most ``sentences`` prose sentences is its own summary. Deterministic.
    """
    if sentences <= 0:
        return ""
    found = _sentences(prose(text))[:MAX_SENTENCES]
    if len(found) > sentences:
        picked = central_sentences(found, sentences, words=_terms, lead_weight=LEAD_WEIGHT)
        found = [s for s in found if s in picked][:sentences]
    return bounded(_joined(found))


def _joined(sentences: list[str]) -> str:
    """The sentences with a space between two, none after a full-width mark (Chinese, Japanese)."""
    spaced = [s if _WIDE_END.search(s) else s + " " for s in sentences[:-1]]
    return "".join([*spaced, *sentences[-1:]])


def bounded(summary: str) -> str:
    """``summary`` cut at the last word boundary within ``MAX_SUMMARY_CHARS``, marked `` …``, when longer."""
    if len(summary) <= MAX_SUMMARY_CHARS:
        return summary
    return summary[:MAX_SUMMARY_CHARS].rsplit(" ", 1)[0] + " …"


def llm_summary(chat: ChatModel, text: str) -> str:
    """``chat``'s summary of ``text`` as it can be stored: NUL and lone surrogates dropped (our own derived text, so
    cleaned rather than refused) and ``bounded``; ``LLMError`` when nothing is left."""
    summary = " ".join(_UNSTORABLE.sub("", summarize(chat, text)).split())
    if not summary:
        raise LLMError(f"{chat.name} answered a summary with no storable text")
    return bounded(summary)


class SummaryWriter:
    """Writes one run's document summaries: by the LLM when one is configured, else extractive.

    A summary depends on its document's text only: a stored LLM summary of the same text is kept without a call
    (a re-chunk, ``reindex --all``), unless asked ``again`` (``rag metadata build``), and kept too when the LLM
    fails then. Any other LLM failure (timeout, error status, empty answer) gives that document the extractive
    summary marked ``summary_retry``, whose LLM summary the next run asks for, also of unchanged text. After
    ``MAX_CONSECUTIVE_FAILURES`` failures in a row the run stops asking the LLM, so a dead endpoint costs a few
    timeouts, not one per document. ``degraded()`` says what happened, for the run's report.
    """

    MAX_CONSECUTIVE_FAILURES = 3

    def __init__(self, *, sentences: int, chat: ChatModel | None = None) -> None:
        self.sentences = sentences
        self.chat = chat
        self.failures = 0
        self.retries = 0  # extractive summaries marked for the LLM's next try
        self.kept = 0  # stored LLM summaries kept when the LLM failed to renew them
        self._consecutive = 0
        self._first_reason = ""
        self._not_asked = 0  # documents the run did not ask once it stopped asking

    @property
    def asks_llm(self) -> bool:
        """Whether the next summary is asked of the LLM (one is configured and the run has not stopped asking)."""
        return self.chat is not None and self._consecutive < self.MAX_CONSECUTIVE_FAILURES

    def metadata(self, text: str, *, stored: Mapping[str, Any] | None = None, again: bool = False) -> dict[str, Any]:
        """The generated keys of a document of ``text``: ``summary`` and ``summary_source`` (``extractive`` or
        ``llm:<model>``), and ``summary_retry: true`` where the LLM failed; ``{}`` when there is no summary.

        ``stored``: the metadata stored for this same text (None when the text is new or changed); ``again``: ask
        the LLM even where ``stored`` holds its summary (``rag metadata build``).
        """
        kept = _llm_keys(stored)
        if kept is not None and not again:
            return kept
        asks = self.chat is not None and bool(text.strip()) and (stored is None or again or bool(stored.get(RETRY)))
        chat = self.chat if asks and self.asks_llm else None
        self._not_asked += asks and chat is None
        if chat is not None:
            try:
                summary = llm_summary(chat, text)
            except LLMError as exc:
                self.failures += 1
                self._consecutive += 1
                self._first_reason = self._first_reason or str(exc)
            else:
                self._consecutive = 0
                return {"summary": summary, "summary_source": chat.name}
        if asks and kept is not None:
            self.kept += 1
            return kept
        if asks:
            self.retries += 1
        summary = extractive_summary(text, sentences=self.sentences)
        generated: dict[str, Any] = {"summary": summary, "summary_source": "extractive"} if summary else {}
        return {**generated, RETRY: True} if asks else generated

    def degraded(self) -> list[str]:
        """One line per problem, e.g. ``summary: the LLM failed for 3 documents ...``; empty when none."""
        if not self.failures:
            return []
        stopped = f" and was not asked for {self._not_asked} more in this run" if self._not_asked else ""
        outcomes = []
        if self.retries:
            outcomes.append(
                f"{self.retries} document(s) got extractive summaries; the LLM is asked again for them at their "
                "next ingest or `rag metadata build`"
            )
        if self.kept:
            outcomes.append(f"{self.kept} kept their stored LLM summary")
        return [
            f"summary: the LLM failed for {self.failures} document(s){stopped}; {'; '.join(outcomes)} "
            f"(first error: {self._first_reason})"
        ]


def _llm_keys(stored: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The LLM summary in ``stored`` (``bounded``: one stored before the cut may be longer), or None."""
    source, summary = (stored or {}).get("summary_source"), (stored or {}).get("summary")
    if not isinstance(source, str) or not source.startswith("llm:") or not isinstance(summary, str) or not summary:
        return None
    return {"summary": bounded(summary), "summary_source": source}
