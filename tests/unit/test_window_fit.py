"""Chunks fit what the bundled model reads (256 tokens, its real tokenizer): a full chunk of Russian, Korean or
Chinese text lost its end unseen (audit 54a 2); English chunks are as before."""

from __future__ import annotations

import pytest

from rag_service.config import Settings
from rag_service.db.chunk_text import embedded_text
from rag_service.embed import BUNDLED_MINILM, HashingEmbedder, embedder_for
from rag_service.ingest.chunking import Chunking
from rag_service.model_window import model_window

RUSSIAN = (
    "Базы данных копируются ежедневно в два часа ночи, а журналы транзакций отправляются в хранилище каждые пять "
    "минут. Резервные копии хранятся тридцать дней, после чего удаляются автоматически. "
)
KOREAN = "데이터베이스 백업은 매일 새벽 두 시에 실행되며 복사본은 삼십 일 동안 보관됩니다. "
CHINESE = "我们每天凌晨两点执行一次全量备份，并且每小时执行一次增量备份，备份文件存储在对象存储中。"
ENGLISH = (
    "Nightly backups run with pg_dump at two in the morning and are kept for thirty days, with a weekly copy "
    "shipped to cold storage. A streaming replica follows the primary with a few milliseconds of lag. "
)


@pytest.fixture(scope="module")
def bundled() -> Chunking:
    return Chunking(Settings(), embedder_for(BUNDLED_MINILM))


def _document(paragraph: str) -> str:
    return "# Runbook\n\n## Backups\n\n" + "\n\n".join(paragraph * 3 for _ in range(4)) + "\n"


@pytest.mark.parametrize("paragraph", [RUSSIAN, KOREAN, CHINESE])
def test_every_chunk_of_another_script_is_read_whole(bundled: Chunking, paragraph: str) -> None:
    text = _document(paragraph)
    window = model_window(bundled.embedder)
    assert window is not None and window.max_tokens == 256
    whole = Chunking(Settings(), HashingEmbedder()).split("markdown", text, "runbook.md", "Runbook")[0].chunks
    chunks = bundled.split("markdown", text, "runbook.md", "Runbook")[0].chunks
    read = window.count([embedded_text("Runbook", c.header_path, c.content, c.lead) for c in whole])
    assert max(read) > 256 - 2, "the case: without the fit, ends of chunks were not read"
    assert len(chunks) > len(whole)
    read = window.count([embedded_text("Runbook", c.header_path, c.content, c.lead) for c in chunks])
    assert max(read) <= 256 - 2
    for index, chunk in enumerate(chunks):
        assert chunk.chunk_index == index and text[chunk.start_char : chunk.end_char] == chunk.content
        assert chunk.header_path == "Runbook > Backups" and chunk.parent_content is not None
    covered = {i for c in chunks for i in range(c.start_char, c.end_char)}
    lost = {i for c in whole for i in range(c.start_char, c.end_char)} - covered
    assert not "".join(text[i] for i in sorted(lost)).strip(), "no text is lost (only the spaces between pieces)"


def test_english_and_code_chunks_are_as_before(bundled: Chunking) -> None:
    plain = Chunking(Settings(), HashingEmbedder())
    text = _document(ENGLISH)
    fitted = bundled.split("markdown", text, "a.md", "Runbook")[0].chunks
    assert fitted == plain.split("markdown", text, "a.md")[0].chunks
    code = "def restore(path):\n    " + "\n    ".join(f"step_{i} = run('{RUSSIAN[:60]}', {i})" for i in range(30))
    assert bundled.split("code", code, "r.py", "r")[0].chunks == plain.split("code", code, "r.py", "r")[0].chunks


def test_a_model_without_a_window_cuts_nothing() -> None:
    assert model_window(HashingEmbedder()) is None


def test_the_share_of_text_the_model_cannot_read(bundled: Chunking) -> None:
    window = model_window(bundled.embedder)
    assert window is not None and window.unknown is not None
    assert window.unknown(["全量备份", "ระบบจะสำรองข้อมูล", "🚀", "nightly backups", "Базы данных", ""]) == [
        1.0, 1.0, 1.0, 0.0, 0.0, 0.0
    ]
    text = "# Backup\n\n" + "ระบบจะสำรองข้อมูลทุกคืนเวลาตีสองและเก็บไว้สามสิบวัน " * 3 + "\n\n## Notes\n\nNightly backups.\n"
    assert bundled.split("markdown", text, "th.md", "th")[0].unreadable == 1
    assert bundled.split("markdown", _document(RUSSIAN), "ru.md", "ru")[0].unreadable == 0
