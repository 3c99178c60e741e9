"""What a brace language's block finder skips and counts: comments, strings, JS/TS regex literals, braces, parens.

A ``/`` in JS/TS starts a regex literal (``/[{}]/g``, ``/"/``, ``/\\//``) only where an expression may start: at
the text's start, after an operator or punctuation that expects a value (``(``, ``,``, ``=``, ``:``, ``[``, ``!``,
``&``, ``|``, ``?``, ``{``, ``}``, ``;``, ``=>``, ...) or a keyword such as ``return`` or ``typeof``; after a name,
a number, ``)`` or ``]`` it divides. Without this, a literal's braces and quotes counted as code and ``/\\//``
opened a ``//`` comment. Rust's strings run over lines, its raw strings (``r#"..."#``) take no escapes, and its
``'`` opens a char literal (``'{'``, ``'\\''``, ``b'x'``) only where one closes, not a lifetime (``<'a>``, ``&'a str``);
Go's raw strings (backquotes) take no escapes. The other languages are scanned as before (no regex literals, no
parens).
"""

from __future__ import annotations

import re
from bisect import bisect_right

_COMMENTS = r"(//[^\n]*|/\*.*?(?:\*/|\Z))"
_STRINGS = r"(\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)"
#: comments, then strings (one line, but JS backquotes), and the braces
_SLASH_TOKENS = re.compile(_COMMENTS + "|" + _STRINGS + r"|[{}]", re.S)
#: JS/TS: also regex literals (one line; a ``/`` inside a ``[...]`` class does not end one) and parens
_JS_TOKENS = re.compile(_COMMENTS + "|" + _STRINGS + r"|(/(?:\\.|\[(?:\\.|[^\]\\\n])*\]|[^/\\\[\n])+/)|[{}()]", re.S)
#: Rust: comments, raw strings (``r#"..."#``, ``br"..."``), strings over lines, char literals (not lifetimes)
_RUST_TOKENS = re.compile(
    _COMMENTS
    + r'|((?<![\w])b?r(#*)".*?"\3|"(?:\\.|[^"\\])*"'
    + r"""|b?'(?:\\(?:u\{[0-9A-Fa-f_]{1,8}\}|x[0-9A-Fa-f]{2}|.)|[^'\\\n])')"""
    + r"|[{}]",
    re.S,
)
#: Go: comments, strings and runes, raw strings without escapes
_GO_TOKENS = re.compile(_COMMENTS + r"""|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`[^`]*`)|[{}]""", re.S)
_HASH_TOKENS = re.compile(r"((?<![\w$#{])#[^\n]*)|(\"(?:\\.|[^\"\\\n])*\"|'[^'\n]*')|[{}]")
_TOKENS = {"shell": _HASH_TOKENS, "powershell": _HASH_TOKENS, "rust": _RUST_TOKENS, "go": _GO_TOKENS}
JS_LANGUAGES = frozenset({"js", "ts"})
_COMMENT, _STRING, _REGEX = 1, 2, 3
#: what a value may follow (``>`` only as ``=>``: JSX's ``</p>`` is no regex; ``+``/``-`` not doubled: ``n++ / 2``)
_BEFORE_EXPRESSION = frozenset("(,=:[!&|?{};*%~^+-")
_BEFORE_EXPRESSION_WORDS = frozenset({"return", "typeof", "instanceof", "in", "of", "new", "delete", "void",
                                      "throw", "case", "do", "else", "yield", "await"})  # fmt: skip
_SPACE = frozenset(" \t\r\n")


class Scan:
    """A brace language's comments, strings and regex literals (``skipped``), each brace's depth and where each
    ``{`` closes; in JS/TS also each paren's depth and where each ``(`` closes."""

    def __init__(self, text: str, language: str) -> None:
        self.language = language
        js = language in JS_LANGUAGES
        tokens = _TOKENS.get(language, _JS_TOKENS if js else _SLASH_TOKENS)
        self.skipped: list[tuple[int, int, bool]] = []  # (start, end, is a comment)
        self.braces: list[int] = []  # each ``{``'s position, in order
        self.depths: list[int] = []  # the depth after each brace event
        self.events: list[int] = []
        self.closes: dict[int, int] = {}
        self.paren_events: list[int] = []
        self.paren_depths: list[int] = []  # the paren depth after each paren event
        self.paren_closes: dict[int, int] = {}
        stack: list[int] = []
        parens: list[int] = []
        position = 0
        while (match := tokens.search(text, position)) is not None:
            kind, position = match.lastindex, match.end()
            if kind == _REGEX and not self._value_may_start(text, match.start()):
                position = match.start() + 1  # a division
                continue
            if kind is not None:
                self.skipped.append((match.start(), match.end(), kind == _COMMENT))
                continue
            token = match[0]
            if token in "()":
                if token == "(":
                    parens.append(match.start())
                elif parens:
                    self.paren_closes[parens.pop()] = match.start()
                self.paren_events.append(match.start())
                self.paren_depths.append(len(parens))
                continue
            if token == "{":
                stack.append(match.start())
                self.braces.append(match.start())
            elif stack:
                self.closes[stack.pop()] = match.start()
            self.events.append(match.start())
            self.depths.append(len(stack))
        self.skipped_starts = [s for s, _, _ in self.skipped]

    def _value_may_start(self, text: str, slash: int) -> bool:
        """Whether an expression may start at ``slash`` (then it opens a regex literal), judged by the code before
        it, comments and blanks passed over (see the module doc)."""
        i, k = slash - 1, len(self.skipped) - 1
        while True:
            while i >= 0 and text[i] in _SPACE:
                i -= 1
            if k >= 0 and self.skipped[k][2] and self.skipped[k][1] == i + 1:
                i, k = self.skipped[k][0] - 1, k - 1
                continue
            break
        if i < 0:
            return True
        char = text[i]
        if char in "+-":
            return i == 0 or text[i - 1] != char
        if char == ">":
            return i > 0 and text[i - 1] == "="
        if char in _BEFORE_EXPRESSION:
            return True
        word_start = i
        while word_start > 0 and (text[word_start - 1].isalnum() or text[word_start - 1] in "_$"):
            word_start -= 1
        return text[word_start : i + 1] in _BEFORE_EXPRESSION_WORDS

    def depth(self, position: int) -> int:
        """The brace depth at ``position``."""
        i = bisect_right(self.events, position - 1) - 1
        return self.depths[i] if i >= 0 else 0

    def paren_depth(self, position: int) -> int:
        """The paren depth at ``position`` (JS/TS; 0 in the other languages)."""
        i = bisect_right(self.paren_events, position - 1) - 1
        return self.paren_depths[i] if i >= 0 else 0

    def skipped_at(self, position: int) -> tuple[int, int, bool] | None:
        """The comment, string or regex literal holding ``position``, if any."""
        i = bisect_right(self.skipped_starts, position) - 1
        return self.skipped[i] if i >= 0 and position < self.skipped[i][1] else None

    def first_open(self, start: int, limit: int, *, paren_depth: int | None = None) -> int | None:
        """The first ``{`` from ``start`` before ``limit``; with ``paren_depth``, the first one not inside parens
        deeper than that (a parameter's default or type is not a body)."""
        i = bisect_right(self.braces, start - 1)
        while paren_depth is not None and i < len(self.braces) and self.braces[i] < limit:
            if self.paren_depth(self.braces[i]) <= paren_depth:
                break
            i += 1
        return self.braces[i] if i < len(self.braces) and self.braces[i] < limit else None
