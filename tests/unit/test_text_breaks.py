"""Sentence and clause breaks of Chinese and Japanese (``。！？`` need no space after them); English cut as it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.recursive import recursive_pieces
from rag_service.ingest.sentence import sentence_spans
from rag_service.retrieve.windows import window_span
from rag_service.text_breaks import CLAUSE_BREAK, SENTENCE_END
from tests.shared_data import SHARED
from tests.unit.test_chunker_properties import assert_chunks_valid

#: the chunk spans of every anthropic-docs-qa page by three strategies, as they were before CJK breaks existed
PINNED_SPANS = Path(__file__).resolve().parents[1] / "data" / "english_chunk_spans.json"

# 552 characters of Chinese prose in one paragraph (the audit's manual): no space anywhere, sentences end in 。
ZH = (
    "# 数据库运维手册\n\n## 备份与恢复\n\n"
    "在生产环境中，我们每天凌晨两点执行一次全量备份，并且每小时执行一次增量备份。备份文件存储在对象存储中，保留三十天。"
    "如果需要恢复数据，请联系运维团队，并提供需要恢复的时间点。恢复过程分为三个步骤：首先停止应用服务器，然后从对象存储下载备份文件，"
    "最后使用恢复命令恢复数据库。整个过程通常需要二十分钟左右。为了确保备份可用，运维团队每个月会在独立的测试环境中进行一次恢复演练，"
    "并把演练结果记录在运维知识库中。演练失败时，值班工程师需要在二十四小时内找出原因并修复。备份加密使用的密钥保存在密钥管理服务中，"
    "只有数据库管理员和安全团队的负责人可以访问。每次修改备份策略之前，都必须经过变更评审委员会的批准，并在变更窗口内执行。"
    "如果对象存储出现故障，备份任务会自动切换到备用区域，并向值班群发送告警通知。所有备份任务的执行日志保存九十天，供审计使用。"
    "新员工入职后需要先阅读本手册，并在导师的指导下完成一次完整的备份与恢复操作。手册每季度更新一次，更新内容会通过邮件通知全体工程师。"
    "如有疑问，请在运维频道提问。"
    "数据库的监控指标包括连接数、慢查询数量、复制延迟和磁盘使用率。当复制延迟超过三十秒时，系统会自动发出告警，"
    "值班工程师需要立即检查主库和备库的状态，必要时执行主备切换。\n"
)


def test_full_width_marks_end_sentences_without_a_space() -> None:
    text = "备份已完成。恢复了吗？“好！”他说。完成……接下来；最后．Pi is 3.14. Coming soon…Most 値は３．１４です"
    ends = [m.group() for m in SENTENCE_END.finditer(text)]
    assert ends == ["。", "？", "！”", "。", "……", "；", "．", ". "]  # no "…" after Latin text, no ３．１４
    spans = [text[s:e] for s, e in sentence_spans(text, 0, len(text))]
    assert spans[:3] == ["备份已完成。", "恢复了吗？", "“好！”"]
    assert "".join(spans) == text
    assert [m.group() for m in CLAUSE_BREAK.finditer("连接数、慢查询数量，复制延迟")] == ["、", "，"]


@pytest.mark.parametrize("strategy", ["markdown", "recursive", "sentence"])
def test_a_long_chinese_paragraph_is_cut_between_sentences(strategy: str) -> None:
    doc = make_chunker(strategy, source="zh.md").split(ZH)
    assert_chunks_valid(ZH, doc)
    assert len(doc.chunks) >= 2
    for chunk in doc.chunks:
        assert chunk.content.endswith("。"), chunk.content[-12:]  # it ended "…磁盘使用率。当" and "…慢查询数量、"
        before = ZH[chunk.start_char - 1] if chunk.start_char else "\n"
        assert before in "。\n", chunk.content[:12]  # it started "入职后需要先…" ("新员工" cut off)


def test_a_sentence_too_long_is_cut_at_its_clauses_before_any_character() -> None:
    sentence = "，".join(f"第{i}个步骤需要检查配置文件" for i in range(20)) + "。"
    pieces = [sentence[s:e] for s, e, _ in recursive_pieces(sentence, 0, len(sentence), chunk_size=40, chunk_overlap=0)]
    assert "".join(pieces) == sentence
    assert all(piece.endswith(("，", "。")) for piece in pieces), pieces


def test_a_window_in_chinese_prose_starts_and_ends_at_sentences() -> None:
    body = ZH[ZH.index("在生产") :]
    match = (body.index("新员工"), body.index("新员工") + 10)
    lo, hi = window_span(0, len(body), *match, body, 200)
    assert lo <= match[0] and hi >= match[1]
    assert body[lo - 1] == "。" and body[hi - 1] == "。", (body[lo - 3 : lo + 3], body[hi - 3 : hi + 3])


def test_english_documents_are_chunked_exactly_as_before() -> None:
    pinned: dict[str, dict[str, str]] = json.loads(PINNED_SPANS.read_text(encoding="utf-8"))
    docs = SHARED / "datasets" / "anthropic-docs-qa" / "docs"
    files = sorted(docs.glob("*.md"))
    assert [p.name for p in files] == sorted(pinned["markdown"]), f"the pages under {docs} are not the pinned ones"
    changed = []
    for strategy, digests in pinned.items():
        chunker = make_chunker(strategy, source="x.md")
        for path in files:
            chunks = chunker.split(path.read_text(encoding="utf-8")).chunks
            spans = ";".join(f"{c.start_char}:{c.end_char}:{c.chunk_type}" for c in chunks)
            if hashlib.sha256(spans.encode()).hexdigest()[:16] != digests[path.name]:
                changed.append(f"{strategy} {path.name}")
    assert changed == [], f"English chunks changed: {changed[:5]}"
