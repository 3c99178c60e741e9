"""retrieve() end to end on the real database: presets, overrides, parents, rerank, budget, safety."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from pathlib import Path

import pytest
from sqlalchemy import event, text

from rag_service.embed import HashingEmbedder
from rag_service.errors import ConfigurationError, QueryError, UnknownContextError
from rag_service.format import MIN_CUT_TOKENS
from rag_service.retrieve.rerank import FunctionReranker
from rag_service.service import UniversalRAGService
from rag_service.tokens import count_tokens

DOCS = {
    "ops.md": """# Operations

## Backups

Nightly backups run with pg_dump at two in the morning. Each backup is kept for thirty days and a
weekly copy is shipped to cold storage so a restore can go back up to a year.

Restoring a backup means creating a fresh database and loading the dump with pg_restore, then
re-running the migrations so the schema matches the code that will read it.

## Replication

A streaming replica follows the primary with a few milliseconds of lag. Failover promotes the replica
and points the service at it through the connection string in RAG_DATABASE_URL.
""",
    "search.md": """# Search

## Hybrid search

The vector arm finds chunks by meaning through the HNSW index, the keyword arm finds exact terms through
the GIN index on the stored tsvector, and reciprocal rank fusion merges both rankings into one list.

## Reranking

A cross-encoder reads the query and each candidate together and scores how well they match. It is slower
than the vector arm, so it only sees the fused candidates, never the whole corpus.
""",
    "faq.txt": "Frequently asked: how do backups work? See the operations guide for nightly pg_dump backups.",
}


@pytest.fixture
def docs_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a checkout: sources are relative to its root
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, body in DOCS.items():
        (folder / name).write_text(body)
    return folder


def make_service(db, settings, reranker=None) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    return UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=reranker)


@pytest.fixture
def service(db, settings, docs_dir) -> UniversalRAGService:
    svc = make_service(db, settings)
    report = svc.index_paths([docs_dir])
    assert report.failed == [] and report.added == 3
    return svc


def test_result_shape_and_metrics(service):
    result = service.retrieve("how are backups restored?", context="agent")
    assert result.chunks and result.context_type == "agent" and result.query == "how are backups restored?"
    assert "kb/ops.md" in {c.source for c in result.chunks}
    assert result.total_tokens == count_tokens(result.formatted_context) <= 1500
    m = result.metrics
    assert m.total_candidates >= len(result.chunks) and m.total_time_ms > 0 and m.retrieval_time_ms > 0
    assert m.reranker == "none" and m.degraded == []
    for chunk in result.chunks:
        assert 0.0 <= chunk.relevance_score <= 1.0
        assert chunk.scores.fused is not None
    numbers = {s.number for s in result.sources}
    assert all(f"[{n}]" in result.formatted_context for n in numbers)
    assert {c.source for c in result.chunks} == {s.source for s in result.sources}


def test_return_parents_gives_each_section_once_with_its_offsets(service, connection):
    result = service.retrieve("backups restore replica", context="agent", return_parents=True, diversity=0.0)
    doc = connection.execute(text("SELECT content FROM documents WHERE source='kb/ops.md'")).scalar()
    parents = [c for c in result.chunks if c.source == "kb/ops.md"]
    assert parents and all(c.is_parent for c in parents)
    spans = [(c.start_char, c.end_char) for c in parents]
    assert len(spans) == len(set(spans)), "a section appears once"
    for chunk in parents:
        assert doc[chunk.start_char : chunk.end_char] == chunk.content
        assert chunk.content.startswith("## ")


def test_without_parents_children_come_back(service):
    result = service.retrieve("backups restore", context="search")
    assert result.chunks and not any(c.is_parent for c in result.chunks)


def test_preset_row_edits_apply_on_next_call(service, db):
    assert len(service.retrieve("backups", context="agent").chunks) <= 5
    with db.transaction() as session:
        session.execute(
            text("UPDATE rag_configurations SET max_chunks = 1, return_parents = false WHERE context_type='agent'")
        )
    assert len(service.retrieve("backups", context="agent").chunks) == 1


def test_overrides_win_and_are_validated(service):
    result = service.retrieve("backups", context="search", max_chunks=2)
    assert len(result.chunks) == 2
    stock = service.preset("search")
    assert result.metrics.settings == {**stock.knob_values(), "max_chunks": 2}, "metrics say what the call ran with"
    assert result.to_dict()["metrics"]["settings"]["max_chunks"] == 2
    with pytest.raises(ConfigurationError, match=r"diversity \(2\.0\) must be between 0 and 1"):
        service.retrieve("backups", diversity=2.0)
    with pytest.raises(ConfigurationError, match="unknown override"):
        service.retrieve("backups", top_n=3)
    with pytest.raises(ConfigurationError, match="both 0"):
        service.retrieve("backups", vector_weight=0, keyword_weight=0)


def test_a_query_reads_its_preset_collection_and_model_in_one_statement(service, connection):
    """The reads before the search are one round trip (three before: ~3 ms of every query at 100k chunks)."""
    statements: list[str] = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731  (conn, cursor, statement, ...)
    event.listen(connection, "before_cursor_execute", listener)
    try:
        assert service.retrieve("backups", context="search").chunks
    finally:
        event.remove(connection, "before_cursor_execute", listener)
    reads = [s for s in statements if "rag_configurations" in s or "index_settings" in s]
    assert len(reads) == 1, reads
    assert "index_settings" in reads[0] and "FROM documents" in reads[0]


def test_unknown_context_lists_valid_ones(service):
    valid = "valid contexts: chatbot, agent, search, workflow, context_engineering"
    with pytest.raises(UnknownContextError, match=valid):
        service.retrieve("backups", context="nope")



def test_a_context_with_a_nul_or_of_any_length_is_one_short_line(service):
    """A NUL reached the SQL as a raw DataError (an MCP agent saw "Error executing tool"); a 100 KB name was echoed
    whole into the agent's context."""
    with pytest.raises(UnknownContextError) as nul:
        service.retrieve("backups", context="ag\x00ent")
    assert str(nul.value) == (
        "context 'ag\\x00ent' holds a control character, which no preset name has; `rag presets` lists the names"
    )
    with pytest.raises(UnknownContextError) as long:
        service.retrieve("backups", context="c" * 100_000)
    assert str(long.value).startswith(f"unknown context {'c' * 59 + chr(0x2026)!r}; ")
    assert len(str(long.value)) < 300


def test_more_chunks_asked_for_than_the_preset_reads_are_returned(db, settings):
    """``max_chunks=50`` of a preset whose arms read ``candidate_k`` 20 returned 20, saying nothing."""
    svc = make_service(db, settings)
    note = "# Note {0}\n\nBackups of the database number {0} are kept offsite.\n"
    texts = [(f"n{i}.md", "", note.format(i)) for i in range(9)]
    assert svc.index_texts(texts, collection="many").added == 9
    overrides = {"candidate_k": 3, "max_tokens": 100_000, "expand_query": False, "diversity": 0.0}
    found = svc.retrieve("database backups", "search", collection="many", max_chunks=8, **overrides)
    assert len(found.chunks) == 8


def test_token_budget_is_exact(service):
    for budget in (40, 60, 100, 150, 250):
        result = service.retrieve("backups replica search reranking", context="search", max_tokens=budget)
        assert result.chunks, f"nothing fits a budget of {budget} tokens"
        assert result.total_tokens == count_tokens(result.formatted_context) <= budget
        # the budget binds here (more chunks would fit a bigger one), so what is left is less than a cut
        # chunk and its header line needs
        assert budget - result.total_tokens < MIN_CUT_TOKENS + 20, f"{result.total_tokens} of {budget} tokens used"


def test_reranker_order_follows_its_scores(db, settings, docs_dir):
    def prefers_reranking(query: str, doc: str) -> float:
        return 5.0 if "cross-encoder" in doc else -1.0

    svc = make_service(db, settings, reranker=FunctionReranker(prefers_reranking, name="test:function"))
    svc.index_paths([docs_dir])
    result = svc.retrieve("backups", context="search", max_chunks=3)
    assert result.metrics.reranker == "test:function"
    assert "cross-encoder" in result.chunks[0].content
    assert result.chunks[0].scores.rerank == 5.0
    assert result.chunks[0].relevance_score == pytest.approx(1 / (1 + 2.718281828459045**-5), rel=1e-6)


def test_unloadable_reranker_is_reported_not_faked(db, settings, docs_dir, tmp_path):
    missing = dataclasses.replace(settings, rerank_model=str(tmp_path / "no-such-model"))
    svc = UniversalRAGService(missing, database=db, embedder=HashingEmbedder())
    svc.index_paths([docs_dir])
    result = svc.retrieve("backups", context="search")
    assert result.metrics.reranker == "none"
    assert len(result.metrics.degraded) == 1 and result.metrics.degraded[0].startswith("rerank: ")
    assert "no-such-model" in result.metrics.degraded[0]
    assert all(c.scores.rerank is None for c in result.chunks)
    assert result.chunks, "the rest of the pipeline still answers"


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A 2-layer BERT cross-encoder with random weights, built here (no model hub)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path = tmp_path_factory.mktemp("tiny-ce")
    words = sorted({w.strip(".,;:()").lower() for body in DOCS.values() for w in body.split()} - {""})
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = BertTokenizer.from_pretrained(str(path))
    torch.manual_seed(1)
    config = BertConfig(
        vocab_size=len(words) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
        initializer_range=0.3,
    )
    BertForSequenceClassification(config).eval().save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def test_cross_encoder_through_the_service_orders_by_its_logits(db, settings, docs_dir, tiny_cross_encoder):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    configured = dataclasses.replace(settings, rerank_model=str(tiny_cross_encoder))
    svc = UniversalRAGService(configured, database=db, embedder=HashingEmbedder())
    svc.index_paths([docs_dir])
    query = "how are backups restored"
    result = svc.retrieve(query, context="search", diversity=0.0, max_chunks=12, max_tokens=20000)
    assert result.metrics.reranker.endswith(str(tiny_cross_encoder)) and result.metrics.degraded == []
    assert result.metrics.rerank_time_ms > 0
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_cross_encoder)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_cross_encoder))
    with torch.no_grad():
        for chunk in result.chunks:
            text = f"{chunk.header_path}\n{chunk.content}" if chunk.header_path else chunk.content
            logit = float(
                model(**tokenizer(query, text, return_tensors="pt", truncation=True, max_length=256)).logits[0, 0]
            )
            assert chunk.scores.rerank == pytest.approx(logit, abs=1e-4)
    scores = [c.scores.rerank for c in result.chunks]
    assert scores == sorted(scores, reverse=True), "order follows the cross-encoder's scores"


def test_rerank_disabled_per_call(db, settings, docs_dir):
    svc = make_service(db, settings, reranker=FunctionReranker(lambda q, d: 0.0, name="test:zero"))
    svc.index_paths([docs_dir])
    result = svc.retrieve("backups", rerank_enabled=False)
    assert result.metrics.reranker == "none" and result.metrics.degraded == []


def test_expansion_variants_are_merged_without_duplicates(service):
    result = service.retrieve("How do NightlyBackups work?", context="search", max_chunks=12)
    assert result.metrics.query_variants >= 2
    ids = [c.chunk_id for c in result.chunks]
    texts = [c.content for c in result.chunks]
    assert len(ids) == len(set(ids)) and len(texts) == len(set(texts))


def test_query_variants_skip_the_context_scores_the_merge_discards(service, monkeypatch):
    """Only the user's own query gets context BM25, proximity and context similarity: the merge keeps that
    query's (``with_query_scores``). The results equal those of every variant scoring them."""
    import rag_service.retrieve.retriever as retriever_module

    real = retriever_module.fused_search
    seen = []

    def recording(session, request, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(request)
        return real(session, request, **kwargs)

    monkeypatch.setattr(retriever_module, "fused_search", recording)
    query = "How do NightlyBackups work?"
    result = service.retrieve(query, context="search", max_chunks=12)
    flags = [(r.context_bm25, r.proximity, r.context_vector) for r in seen]
    assert len(flags) == result.metrics.query_variants >= 2 and any(flags[0]), flags
    assert set(flags[1:]) == {(False, False, False)}, flags

    def scoring_every_variant(session, request, **kwargs):  # type: ignore[no-untyped-def]
        first = seen[0]
        signals = {"context_bm25": first.context_bm25, "proximity": first.proximity}
        return real(session, dataclasses.replace(request, context_vector=first.context_vector, **signals), **kwargs)

    monkeypatch.setattr(retriever_module, "fused_search", scoring_every_variant)
    again = service.retrieve(query, context="search", max_chunks=12)
    assert [(c.chunk_id, c.relevance_score, c.scores) for c in again.chunks] == [
        (c.chunk_id, c.relevance_score, c.scores) for c in result.chunks
    ]


@pytest.mark.parametrize(
    "query",
    ["'); DROP TABLE documents; --", "a & | ! ( ) : * '", "🙂🚀 backups", "مرحبا بالعالم", "שלום", "x" * 100_000],
)
def test_hostile_and_huge_queries(service, connection, query):
    result = service.retrieve(query, context="search")
    assert result.total_tokens <= 3000
    assert connection.execute(text("SELECT count(*) FROM documents")).scalar() == 3


@pytest.mark.parametrize("query", ["", "   \n\t "])
def test_empty_query_is_a_clear_error(service, query):
    with pytest.raises(QueryError, match="query is empty"):
        service.retrieve(query)


def test_filters(service):
    only_search = service.retrieve("backups search", context="search", filters={"source_prefix": "kb/search"})
    assert only_search.chunks and {c.source for c in only_search.chunks} == {"kb/search.md"}
    by_header = service.retrieve("replica", context="search", filters={"headers": {"h2": "Replication"}})
    assert by_header.chunks and all(c.headers.get("h2") == "Replication" for c in by_header.chunks)


def test_metadata_filter_and_reindex_keeps_metadata(db, settings, docs_dir):
    svc = make_service(db, settings)
    svc.index_paths([docs_dir / "ops.md"], metadata={"team": "ops"})
    svc.index_paths([docs_dir / "search.md"], metadata={"team": "search"})
    hits = svc.retrieve("backups search", context="search", filters={"metadata": {"team": "search"}})
    assert hits.chunks and {c.source for c in hits.chunks} == {"kb/search.md"}
    again = svc.index_paths([docs_dir / "ops.md"], metadata={"team": "platform"})
    assert again.updated == 1, "a metadata change re-writes the document"
    svc.reindex_all()
    kept = svc.retrieve("backups", context="search", filters={"metadata": {"team": "platform"}})
    assert kept.chunks and {c.source for c in kept.chunks} == {"kb/ops.md"}


def test_collections_are_separate(service, docs_dir):
    assert service.index_texts([("other.md", "", "Backups of another team, elsewhere.")], collection="elsewhere").ok
    assert {c.source for c in service.retrieve("backups", collection="elsewhere").chunks} == {"other.md"}


NEAR_DUPLICATES = [
    ("mirror-a.txt", "Nightly backups are restored with pg_restore into a fresh database cluster every morning."),
    ("mirror-b.txt", "Nightly backups are restored with pg_restore into a fresh database cluster each morning."),
    ("other.txt", "Backups: a weekly copy goes to cold storage, kept for a year in another region."),
]


def test_mmr_diversity_changes_selection(db, settings):
    service = make_service(db, settings)
    report = service.index_texts(((s, s, body) for s, body in NEAR_DUPLICATES), collection="mmr")
    assert report.added == 3
    query = "nightly backups restored with pg_restore"
    plain = service.retrieve(query, context="search", collection="mmr", diversity=0.0, max_chunks=2)
    diverse = service.retrieve(query, context="search", collection="mmr", diversity=1.0, max_chunks=2)
    assert {c.source for c in plain.chunks} == {"mirror-a.txt", "mirror-b.txt"}, "relevance alone takes both"
    assert plain.chunks[0].chunk_id == diverse.chunks[0].chunk_id, "the most relevant is picked first either way"
    assert {c.source for c in diverse.chunks} == {plain.chunks[0].source, "other.txt"}, "the near-duplicate is dropped"
    assert [c.relevance_score for c in plain.chunks] == sorted((c.relevance_score for c in plain.chunks), reverse=True)


def test_concurrent_retrieve_calls(fresh_database, settings, docs_dir):
    service = make_service(fresh_database, settings)
    service.index_paths([docs_dir])
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(5):
                service.retrieve("backups replica", context="agent")
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


LONG_GUIDE = "# Long guide\n\n## Everything\n\n" + "".join(
    f"Paragraph {i} talks about routine maintenance of the cluster and its nodes.\n\n" for i in range(300)
).replace("Paragraph 150 talks about routine", "Paragraph 150 explains the zebra quorum election, unlike any other")


def test_a_parent_larger_than_the_budget_becomes_a_window_around_its_match(db, settings, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "long.md").write_text(LONG_GUIDE)
    svc = make_service(db, settings)
    assert svc.index_paths([tmp_path / "long.md"]).added == 1
    result = svc.retrieve("zebra quorum election", context="workflow", max_tokens=300, max_chunks=3)
    top = result.chunks[0]
    assert top.is_parent and "zebra quorum election" in top.content
    assert top.start_char <= top.match_start < top.match_end <= top.end_char
    assert LONG_GUIDE[top.start_char : top.end_char] == top.content
    assert LONG_GUIDE[top.match_start : top.match_end] in top.content
    assert len(top.content) < len(LONG_GUIDE) // 10, "cut to a window, not the whole section"
    assert result.total_tokens <= 300 and "[… truncated]" not in result.formatted_context


def test_every_result_carries_its_matched_span(service, connection):
    for parents in (True, False):
        result = service.retrieve("backups restore replica", context="chatbot", return_parents=parents)
        assert result.chunks
        for chunk in result.chunks:
            doc = connection.execute(
                text("SELECT content FROM documents WHERE source=:s"), {"s": chunk.source}
            ).scalar()
            assert chunk.start_char <= chunk.match_start < chunk.match_end <= chunk.end_char
            assert doc[chunk.start_char : chunk.end_char] == chunk.content
            if not parents:
                assert (chunk.match_start, chunk.match_end) == (chunk.start_char, chunk.end_char)
            assert chunk.to_dict()["match_start"] == chunk.match_start


def test_parents_are_windowed_not_dropped_within_a_tight_budget(db, settings, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sections = "".join(
        f"## Topic {i}\n\n"
        + "".join(f"Topic {i} covers shared storage volumes, note {j}. " for j in range(40))
        + "\n\n"
        for i in range(12)
    )
    (tmp_path / "guide.md").write_text("# Guide\n\n" + sections)
    svc = make_service(db, settings)
    svc.index_paths([tmp_path / "guide.md"])
    result = svc.retrieve("shared storage volumes", context="workflow", max_chunks=8, max_tokens=1300)
    candidates, _ = svc.ranked_candidates("shared storage volumes", context="workflow", max_chunks=8)
    sections = {c.parent for c in candidates if c.parent is not None}
    assert len(sections) >= 5
    assert len(result.chunks) == min(8, len(sections)), "no section found is dropped for the budget"
    assert all(c.is_parent for c in result.chunks) and result.total_tokens <= 1300
    assert all(len(c.content) < 1500 for c in result.chunks), "sections of ~2,000 characters are windowed"


def test_many_sections_asked_for_keep_the_depth_within_bounds(service):
    result = service.retrieve("backups", context="workflow", max_chunks=1000, return_parents=True)
    assert result.chunks  # 4 children per section would ask HNSW for 4000 (its limit is 1000)


def test_ef_search_grows_with_the_collection(service, connection, monkeypatch):
    """The vector arm's candidate list comes from the collection's size, read in the preset's statement."""
    from rag_service.db.search_request import EF_SEARCH_REFERENCE_CHUNKS, ef_search_for
    from rag_service.retrieve import retriever

    used: list[int] = []
    real_search = retriever.fused_search

    def recording(session, request):  # type: ignore[no-untyped-def]
        used.append(request.ef_search)
        return real_search(session, request)

    monkeypatch.setattr(retriever, "fused_search", recording)
    base = service.settings.hnsw_ef_search
    assert service.retrieve("backups", context="search", return_parents=False).chunks
    assert used == [ef_search_for(0, base=base, depth=service.preset("search").candidate_k)]
    large = 10 * EF_SEARCH_REFERENCE_CHUNKS
    connection.execute(text("UPDATE collection_stats SET chunk_count = :n WHERE collection = 'default'"), {"n": large})
    used.clear()
    assert service.retrieve("backups", context="search", return_parents=False).chunks
    assert used == [ef_search_for(large, base=base, depth=service.preset("search").candidate_k)]
    assert used[0] > base


def test_result_chunks_are_in_rank_order_while_the_context_groups_them_by_source(db, settings):
    service = make_service(db, settings)
    texts = [
        ("a.md", "", "# Restore\n\nNightly backups are restored with pg_restore into a fresh cluster every morning.\n\n"
         "# Storage\n\nDisks are replaced every five years; the backups team keeps spares in the rack.\n"),
        ("b.md", "", "# Nightly\n\nNightly backups are restored by the operations team into staging.\n"),
    ]
    service.index_texts(texts, collection="ranked", strategy="markdown")
    result = service.retrieve(
        "nightly backups restored with pg_restore", context="search", collection="ranked", diversity=0.0
    )
    scores = [c.relevance_score for c in result.chunks]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3, scores
    assert [c.source for c in result.chunks] == ["a.md", "b.md", "a.md"]
    assert [s.source for s in result.sources] == ["a.md", "b.md"], "the context cites by source, best first"


def test_max_chunks_counts_passages_when_overlapping_results_of_one_document_are_joined(db, settings, docs_dir):
    """The ``search`` preset on plain text whose chunks overlap: the formatter joins overlapping results into one
    passage; ``max_chunks`` still gets as many passages as asked (it got fewer: the joined ones were lost)."""
    for n in range(4):  # four documents of a few overlapping chunks each
        sentences = [f"Backup note {i} of site {n}: restore drill {i} for the red cluster." for i in range(14)]
        (docs_dir / f"drills{n}.txt").write_text(" ".join(sentences))
    svc = make_service(db, settings)
    report = svc.index_paths([docs_dir], collection="drills", strategy="recursive")
    assert report.failed == [] and report.chunks_written >= 12, report.lines()
    asked = 6
    result = svc.retrieve("backup restore drill red cluster", context="search", collection="drills", max_chunks=asked)
    spans = sorted((c.source, c.start_char, c.end_char) for c in result.chunks)
    assert all(a[0] != b[0] or a[2] < b[1] for a, b in itertools.pairwise(spans)), spans  # joined: apart
    assert len(result.chunks) == asked, spans


def test_max_chunks_is_filled_when_documents_share_boilerplate(db, settings):
    """The search read max(candidate_k, max_chunks) rows and dedupe kept one of each text: 30 documents opening
    with one shared paragraph gave the search preset 2 results of 12, many distinct matches unread."""
    boiler = "Prompt caching note: caching stores the prompt prefix so a repeated prompt costs less to run again."
    filler = "filler text about other things. " * 20
    docs = [
        (f"dup/doc{i:02}.txt", "", f"{boiler}\n\n{filler}\n\nTopic {i}: prompt caching example {i} and breakpoint {i}.")
        for i in range(30)
    ]
    svc = make_service(db, settings)
    svc.index_texts(docs, collection="dup", strategy="recursive")
    result = svc.retrieve("prompt caching", context="search", collection="dup", max_tokens=100_000)
    assert len(result.chunks) == 12 and len({c.content for c in result.chunks}) == 12, result.metrics
