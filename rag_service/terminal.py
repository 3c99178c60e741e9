"""Text for a person's terminal: control characters from documents shown, never obeyed.

Stored text keeps what its document holds, and a document's author chooses it: ESC and CSI sequences clear
the screen, recolour or conceal text (``ESC[8m`` hides from the reader an instruction an agent still reads),
OSC sets the window title or, in terminals that honour OSC 52, the clipboard. What the CLI prints for humans
passes through ``visible_controls``: every C0 and C1 control character but newline and tab (and DEL) becomes
its ``\\xNN`` escape as text, and the bidirectional embeddings, overrides and isolates (U+202A-E, U+2066-9, as
in "Trojan Source") their ``\\uNNNN`` escape: a terminal would reorder the line around them, so that what a
reader sees is not the text (right-to-left script needs none of them to show). JSON output needs none of it
(``json.dumps`` escapes C0; C1 stay characters in strings, for programs to read).
"""

from __future__ import annotations

_KEPT = {"\n", "\t"}

#: each control character (C0, DEL, C1) but newline and tab, and each bidi override -> its escape, as text
_VISIBLE = {
    code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(code) not in _KEPT
} | {code: f"\\u{code:04x}" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def visible_controls(text: str) -> str:
    """``text`` with its control characters but newline and tab, and its bidirectional overrides, written as
    ``\\x1b``-style escapes."""
    return text.translate(_VISIBLE)


#: every control character (C0 with newline and tab, DEL, C1) and bidi override -> its escape: a name in one line
_VISIBLE_ALL = _VISIBLE | {ord(kept): f"\\x{ord(kept):02x}" for kept in _KEPT}


def one_line(name: str) -> str:
    """``name`` (a collection's, a source's) with every control character, newline and tab too, and every bidi
    override written as its ``\\x0a``-style escape: it stays on the one line that shows it, and a terminal obeys
    none of it."""
    return name.translate(_VISIBLE_ALL)
