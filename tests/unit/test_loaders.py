"""Loading files: decoding, normalisation, HTML text, titles, one-line errors, directory discovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_service.errors import DocumentReadError, UnsupportedFileError
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.loaders import SUPPORTED_SUFFIXES, discover, html_to_text, load_document, text_title
from tests.unit.test_chunker_properties import assert_chunks_valid

MB = 1_000_000


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def one_line_error(err: pytest.ExceptionInfo[Exception]) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_markdown_title_bom_and_mixed_line_endings(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbf```\r\n# Not a title\r\n```\r\n# Real Title #\r\n\rBody line one.\rBody line two.\n"
    doc = load_document(write(tmp_path / "guide.md", raw), max_bytes=MB)
    assert doc.text == "```\n# Not a title\n```\n# Real Title #\n\nBody line one.\nBody line two.\n"
    assert doc.title == "Real Title"
    assert doc.source == str(tmp_path / "guide.md")


def test_offsets_refer_to_the_normalised_text(tmp_path: Path) -> None:
    raw = ("# Head\r\n\r\n" + "Windows line.\r\nOld Mac line.\rUnix line.\n" * 30).encode()
    doc = load_document(write(tmp_path / "mixed.md", raw), max_bytes=MB)
    assert "\r" not in doc.text
    for strategy in ("markdown", "recursive", "sentence", "token"):
        chunked = make_chunker(strategy, chunk_size=100 if strategy != "token" else 30).split(doc.text)
        assert_chunks_valid(doc.text, chunked)
        assert len(chunked.chunks) > 1


@pytest.mark.parametrize("name", ["notes.txt", "notes.text", "notes.rst", "NOTES.TXT"])
def test_plain_text_titles_are_the_stem(tmp_path: Path, name: str) -> None:
    doc = load_document(write(tmp_path / name, "# Looks like a header\nbut this is text"), max_bytes=MB)
    assert doc.title == Path(name).stem
    assert doc.text == "# Looks like a header\nbut this is text"


def test_markdown_without_h1_uses_the_stem(tmp_path: Path) -> None:
    assert load_document(write(tmp_path / "faq.mdx", "## Only h2\ntext"), max_bytes=MB).title == "faq"


def test_html_text_and_title(tmp_path: Path) -> None:
    html = """<!doctype html><html><head><title> My  Page &amp; More </title>
<style>p { color: red }</style><script>var x = "<p>no</p>";</script></head>
<body><h1>Heading</h1><p>First   paragraph
with a line break.</p><div><p>Second &lt;b&gt; paragraph</p></div>
<ul><li>one</li><li>two</li></ul><p>a<br>b</p>
<table><tr><td>c1</td><td>c2</td></tr><tr><td>c3</td></tr></table><pre>  keep
   spacing</pre><!-- comment --></body></html>"""
    doc = load_document(write(tmp_path / "page.html", html), max_bytes=MB)
    assert doc.title == "My Page & More"
    assert doc.text == (
        "# Heading\n\nFirst paragraph with a line break.\n\nSecond <b> paragraph\n\none\ntwo\n\na\nb\n\n"
        "c1 c2\nc3\n\n```\n  keep\n   spacing\n```"
    )


def test_html_pre_is_fenced_verbatim_and_only_headings_are_headers() -> None:
    html = (
        "<h1>Setup</h1><pre># install the package\npip install wombat\n# run it</pre><p>After the block.</p>"
        "<p># of ferrets per cage: 3</p><p>```python</p><pre>\ndef f():\n    return 1\n</pre>"
        "<h2>Next</h2><p>Last.</p>"
    )
    text, _ = html_to_text(html)
    assert "```\n# install the package\npip install wombat\n# run it\n```" in text
    assert "```\ndef f():\n    return 1\n```" in text  # indentation kept, the newline after <pre> dropped
    assert "\n\\# of ferrets per cage: 3\n" in text and "\n\\```python\n" in text
    chunked = make_chunker("html", chunk_size=80, chunk_overlap=0, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, chunked)
    assert {c.header_path for c in chunked.chunks} == {"Setup", "Setup > Next"}
    after = next(c for c in chunked.chunks if "After the block" in c.content)
    assert after.header_path == "Setup"


def test_html_pre_with_a_fence_inside_keeps_it_code() -> None:
    text, _ = html_to_text("<pre>```\n# not a header\n```</pre><p>Tail</p>")
    assert text == "````\n```\n# not a header\n```\n````\n\nTail"
    assert [c.header_path for c in make_chunker("markdown").split(text).chunks] == [""]


def test_html_without_closing_head_or_title(tmp_path: Path) -> None:
    text, title = html_to_text("<html><head><meta charset=utf-8><body><p>Visible</p>")
    assert (text, title) == ("Visible", "")
    doc = load_document(write(tmp_path / "plain.htm", "<p>Visible</p>"), max_bytes=MB)
    assert doc.title == "plain"


def test_nul_bytes_mean_binary(tmp_path: Path) -> None:
    path = write(tmp_path / "data.txt", b"text\x00more")
    with pytest.raises(DocumentReadError) as err:
        load_document(path, max_bytes=MB)
    assert one_line_error(err) == f"{path} contains NUL bytes, so it looks binary; only text files are indexed"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
def test_utf16_and_utf32_with_a_byte_order_mark_are_decoded(tmp_path: Path, codec: str) -> None:
    text = "# Caf\u00e9 \U0001f40d\r\n\r\nTides at the harbour.\r\n"
    data = text.encode(codec)
    if codec.endswith("-be"):  # the plain codec writes a little-endian BOM itself; a big-endian one does not
        data = ("\ufeff" + text).encode(codec)
    doc = load_document(write(tmp_path / "notes.md", data), max_bytes=MB)
    assert doc.text == "# Caf\u00e9 \U0001f40d\n\nTides at the harbour.\n" and doc.title == "Caf\u00e9 \U0001f40d"
    chunked = make_chunker("markdown", chunk_size=200).split(doc.text)
    assert_chunks_valid(doc.text, chunked)  # offsets refer to the decoded text


def test_a_utf16_bom_without_any_nul_byte_is_not_taken_for_utf16(tmp_path: Path) -> None:
    path = write(tmp_path / "latin.txt", b"\xff\xfe not utf-8 at all, sorry")  # Latin-1 "ÿþ", not wide text
    with pytest.raises(DocumentReadError, match=r"is not valid UTF-8 \(byte 0xff at offset 0\)"):
        load_document(path, max_bytes=MB)


def test_broken_utf16_names_the_encoding_and_the_fix(tmp_path: Path) -> None:
    path = write(tmp_path / "odd.txt", b"\xff\xfea\x00b")  # a BOM, then an odd number of bytes
    with pytest.raises(DocumentReadError) as err:
        load_document(path, max_bytes=MB)
    message = one_line_error(err)
    assert message.startswith(f"{path} starts with a UTF-16 byte-order mark but is not valid UTF-16")
    assert message.endswith("convert it to UTF-8, e.g. iconv -f utf-16 -t utf-8")


def test_invalid_utf8_names_the_offset(tmp_path: Path) -> None:
    path = write(tmp_path / "latin.md", "caf\xe9 ok".encode("latin-1"))
    with pytest.raises(DocumentReadError) as err:
        load_document(path, max_bytes=MB)
    message = one_line_error(err)
    assert str(path) in message and "offset 3" in message and "0xe9" in message and "convert it to UTF-8" in message


def test_invalid_utf8_offset_counts_the_bom(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError, match="offset 5"):
        load_document(write(tmp_path / "bom.txt", b"\xef\xbb\xbfab\xff"), max_bytes=MB)


def test_too_large_names_size_limit_and_setting(tmp_path: Path) -> None:
    path = write(tmp_path / "big.txt", "x" * 2048)
    with pytest.raises(DocumentReadError) as err:
        load_document(path, max_bytes=1000)
    message = one_line_error(err)
    assert str(path) in message and "2,048 bytes" in message and "1,000" in message
    assert "RAG_MAX_FILE_BYTES" in message
    assert load_document(path, max_bytes=2048).text == "x" * 2048


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError) as err:
        load_document(tmp_path / "gone.md", max_bytes=MB)
    assert "gone.md" in one_line_error(err) and "does not exist" in str(err.value)
    (tmp_path / "dir.md").mkdir()
    with pytest.raises(DocumentReadError, match="is a directory"):
        load_document(tmp_path / "dir.md", max_bytes=MB)


def test_special_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(DocumentReadError, match="not a regular file"):
        load_document(fifo, max_bytes=MB)
    assert discover([fifo]).skipped == [(fifo, "not a regular file")] and discover([fifo]).files == []


@pytest.mark.parametrize("name", ["report.xlsx", "Makefile.old", "image.PNG", "blob"])
def test_unsupported_suffix_lists_supported_ones(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsupportedFileError) as err:
        load_document(write(tmp_path / name, "x"), max_bytes=MB)
    message = one_line_error(err)
    assert name in message and all(suffix in message for suffix in SUPPORTED_SUFFIXES)


def test_discover_finds_files_recursively_sorted_skipping_hidden(tmp_path: Path) -> None:
    for rel in [
        "b.md",
        "a/z.txt",
        "a/y.html",
        "a/deep/x.rst",
        ".hidden/h.md",
        "a/.secret.md",
        "__pycache__/c.md",
        "a/image.png",
        "blob",
    ]:
        write(tmp_path / rel, "text")
    single = write(tmp_path / "other" / "one.markdown", "text")
    found = discover([tmp_path, single, tmp_path / "missing.md"])
    files, skipped = found.files, found.skipped
    assert files == [tmp_path / "a/deep/x.rst", tmp_path / "a/y.html", tmp_path / "a/z.txt", tmp_path / "b.md", single]
    assert [(p.name, r.split(";")[0]) for p, r in skipped] == [
        ("image.png", "unsupported file type '.png'"),
        ("blob", "no file suffix"),
        ("missing.md", "does not exist"),
    ]


def test_a_walk_follows_no_link_out_of_its_folder(tmp_path: Path) -> None:
    """A link in a folder to a file outside it (``/etc/passwd``) would be indexed and searchable by anyone; a
    link to a file inside is that file once; links to folders and dangling ones are said so."""
    tmp_path = tmp_path.resolve()  # the reasons name resolved paths
    docs, secret = tmp_path / "docs", write(tmp_path / "private" / "passwd.md", "secret")
    target = write(docs / "guide.md", "text")
    for name, to in [("passwd.md", secret), ("a-latest.md", target), ("gone.md", tmp_path / "none.md")]:
        (docs / name).symlink_to(to)
    (docs / "more").symlink_to(tmp_path / "private", target_is_directory=True)
    (docs / "loop-a.md").symlink_to(docs / "loop-b.md")
    (docs / "loop-b.md").symlink_to(docs / "loop-a.md")
    found = discover([docs])
    assert found.files == [target]  # a-latest.md is the same file: once, as itself
    reasons = {path.name: reason for path, reason in found.skipped}
    assert reasons == {
        "gone.md": f"a symbolic link to {tmp_path / 'none.md'}, which does not exist: mend or remove the link",
        "loop-a.md": f"a symbolic link that leads back to itself ({docs / 'loop-b.md'}): mend or remove the link",
        "loop-b.md": f"a symbolic link that leads back to itself ({docs / 'loop-a.md'}): mend or remove the link",
        "more": f"a symbolic link to the folder {tmp_path / 'private'}: not followed; name that folder to index it",
        "passwd.md": f"a symbolic link to {secret}, outside {docs}: not followed; name that file to index it",
    }
    assert discover([docs / "passwd.md"]).files == [secret]  # named itself, it is the user's choice


def test_a_link_to_a_folder_inside_the_walk_is_left_out_without_a_word(tmp_path: Path) -> None:
    """openshift-docs keeps ``_attributes`` links in every assembly folder: each was a skipped line saying to name a
    folder this very run indexed (audit 59b). The folder is read where it is, once."""
    tmp_path = tmp_path.resolve()
    shared = write(tmp_path / "_attributes" / "common.adoc", ":product: OpenShift\n")
    guide = write(tmp_path / "install" / "guide.adoc", "= Install\n\nText.\n")
    (tmp_path / "install" / "_attributes").symlink_to(tmp_path / "_attributes", target_is_directory=True)
    found = discover([tmp_path])
    assert found.files == [shared, guide] and found.skipped == []


def test_a_link_to_a_file_of_the_folder_is_that_file_read_as_itself(tmp_path: Path) -> None:
    """A link is keyed by its target, so the document is the target read by its own name (suffix: the chunking;
    stem: the title), whichever sorts first; a link to a file the walk skips does not index it under its name."""
    tmp_path = tmp_path.resolve()
    guide = write(tmp_path / "guide.md", "# Install guide\n\n## Steps\n\nRun the installer.\n")
    write(tmp_path / "data.csv", "a,b\n1,2\n")
    for name, to in [("0notes.txt", "guide.md"), ("zz.txt", "guide.md"), ("0table.md", "data.csv")]:
        (tmp_path / name).symlink_to(to)
    found = discover([tmp_path])
    assert found.files == [guide]
    assert [(p.name, r.split(";")[0]) for p, r in found.skipped] == [("data.csv", "unsupported file type '.csv'")]
    assert discover([tmp_path / "0notes.txt"]).files == [guide]  # named itself: still the target's document
    assert discover([tmp_path / "0table.md"]).files == []
    assert load_document(found.files[0], max_bytes=MB).title == "Install guide"


def test_a_walk_reads_no_hidden_file_through_a_link(tmp_path: Path) -> None:
    """Hidden files are never read by a walk (``.env``), nor files in the folders it passes over, through a link
    in the folder either; hidden counts below the folder walked, which may itself be hidden."""
    root = tmp_path.resolve() / ".team"
    secret = write(root / ".env", "DB_PASSWORD=hunter2\n")
    hook = write(root / ".git" / "notes.md", "text")
    cached = write(root / "sub" / "__pycache__" / "c.md", "text")
    readme = write(root / "readme.md", "# Readme\n")
    links = {"settings.toml": secret, "hooks.md": hook, "cached.md": cached, "a-readme.md": readme}
    for name, to in links.items():
        (root / name).symlink_to(to)
    found = discover([root])
    assert found.files == [readme]
    assert dict(found.skipped) == {
        root / name: f"a symbolic link to {links[name]}, which a walk passes over (hidden, or in __pycache__): "
        "not followed"
        for name in ["settings.toml", "hooks.md", "cached.md"]
    }


def test_a_repository_is_read_whole_but_its_data_and_secrets(tmp_path: Path) -> None:
    """Configuration, infrastructure and files known by name (Dockerfile, LICENSE) are text a team searches; a
    folder's data dumps are skipped, and its ``.env`` never read (hidden)."""
    for rel in ["Dockerfile", "LICENSE", "Makefile", "pyproject.toml", "deploy/main.tf", "api.proto", "init.lua",
                "setup.cfg", ".env", "data.csv", "blob"]:  # fmt: skip
        write(tmp_path / rel, "FROM python:3.11\nRUN make install\n")
    found = discover([tmp_path])
    assert sorted(p.name for p in found.files) == sorted(
        ["Dockerfile", "LICENSE", "Makefile", "pyproject.toml", "main.tf", "api.proto", "init.lua", "setup.cfg"]
    )
    assert sorted(p.name for p, _ in found.skipped) == ["blob", "data.csv"]
    docker = load_document(tmp_path / "Dockerfile", max_bytes=MB)
    assert docker.text == "FROM python:3.11\nRUN make install\n" and docker.title == "Dockerfile"


def test_a_text_given_without_a_title_is_titled_as_its_kind_of_file_would_be() -> None:
    assert text_title("intro\n# Guide\n\ntext", "recursive") == "Guide"
    assert text_title("---\ntitle: 'Front'\n---\nbody", "markdown") == "Front"
    assert text_title("\\title{On Tides}\n\\section{Intro}", "latex") == "On Tides"
    assert text_title("# a comment\nimport os", "code") == "" and text_title('{"a": 1}', "json") == ""
    assert text_title("no header here", "sentence") == ""
