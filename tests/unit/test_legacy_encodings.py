"""Files not in UTF-8: refused with the encoding their bytes read as, HTML read in the charset it declares, and
UTF-16/32 with a byte-order mark read as such even without an ASCII character."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_service.errors import DocumentReadError
from rag_service.ingest.formats.legacy import readable_encodings
from rag_service.ingest.loaders import load_document
from tests.unit.test_loaders import MB, one_line_error, write

RUSSIAN = "# Руководство\n\nБазы данных копируются ежедневно в два часа ночи.\n"
JAPANESE = "# デプロイ手順\n\n本番環境へのデプロイ方法を説明します。\n"
CHINESE = "# 数据库备份\n\n我们每天凌晨两点执行一次全量备份。\n"
TRADITIONAL = "# 資料庫備份\n\n我們每天凌晨兩點執行一次完整備份。\n"
KOREAN = "# 백업\n\n데이터베이스는 매일 새벽 두 시에 백업됩니다.\n"
GERMAN = "# Handbuch\n\n„Datensicherung“ läuft täglich – Kosten: 5 €.\n"
FRENCH = "Le café est prêt à être servi. Déjà été là.\n"


@pytest.mark.parametrize(
    ("text", "codec", "name"),
    [
        (RUSSIAN, "cp1251", "Windows-1251"),
        (RUSSIAN, "koi8-r", "KOI8-R"),
        (GERMAN, "cp1252", "Windows-1252"),
        (FRENCH, "cp1252", "Windows-1252"),
        (JAPANESE, "shift_jis", "Shift_JIS"),
        (JAPANESE, "euc-jp", "EUC-JP"),
        (CHINESE, "gb18030", "GB18030"),
        (TRADITIONAL, "big5", "Big5"),
        (KOREAN, "euc-kr", "EUC-KR"),
    ],
)
def test_a_legacy_file_is_refused_with_the_encoding_it_reads_as(
    tmp_path: Path, text: str, codec: str, name: str
) -> None:
    path = write(tmp_path / "notes.md", text.encode(codec))
    with pytest.raises(DocumentReadError) as err:
        load_document(path, max_bytes=MB)
    message = one_line_error(err)
    assert message.startswith(f"{path} is not valid UTF-8 (byte 0x")
    assert f"convert it to UTF-8, e.g. iconv -f {codec} -t utf-8 (it reads as {name}" in message
    assert "latin1" not in message  # the old advice turned Cyrillic and CJK into mojibake
    assert readable_encodings(text.encode(codec))[0][0] == codec


def test_bytes_that_read_as_no_candidate_get_the_general_advice(tmp_path: Path) -> None:
    path = write(tmp_path / "odd.txt", b"ok \x81\x8d\x8f\x90\x9d\x98\x81")  # undefined in cp1251/cp1252, no CJK pair
    with pytest.raises(DocumentReadError) as err:
        load_document(path, max_bytes=MB)
    assert one_line_error(err).endswith("e.g. iconv -f <encoding> -t utf-8")


@pytest.mark.parametrize(
    ("codec", "declaration"),
    [
        ("shift_jis", '<meta charset="shift_jis">'),
        ("cp1251", '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'),
        ("euc-jp", "<meta charset=EUC-JP>"),
    ],
)
def test_html_is_read_in_the_charset_it_declares(tmp_path: Path, codec: str, declaration: str) -> None:
    title = "Руководство" if codec == "cp1251" else "デプロイ手順"
    page = f"<html><head>{declaration}<title>{title}</title></head><body><h1>{title}</h1><p>x</p></body></html>"
    doc = load_document(write(tmp_path / "page.html", page.encode(codec)), max_bytes=MB)
    assert (doc.title, doc.text) == (title, f"# {title}\n\nx")


def test_an_xml_declaration_is_honoured_and_latin1_means_cp1252(tmp_path: Path) -> None:
    page = '<?xml version="1.0" encoding="ISO-8859-1"?>\r\n<html><body><p>„Kosten“ – 5 €</p></body></html>'
    doc = load_document(write(tmp_path / "page.xhtml.html", page.encode("cp1252")), max_bytes=MB)
    assert doc.text == "„Kosten“ – 5 €"  # browsers read a latin1 label as windows-1252: no C1 controls


def test_a_declared_charset_does_not_override_valid_utf8(tmp_path: Path) -> None:
    page = '<meta charset="iso-8859-1"><p>Größe</p>'  # re-saved as UTF-8, the old declaration kept
    assert load_document(write(tmp_path / "page.html", page), max_bytes=MB).text == "Größe"


def test_html_that_is_not_in_its_declared_charset_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "page.html", b'<meta charset="euc-kr"><p>' + RUSSIAN.encode("cp1251"))
    with pytest.raises(DocumentReadError) as err:
        load_document(path, max_bytes=MB)
    message = one_line_error(err)
    assert message.startswith(f"{path} declares charset euc_kr but is not valid euc_kr (byte 0x")
    assert "iconv -f cp1251 -t utf-8" in message


def test_a_markdown_file_is_never_read_in_a_charset_it_mentions(tmp_path: Path) -> None:
    path = write(tmp_path / "notes.md", b'<meta charset="cp1251">\n' + RUSSIAN.encode("cp1251"))
    with pytest.raises(DocumentReadError, match="iconv -f cp1251"):
        load_document(path, max_bytes=MB)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32"])
def test_wide_text_without_any_ascii_is_read_by_its_byte_order_mark(tmp_path: Path, codec: str) -> None:
    text = "本番環境へのデプロイ手順。"
    data = ("\ufeff" + text).encode(codec) if codec.endswith("-be") else text.encode(codec)
    assert codec == "utf-32" or b"\x00" not in data  # the case the NUL test missed
    assert load_document(write(tmp_path / "ja.txt", data), max_bytes=MB).text == text
