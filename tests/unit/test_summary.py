"""Extractive summaries and front-matter titles (issue 17 point 3)."""

from __future__ import annotations

from rag_service.ingest.loaders import front_matter_title, markdown_title
from rag_service.ingest.summary import MAX_SUMMARY_CHARS, extractive_summary, prose

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
    assert markdown_title("---\ntitle: 'Serve: a guide'\n---\nText only.\n") == "Serve: a guide"
    assert front_matter_title("Text first\n---\ntitle: no\n---\n") == ""
    assert markdown_title("Plain text.\n") == ""
