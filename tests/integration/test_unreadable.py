"""Text the bundled model cannot read (Thai, most Han characters, emoji) is said, at ingest and at query time, and
a query of it is searched by its words (audit 54a 3: a Chinese query matched a Thai page at a calibrated 96%)."""

from __future__ import annotations

import pytest

from rag_service.service import UniversalRAGService

pytestmark = pytest.mark.slow

DOCS = [
    ("zh.md", "备份", "# 数据库备份\n\n我们每天凌晨两点执行一次全量备份，并且每小时执行一次增量备份。"),
    ("th.md", "สำรอง", "# การสำรองข้อมูล\n\nระบบจะสำรองข้อมูลทุกคืนเวลาตีสองและเก็บไว้สามสิบวัน\n"),
    ("en.md", "Release notes", "# Release notes 🚀\n\nThe gateway now rotates its certificates every week.\n"),
]


@pytest.fixture
def service(db, settings, default_minilm) -> UniversalRAGService:
    return UniversalRAGService(settings, database=db, embedder=default_minilm, reranker=None)


def test_unreadable_text_is_said_and_searched_by_its_words(service):
    report = service.index_texts(DOCS, collection="intl", strategy="markdown")
    assert report.unreadable_chunks == 2
    assert any(line.startswith("unreadable: 2 chunks are mostly text the embedding model cannot read") for line in
               report.lines())
    result = service.retrieve("全量备份", "agent", collection="intl")
    assert [chunk.source for chunk in result.chunks][:1] == ["zh.md"]
    assert result.chunks[0].scores.vector is None, "no vector arm: [UNK] matched every unreadable text"
    assert any("of the query is text the embedding model" in line for line in result.metrics.degraded)
    emoji = service.retrieve("🚀", "agent", collection="intl")
    assert not any(chunk.source == "th.md" for chunk in emoji.chunks), "an emoji matched the Thai page at 77%"
    readable = service.retrieve("certificates rotation", "agent", collection="intl")
    assert readable.metrics.degraded == [] and readable.chunks[0].source == "en.md"
