"""Minified code is refused as the README promises (a bundle of 15,000 characters on one line, a ``.min.js``
name), as a GeneratedFileError (a run reports it skipped, not failed), while ordinary code with one long line (a
string of prose, a data table) is indexed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_service.errors import DocumentReadError, GeneratedFileError
from rag_service.ingest.loaders import load_document

MB = 1_000_000
#: audit 47's bundle.min.js: 15,460 characters of dense code on one line
BUNDLE = "".join(f"function a{i}(b,c){{return b*{i}+c}}var x{i}=a{i}(1,2);" for i in range(300))[:15_460] + "\n"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["bundle.js", "bundle.min.js"])
def test_a_one_line_bundle_under_the_line_limit_is_refused(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path / name, BUNDLE)
    with pytest.raises(GeneratedFileError) as info:
        load_document(path, max_bytes=MB)
    assert isinstance(info.value, DocumentReadError), "a caller catching read errors still catches it"
    assert str(info.value) == (
        f"{path} has 100% of its text in dense lines of over 1,000 characters (the longest: 15,460, line 1): "
        "minified or generated code is not indexed; index its source instead"
    )


@pytest.mark.parametrize("name", ["tiny.min.js", "site.min.css", "App.MIN.mjs"])
def test_a_minified_name_is_refused_whatever_the_size(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path / name, "var a=1;\n")
    with pytest.raises(GeneratedFileError, match=r"is named as minified code \(\.min\): it is not indexed; index its"):
        load_document(path, max_bytes=MB)


def test_a_minified_style_sheet_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "site.css", "".join(f".c{i}{{margin:0;color:#{i:03x}}}" for i in range(600)) + "\n")
    with pytest.raises(GeneratedFileError, match=r"dense lines of over 1,000 characters"):
        load_document(path, max_bytes=MB)


def test_ordinary_code_with_one_long_line_is_indexed(tmp_path: Path) -> None:
    prose = " ".join(["The pelican cluster needs more widget connections during the spring migration."] * 100)
    table = ", ".join(str(n * 37 % 1000) for n in range(2_500))
    for name, text in [
        ("messages.py", f'HELP = "{prose}"\n\n\ndef help_text() -> str:\n    return HELP\n'),
        ("table.py", f"TABLE = [{table}]\n\n\ndef lookup(i: int) -> int:\n    return TABLE[i]\n"),
        ("app.js", "\n".join(f"function f{i}(a, b) {{ return a + b * {i}; }}" for i in range(400)) + "\n"),
    ]:
        path = _write(tmp_path / name, text)
        assert load_document(path, max_bytes=MB).text == text, name
