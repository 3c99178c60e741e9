"""Where plain text may be cut: the breaks the recursive split cuts at and a result's window moves its edges to."""

from __future__ import annotations

import re

#: a line break, a blank line, and the white space that follows
PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
#: a line break and the white space that follows
LINE_BREAK = re.compile(r"\n\s*")
#: a sentence's end: its mark, closing quotes or brackets, then white space
SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*\s+")
#: white space between words
WORD_BREAK = re.compile(r"\s+")
