"""``visible_controls``: what the CLI prints for people shows control characters instead of running them."""

from __future__ import annotations

from rag_service.terminal import visible_controls


def test_every_control_but_newline_and_tab_becomes_visible_text() -> None:
    assert visible_controls("a\tb\nc") == "a\tb\nc"
    assert visible_controls("\x1b]0;title\x07\x1b[2J\r\x00\x7f\x9b\x85") == (
        "\\x1b]0;title\\x07\\x1b[2J\\x0d\\x00\\x7f\\x9b\\x85"
    )
    assert visible_controls("Руководство — ü 中文 \u00a0") == "Руководство — ü 中文 \u00a0"  # printable text stays
    controls = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(c) not in "\n\t"]
    assert all(len(visible_controls(c)) == 4 and visible_controls(c).startswith("\\x") for c in controls)


def test_bidirectional_overrides_become_visible_and_right_to_left_text_stays() -> None:
    """U+202E reversed what a terminal shows of a passage ("Trojan Source"): the reader saw other text than the
    one an agent reads."""
    assert visible_controls("access = \u202euser\u2066 admin\u2069") == "access = \\u202euser\\u2066 admin\\u2069"
    overrides = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
    assert all(visible_controls(c) == f"\\u{ord(c):04x}" for c in overrides)
    arabic_hebrew = "مرحبا بالعالم שלום \u200f\u200e"  # the marks an author types (RLM, LRM) change no order
    assert visible_controls(arabic_hebrew) == arabic_hebrew
