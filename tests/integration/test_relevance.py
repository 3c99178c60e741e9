"""The calibrated relevance with the real bundled model: answerable questions score high, others are floored."""

from __future__ import annotations

import pytest

from rag_service.config import AGENT_MIN_RELEVANCE
from rag_service.retrieve.rerank import FunctionReranker
from rag_service.service import UniversalRAGService
from rag_service.tokens import count_tokens

pytestmark = pytest.mark.slow

DOCS = [
    (
        "ops.md",
        "Operations",
        "# Operations\n\n## Backups\n\nNightly backups run with pg_dump at two in the morning. Each backup is kept "
        "for thirty days and a weekly copy is shipped to cold storage.\n\n## Replication\n\nA streaming replica "
        "follows the primary with a few milliseconds of lag. Failover promotes the replica.\n",
    ),
    (
        "search.md",
        "Search",
        "# Search\n\n## Hybrid search\n\nThe vector arm finds chunks by meaning through the HNSW index, the keyword "
        "arm finds exact terms through the GIN index, and fusion merges both rankings into one list.\n",
    ),
]
ANSWERABLE = "How long are nightly backups kept?"
UNANSWERABLE = "Which vitamins do pregnant women need more of?"


@pytest.fixture
def service(db, settings, default_minilm) -> UniversalRAGService:
    svc = UniversalRAGService(settings, database=db, embedder=default_minilm, reranker=None)
    assert svc.index_texts(DOCS, collection="kb", strategy="markdown").added == 2
    return svc


def test_an_answerable_question_scores_high_and_an_unanswerable_one_low(service):
    answered = service.retrieve(ANSWERABLE, "workflow", collection="kb")
    unanswered = service.retrieve(UNANSWERABLE, "workflow", collection="kb")
    assert answered.metrics.relevance == unanswered.metrics.relevance == "calibrated"
    assert answered.chunks[0].source == "ops.md" and answered.chunks[0].relevance_score >= 0.75
    assert unanswered.chunks and unanswered.chunks[0].relevance_score < 0.1  # workflow sets no floor
    assert all(0.0 <= c.relevance_score <= 1.0 for c in (*answered.chunks, *unanswered.chunks))


def test_the_agent_preset_says_no_relevant_passages_instead_of_padding(service):
    assert service.preset("agent").min_relevance == AGENT_MIN_RELEVANCE > 0
    result = service.retrieve(UNANSWERABLE, "agent", collection="kb")
    assert result.chunks == [] and result.sources == []
    assert result.metrics.filtered_below_relevance >= 1
    assert result.formatted_context.startswith(f"no relevant passages for {UNANSWERABLE!r}")
    assert result.total_tokens > 0 and "\n" not in result.formatted_context
    answered = service.retrieve(ANSWERABLE, "agent", collection="kb")
    assert "Nightly backups" in answered.chunks[0].content
    assert "search.md" not in {c.source for c in answered.chunks}  # the unrelated section is dropped, not padded
    assert answered.metrics.filtered_below_relevance >= 1 and "no relevant passages" not in answered.formatted_context


def test_a_one_document_collection_answers_what_it_holds_and_floors_what_it_does_not(service):
    # a one-chunk collection's background used to be that chunk's own cosine: this question scored 14% (agent: none).
    # The passage is mostly filler: its cosine to the question is 0.52 on fp32 and 0.50 on int8 with AVX-512 VNNI
    # (int8 vectors differ by the CPU's int8 instructions), so its relevance is 0.68-0.77 where the old background
    # gave 0.25-0.31: the bound sits between the two, not at the PRD's 0.75 for a typical answer (the ops.md test)
    text = "# Backups\n\nSome text about backups and restores in a cluster, with enough words to be a chunk.\n"
    assert service.index_texts([("one.md", "Backups", text)], collection="one").added == 1
    answered = service.retrieve("how are backups restored in a cluster", "agent", collection="one")
    assert [c.source for c in answered.chunks] == ["one.md"], answered.formatted_context
    assert answered.chunks[0].relevance_score >= 0.6
    assert service.retrieve(UNANSWERABLE, "agent", collection="one").chunks == []


def test_a_query_no_chunk_matches_says_so_in_the_context(service):
    """With no candidate at all (filters that hold nothing) the context was "" and nothing said why."""
    none = service.retrieve(ANSWERABLE, "workflow", collection="kb", filters={"source": "no/such/file.md"})
    assert none.chunks == [] and none.metrics.total_candidates == 0
    assert none.formatted_context.startswith(f"no relevant passages for {ANSWERABLE!r}: no chunk matched it")
    assert none.total_tokens == count_tokens(none.formatted_context)


def test_a_tiny_budget_holds_the_message_or_says_what_it_needs(service):
    """The exact budget holds for the "no relevant passages" line too (it was 35 tokens under a budget of 10), and a
    budget that holds none of the results says so and how many tokens the first needs (it returned "" silently)."""
    refused = service.retrieve(UNANSWERABLE, "agent", collection="kb", max_tokens=10)
    assert refused.formatted_context.startswith("no relevant passages for")
    assert refused.total_tokens == count_tokens(refused.formatted_context) <= 10
    starved = service.retrieve(ANSWERABLE, "workflow", collection="kb", max_tokens=10)
    assert starved.formatted_context == "" and starved.chunks == []
    (line,) = [d for d in starved.metrics.degraded if d.startswith("format:")]
    need = int(line.rsplit(" ", 1)[1])
    assert line.startswith("format: max_tokens 10 holds none of the ")
    fed = service.retrieve(ANSWERABLE, "workflow", collection="kb", max_tokens=need)
    roomy = service.retrieve(ANSWERABLE, "workflow", collection="kb")
    assert [c.chunk_id for c in fed.chunks] == [roomy.chunks[0].chunk_id], "the first result, at the budget named"
    assert not [d for d in (*fed.metrics.degraded, *roomy.metrics.degraded) if d.startswith("format:")]


def test_min_relevance_is_a_per_call_override(service):
    unfloored = service.retrieve(UNANSWERABLE, "agent", collection="kb", min_relevance=0)
    assert unfloored.chunks and unfloored.metrics.filtered_below_relevance == 0
    strict = service.retrieve(ANSWERABLE, "workflow", collection="kb", min_relevance=0.999)
    assert strict.chunks == [] and strict.formatted_context.startswith("no relevant passages")


def test_a_reranker_relevance_stands_and_the_floor_applies_to_it(db, settings, default_minilm):
    reranker = FunctionReranker(lambda query, doc: 5.0 if "backup" in doc.lower() else -5.0)
    svc = UniversalRAGService(settings, database=db, embedder=default_minilm, reranker=reranker)
    assert svc.index_texts(DOCS, collection="kb", strategy="markdown").added == 2
    result = svc.retrieve(UNANSWERABLE, "agent", collection="kb", return_parents=False)
    assert result.metrics.relevance == "reranker"
    assert all("backup" in c.content.lower() for c in result.chunks)  # sigmoid(5) passes, sigmoid(-5) does not
    assert result.metrics.filtered_below_relevance >= 1


JS = """export class Address6 {
  constructor(address) {
    this.address = address;
    this.parsedAddress = this.parse(address);
  }

  isCanonical() {
    return this.addressMinusSuffix === this.canonicalForm();
  }

  canonicalForm() {
    return this.parsedAddress.map((part) => part.padStart(4, '0')).join(':');
  }

  toUnsignedByteArray() {
    const bytes = this.toByteArray();
    return bytes.map((b) => b & 0xff);
  }
}
"""


def test_a_question_naming_a_function_passes_the_agent_floor_on_the_words_its_results_hold(service):
    """Code scores near zero against prose questions (1-2% for this one), so the floor on the model's score alone
    refused it: the first results hold the question's rare word, and the result holding it is kept."""
    assert service.index_texts([("ip/address6.js", "address6", JS)], collection="code", strategy="code").added == 1
    question = "what does isCanonical return?"
    result = service.retrieve(question, "agent", collection="code")
    assert result.chunks and "isCanonical() {" in result.chunks[0].content, result.formatted_context
    assert service.retrieve(UNANSWERABLE, "agent", collection="code").chunks == []
