"""Extractive summaries and front-matter titles (issue 17 point 3)."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

from rag_service.ingest.loaders import front_matter_title, markdown_title
from rag_service.ingest.summary import MAX_SUMMARY_CHARS, _sentences, _without_links, extractive_summary, prose
from tests.complexity import assert_linear
from tests.shared_data import SHARED

#: the extractive summary of every anthropic-docs-qa page as it was before CJK and Thai sentences counted
PINNED_SUMMARIES = Path(__file__).resolve().parents[1] / "data" / "english_summaries.json"

PAGE = """---
title: Autoscaling
---

# Autoscaling

The autoscaler adds worker nodes when tasks wait for resources in the cluster.
It removes idle worker nodes after a configurable timeout in the cluster.
See [the configuration guide](config.md) for the `idle_timeout_minutes` option of the cluster.

```python
ray.init(address="auto")  # Code is never part of a summary, whatever it says.
```

| option | meaning of the option in the table |
|---|---|

Bananas are yellow fruit that grow in tropical places far from here.
Worker nodes of the cluster are launched from the node types in the cluster configuration.
"""


def test_prose_drops_front_matter_code_headers_tables_and_link_targets():
    text = prose(PAGE)
    assert "title:" not in text and "ray.init" not in text and "| option" not in text and "# Autoscaling" not in text
    assert "See the configuration guide for the idle_timeout_minutes option" in text


def test_summary_picks_central_sentences_in_document_order():
    summary = extractive_summary(PAGE, sentences=2)
    assert "Bananas" not in summary, "the off-topic sentence is the least central"
    candidates = [" ".join(line.split()) for line in prose(PAGE).split("\n") if line.strip()]
    picked = [c for c in candidates if c in summary]
    assert len(picked) == 2 and summary == " ".join(picked), "two whole sentences, in document order"
    assert extractive_summary(PAGE, sentences=2) == summary, "deterministic"


def test_short_texts_are_their_own_summary_and_long_ones_are_capped():
    assert extractive_summary("One sentence with enough words in it.", sentences=3) == (
        "One sentence with enough words in it."
    )
    assert extractive_summary("Too short.", sentences=3) == ""
    assert extractive_summary(PAGE, sentences=0) == ""
    long = " ".join(f"Sentence number {i} talks about the cluster autoscaler at length." for i in range(300))
    summary = extractive_summary(long, sentences=20)
    assert len(summary) <= MAX_SUMMARY_CHARS + 2 and summary.endswith(" …")


def test_titles_come_from_the_h1_then_the_front_matter():
    assert markdown_title(PAGE) == "Autoscaling"
    assert markdown_title("---\ntitle: From YAML\n# a YAML comment, no header\n---\nText.\n") == "From YAML"
    assert markdown_title("---\ntitle: 'Serve: a guide'\n---\nText only.\n") == "Serve: a guide"
    assert front_matter_title("Text first\n---\ntitle: no\n---\n") == ""
    assert markdown_title("Plain text.\n") == ""


def test_a_setext_h1_is_the_title_and_a_dash_underline_is_not():
    assert markdown_title("Deployment Guide\n================\n\nShip it.\n\n# Later\n") == "Deployment Guide"
    assert markdown_title("Rollback\n--------\n\nRoll back.\n") == ""  # an h2 at most, never the title
    assert markdown_title("```\nx\n===\n```\n# Real\n") == "Real"  # not in fenced code


DOCS_PAGE = """Connection pooling
==================

The connection pool keeps a few PostgreSQL connections open and lends them to requests, so a request
never pays for a new connection.

- [Pool settings](settings.md)
- [Troubleshooting](troubleshooting.md)

| setting | default |
|---|---|
| pool_size | 5 |

RoleUserAssistantWrite an email for the pool release.Instructions:1. Mention the pool size.2. Be brief.

Setting pool_size to 10 doubles the pool, and setting pool_size to 20 doubles the pool size again.
A pool_size of 10 or 20 needs max_connections on the server to be at least the pool size times the
number of processes. The pool size times the number of processes must stay under max_connections.
See https://www.postgresql.org/docs/current/runtime-config-connection.html for max_connections.
"""


def test_summary_candidates_are_prose_sentences_only():
    candidates = _sentences(prose(DOCS_PAGE))
    assert not any(c.startswith("Connection pooling") for c in candidates), "a setext header is not prose"
    assert not any("Pool settings" in c or "setting" in c.split()[0] for c in candidates), "link lists and tables"
    assert not any("RoleUser" in c or "Instructions" in c for c in candidates), "glued scraped text"
    assert not any("https://" in c for c in candidates), "URLs"
    assert candidates[0].startswith("The connection pool keeps a few PostgreSQL connections open")


def test_the_opening_sentence_saying_what_the_page_is_about_leads_the_summary():
    opening = "This page explains how the service shares its database connections between requests and how to size it."
    page = DOCS_PAGE.replace(
        "The connection pool keeps a few PostgreSQL connections open and lends them to requests, so a request\n"
        "never pays for a new connection.",
        opening,
    )
    assert extractive_summary(page, sentences=1) == opening, "not the most central detail about pool_size"
    assert extractive_summary(page, sentences=2).startswith(opening + " ")


def test_fences_are_code_by_their_character_and_length_not_by_toggling():
    # the notebook loader fences a cell holding ``` with ````; ~~~ in a ``` fence is code too
    page = (
        "The notebook trains a small model on the cluster and reports its accuracy.\n\n"
        "````markdown\nA cell that shows a fence:\n```\n"
        "This line in the code cell reads like a sentence as well.\n````\n\n"
        "```{eval-rst}\nTitle\n~~~~~\nThis reStructuredText line in a fenced block is code as well.\n```\n"
    )
    assert _sentences(prose(page)) == ["The notebook trains a small model on the cluster and reports its accuracy."]


def test_fences_inside_list_items_are_code_and_prose_after_them_is_prose():
    page = (
        "- Label the cluster:\n"
        "  - ```shell\n    kubectl label raycluster demo queue=test --overwrite now.\n    ```\n"
        "- `volcano.sh/queue-name`: The Volcano queue name the cluster submits its pods to.\n"
    )
    assert _sentences(prose(page)) == ["volcano.sh/queue-name: The Volcano queue name the cluster submits its pods to."]


def test_latex_documents_get_a_summary_of_their_prose():
    text = (
        "\\documentclass{article}\n\\title{Zebra Migration}\n\\begin{document}\n\\maketitle\n\\begin{abstract}\n"
        "We study zebra migration across the Serengeti using GPS collars.\n\\end{abstract}\n"
        "\\section{Methods \\label{sec:methods}}\nWe fitted a random walk model to the positions. % old: Brownian\n"
        "\\begin{equation}\n  x_{t+1} = x_t + \\epsilon_t\n\\end{equation}\n\\end{document}\n"
    )
    assert extractive_summary(text) == (
        "We study zebra migration across the Serengeti using GPS collars. "
        "We fitted a random walk model to the positions."
    )


ZH = (
    "# 数据库备份\n\n在生产环境中，我们每天凌晨两点执行一次全量备份。备份文件存储在对象存储中，保留三十天。"
    "如果需要恢复数据，请联系运维团队。\n"
)
JA = (
    "# デプロイ手順\n\n本番環境へのデプロイ方法を説明します。"
    "デプロイの前に、必ずステージング環境でテストを実行してください。問題が発生した場合は、直ちにロールバックを行います。\n"
)
TH = "# คู่มือ\n\nระบบจะสำรองข้อมูลฐานข้อมูลทุกวันเวลาตีสอง ไฟล์สำรองข้อมูลจะถูกเก็บไว้เป็นเวลาสามสิบวัน\n"


def test_chinese_japanese_and_thai_documents_get_a_summary() -> None:
    # a CJK sentence is one \\w+ "word" and ends in 。, and Thai has no sentence mark: all three had no summary
    assert extractive_summary(ZH) == ZH.split("\n\n")[1].strip()  # no space after each 。
    assert extractive_summary(JA) == JA.split("\n\n")[1].strip()
    assert extractive_summary(TH) == TH.split("\n\n")[1].strip()  # its two sentences, and the space between them
    assert _sentences("备份已完成。\n\n好的。") == [], "a sentence of a few characters is no summary material"


def test_chinese_sentences_are_compared_by_their_character_bigrams() -> None:
    # the last sentence shares words (全量备份, 恢复演练) with two others: the most central, though it comes last;
    # compared as \\w+ words (one per clause) no two sentences share one, and the first three were the summary
    lead, *others, hub = [
        "本手册介绍数据库运维团队的日常工作。",
        "会议室的咖啡机由行政部门负责维护。",
        "公司年会通常安排在十二月的最后一周。",
        "全量备份每天凌晨两点执行一次。",
        "恢复演练每个月在测试环境中进行。",
        "恢复演练使用前一天的全量备份。",
    ]
    summary = extractive_summary("".join([lead, *others, hub]), sentences=3)
    assert summary.startswith(lead) and summary.endswith(hub), summary


def test_english_summaries_are_as_before() -> None:
    pinned: dict[str, str] = json.loads(PINNED_SUMMARIES.read_text(encoding="utf-8"))
    docs = SHARED / "datasets" / "anthropic-docs-qa" / "docs"
    files = sorted(docs.glob("*.md"))
    assert [p.name for p in files] == sorted(pinned), f"the pages under {docs} are not the pinned ones"
    digest = {
        p.name: hashlib.sha256(extractive_summary(p.read_text(encoding="utf-8")).encode()).hexdigest()[:16]
        for p in files
    }
    assert [name for name in pinned if digest[name] != pinned[name]] == []


def test_brackets_without_a_closer_grow_linearly() -> None:
    """Every ``[`` scanned to the end of its line for a ``]`` (40,000 of them took 14 s), every ``](`` for a ``)``."""
    for unit in ("[", "x[", "[a](b"):

        def line_of(n: int, unit: str = unit) -> str:
            return "# T\n\n" + unit * (n // len(unit)) + "\n"

        assert_linear(line_of, extractive_summary, n=10_000)


def test_links_are_unwrapped_as_the_regex_did() -> None:
    """``_without_links`` is ``re.sub`` of the link regex it replaced, on random texts of brackets."""
    link = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
    rng = random.Random(54)
    for _ in range(5_000):
        line = "".join(rng.choice("a !![]]()(x") for _ in range(rng.randint(0, 30)))
        assert _without_links(line, keep_text=True) == (link.sub(r"\1", line), link.search(line) is not None)
        assert _without_links(line, keep_text=False)[0] == link.sub("", line)
