"""The ``code`` strategy on Go and Rust as a team indexes them (audit 58's defects), one test per rule."""

from __future__ import annotations

import pytest

from rag_service.ingest.code_scan import Scan
from tests.unit.test_code_chunker import chunks


def _paths(source: str, text: str, **sizes: int) -> list[tuple[str, str]]:
    """Each chunk's header path and first line (stripped)."""
    return [(c.header_path, c.content.split("\n", 1)[0].strip()) for c in chunks(source, text, **sizes)]


@pytest.mark.parametrize(
    ("code", "hidden"),
    [
        ("struct S<'a> { s: &'a str }", False),
        ("fn f<'a, 'b>(x: &'a str) -> &'b str { x }", False),
        ("let c = '{';", True),
        ("let c = b'{';", True),
        ("let c = '\\u{7B}'; let d = '{';", True),
        ("let q = '\\''; let o = '{';", True),
    ],
)
def test_rust_lifetimes_are_no_char_literals(code: str, hidden: bool) -> None:
    """A lifetime's ``'`` paired with the next one as a char literal (``'a> { s: &'``), hiding the brace between:
    the block holding it closed at the wrong ``}``. A char literal's brace is still no brace."""
    scan = Scan(code, "rust")
    braces = code.count("{") - sum(code[s:e].count("{") for s, e, _ in scan.skipped)
    assert braces == (0 if hidden else 1), scan.skipped


_RUST_STRINGS = '''\
/// Raw, with a lone quote and a brace.
fn raw() -> &'static str {
    r#"a " {"#
}

/// Raw, no hashes, a backslash last.
fn path() -> &'static str {
    r"C:\\"
}

/// A string over two lines.
fn multi() -> &'static str {
    "first line {
second line"
}

/// After them.
fn after() -> u32 {
    1
}
'''


def test_rust_raw_and_multi_line_strings_hold_no_code() -> None:
    """A raw string's quotes and a string over several lines were read as code: their braces counted, and the
    block swallowed the next function."""
    assert _paths("raw.rs", _RUST_STRINGS) == [
        ("raw > raw", "/// Raw, with a lone quote and a brace."),
        ("raw > path", "/// Raw, no hashes, a backslash last."),
        ("raw > multi", "/// A string over two lines."),
        ("raw > after", "/// After them."),
    ]


def test_go_raw_strings_have_no_escapes() -> None:
    """A Go raw string takes no backslash escapes: `` `\\` `` ended there, not at the next backquote."""
    code = "var sep = `\\`\nfunc f() {\n\tg(`}`)\n}\n"
    scan = Scan(code, "go")
    assert [code[s:e] for s, e, _ in scan.skipped] == ["`\\`", "`}`"]
