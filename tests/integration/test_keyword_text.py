"""The keyword arm reads Chinese, Japanese, Thai and Korean in character pairs and Unicode folded (audit 54a 1, 6):
a word inside a clause, a full-width, decomposed or soft-hyphenated spelling is found as typed plainly."""

from __future__ import annotations

import unicodedata

import pytest
from sqlalchemy import text

from rag_service.embed import HashingEmbedder
from rag_service.keyword_text import keyword_text
from rag_service.service import UniversalRAGService

SAMPLES = [
    "plain ASCII text, with punctuation: a-b.c/d",
    "我们每天凌晨两点执行一次全量备份，并且每小时执行一次增量备份。",
    "ロールバックの方法はリリースノートを参照してください",
    "ระบบจะสำรองข้อมูลทุกคืน",
    "백업을 매일 실행합니다",
    "ＡＰＩ ｶﾀｶﾅ",
    unicodedata.normalize("NFD", "Résumé de l'équipe"),
    "Daten\u00adsicherung re\u200bplication \ufeffword \u200emark",
    "mixed 中文English混合 text 🚀 emoji 全",
    "two 中文 one 中 and 中文字",
    "ລະບົບ ສຳຮອງ ข้อมูล 𠀋𡈽𠀋 ၿမန်မာ ភាសាខ្មែរ",  # Lao, Han extension B, Myanmar, Khmer
    "",
]

DOCS = [
    ("zh.md", "备份", "# 数据库备份\n\n我们每天凌晨两点执行一次全量备份，并且每小时执行一次增量备份。"
     "备份文件存储在对象存储中。"),
    ("ja.md", "リリース", "# リリース手順\n\n障害が起きた場合のロールバックの方法はリリースノートを参照してください。"),
    ("th.md", "สำรอง", "# การสำรองข้อมูล\n\nระบบจะสำรองข้อมูลทุกคืนเวลาตีสองและเก็บไว้สามสิบวัน\n"),
    ("ko.md", "백업", "# 백업\n\n데이터베이스 백업을 매일 새벽 두 시에 실행합니다.\n"),
    ("fr.md", "Équipe", "# " + unicodedata.normalize("NFD", "Résumé de l'équipe") + "\n\nLa sauvegarde est faite.\n"),
    ("wide.md", "Wide", "# Guide\n\nThe ＡＰＩ gateway rotates its certificates weekly.\n"),
    ("de.md", "Betrieb", "# Betrieb\n\nDie tägliche Daten\u00adsicherung läuft um zwei Uhr nachts.\n"),
    ("zw.md", "Lag", "# Lag\n\nStreaming re\u200bplication keeps the standby close.\n"),
    ("en.md", "Other", "# Other\n\nNothing here about any of those words, only kites and tides.\n"),
]


def test_the_sql_function_reads_text_as_the_query_side_does(connection):
    for sample in SAMPLES:
        stored = connection.execute(text("SELECT rag_keyword_text(:t)"), {"t": sample}).scalar_one()
        assert stored == keyword_text(sample), sample
    assert keyword_text(SAMPLES[0]) == SAMPLES[0]
    assert keyword_text("执行一次全量备份") == "执行 行一 一次 次全 全量 量备 备份"
    assert keyword_text("two 中文 one 中") == "two 中文 one 中"


@pytest.fixture
def service(db, settings) -> UniversalRAGService:
    svc = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    assert svc.index_texts(DOCS, collection="intl", strategy="markdown").added == len(DOCS)
    return svc


def _keyword_hits(service: UniversalRAGService, query: str, **filters: object) -> list[str]:
    result = service.retrieve(
        query, "search", collection="intl", vector_weight=0.0, keyword_weight=1.0, filters=filters or None
    )
    return [chunk.source for chunk in result.chunks]


@pytest.mark.parametrize(
    ("query", "source"),
    [
        ("全量备份", "zh.md"),  # inside a clause of the text
        ('"增量备份"', "zh.md"),  # a quoted phrase: its pairs in a row
        ("如何执行全量备份？", "zh.md"),  # a question: its pairs are any of the words
        ("ロールバック", "ja.md"),
        ("สำรองข้อมูล", "th.md"),
        ("백업", "ko.md"),  # the word without its particle (백업을)
        ("équipe", "fr.md"),  # typed composed, stored decomposed
        ("Résumé", "fr.md"),
        ("API gateway", "wide.md"),  # typed plainly, stored full width
        ("Datensicherung", "de.md"),  # stored with a soft hyphen
        ("replication", "zw.md"),  # stored with a zero-width space
    ],
)
def test_a_word_is_found_in_any_of_its_spellings(service, query, source):
    hits = _keyword_hits(service, query)
    assert hits and hits[0] == source, (query, hits)


def test_a_phrase_not_in_a_row_does_not_match_and_an_exclusion_drops(service, connection):
    in_a_row = text(
        "SELECT count(*) FROM document_chunks WHERE collection = 'intl' "
        "AND content_tsv @@ websearch_to_tsquery('english', :phrase)"
    )
    # both words are there, never in a row: the phrase's pairs match no chunk
    assert connection.execute(in_a_row, {"phrase": f'"{keyword_text("全量存储")}"'}).scalar() == 0
    assert connection.execute(in_a_row, {"phrase": f'"{keyword_text("全量备份")}"'}).scalar() == 1
    # a phrase no chunk holds is searched as words (audit 56a D1), and the call says so
    result = service.retrieve('"全量存储"', "search", collection="intl", vector_weight=0.0, keyword_weight=1.0)
    assert [c.source for c in result.chunks][:1] == ["zh.md"]
    assert any("holds the quoted phrase" in line for line in result.metrics.degraded)
    assert "zh.md" not in _keyword_hits(service, "备份 -增量备份")


def test_the_keywords_and_their_filter_read_pairs(service, connection):
    keywords = connection.execute(
        text("SELECT c.metadata->'keywords' FROM document_chunks c JOIN documents d ON d.id = c.document_id "
             "WHERE d.collection = 'intl' AND d.source = 'zh.md' AND c.content LIKE '%全量%'")
    ).scalar_one()
    assert keywords and all(len(word) <= 2 for word in keywords), keywords  # pairs, not whole clauses
    assert _keyword_hits(service, "备份", keywords="备份")[:1] == ["zh.md"]
