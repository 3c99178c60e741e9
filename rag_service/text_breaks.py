"""Where plain text may be cut: the breaks the recursive split cuts at and a result's window moves its edges to.

Chinese and Japanese end a sentence with a full-width mark (``。！？．；``) and no space after it, and separate
clauses with ``，`` or ``、``: those are breaks without white space. ``…`` ends a sentence only after a character of
such a script ("完成…接下来"): English writes "Coming soon…Most" and "wait… what" inside sentences, and English text
is cut exactly where it was. Latin marks still need white space after them ("3.14" is no end).
"""

from __future__ import annotations

import re

import regex

#: the letters of the scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, Han (its
#: strokes, extensions and compatibility forms) (a regex character class's body; the keyword text pairs them)
NO_SPACE_SCRIPTS = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31c0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0003134f"
)
#: characters of those scripts' text: their letters, CJK radicals and punctuation, the full-width forms and
#: half-width katakana
NO_SPACE_LETTERS = NO_SPACE_SCRIPTS + "\u2e80-\u2fdf\u3000-\u303f\uff00-\uffef"
#: what may close a sentence after its mark: quotes and brackets; after a full-width mark CJK ones too (」』）】〕〉》)
_CLOSERS = "\"'”’)\\]"
WIDE_CLOSERS = _CLOSERS + "」』）】〕〉》"
#: a full-width sentence mark (``．`` not between full-width digits: ``３．１４``)
_WIDE_END = "[。！？；]|．(?![０-９])"

#: a line break, a blank line, and the white space that follows
PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
#: a line break and the white space that follows
LINE_BREAK = re.compile(r"\n\s*")
#: a sentence's end in Chinese or Japanese: full-width marks (or ``…`` after a character of a script without spaces),
#: their closers and any white space (none is needed)
WIDE_SENTENCE_END = re.compile(rf"(?:(?:{_WIDE_END})+|(?<=[{NO_SPACE_LETTERS}])…+)[{WIDE_CLOSERS}]*\s*")
#: a sentence's end: a Latin mark, closing quotes or brackets, then white space; or a ``WIDE_SENTENCE_END``
SENTENCE_END = re.compile(rf"[.!?][{_CLOSERS}]*\s+|{WIDE_SENTENCE_END.pattern}")
#: a clause's end in Chinese or Japanese (``，``, ``、``) and any white space after it
CLAUSE_BREAK = re.compile(r"[，、]\s*")
#: white space between words
WORD_BREAK = re.compile(r"\s+")


def grapheme_starts(text: str) -> set[int]:
    """The UTF-8 byte offsets in ``text`` where a grapheme cluster (``\\X``, Unicode's extended one) starts: the cuts
    that split nothing a reader sees as one character (a decomposed accent, a ZWJ emoji, a Thai vowel sign)."""
    starts, at = set(), 0
    for cluster in regex.findall(r"\X", text):
        starts.add(at)
        at += len(cluster.encode("utf-8"))
    return starts
