"""Loading BEIR datasets: the real SciFact, and every layout or format error on small fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_service.errors import ConfigurationError, DocumentReadError
from rag_service.evaluation import BeirDataset, BeirDoc, doc_text, load_beir
from tests.shared_data import scifact_dir


@pytest.fixture(scope="module")
def scifact() -> BeirDataset:
    return load_beir(scifact_dir())


def test_scifact_test_split_counts(scifact: BeirDataset) -> None:
    assert len(scifact.corpus) == 5183
    assert len(scifact.queries) == 300
    assert scifact.queries.keys() == scifact.qrels.keys()
    assert sum(len(grades) for grades in scifact.qrels.values()) == 339
    assert scifact.split == "test"
    doc = scifact.corpus["4983"]
    assert doc.title.startswith("Microstructural development of human newborn cerebral white matter")
    assert doc_text(doc) == f"{doc.title}\n\n{doc.text}"
    assert scifact.queries["1"] == "0-dimensional biomaterials show inductive properties."


def test_scifact_train_split() -> None:
    train = load_beir(scifact_dir(), split="train")
    assert len(train.queries) == 809
    assert sum(len(grades) for grades in train.qrels.values()) == 919


def test_doc_text_without_title_is_the_text() -> None:
    assert doc_text(BeirDoc(doc_id="1", title="", text="Body.")) == "Body."
    assert doc_text(BeirDoc(doc_id="1", title="  ", text="Body.")) == "Body."
    assert doc_text(BeirDoc(doc_id="1", title="Title", text="")) == "Title"


def _write_dataset(
    root: Path,
    *,
    corpus: str | None = None,
    queries: str | None = None,
    qrels: dict[str, str] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    docs = [{"_id": "d1", "title": "T1", "text": "one"}, {"_id": "d2", "text": "two"}]
    default_corpus = "".join(json.dumps(doc) + "\n" for doc in docs)
    default_queries = '{"_id": "q1", "text": "first?"}\n{"_id": "q2", "text": "unjudged"}\n'
    (root / "corpus.jsonl").write_text(default_corpus if corpus is None else corpus, encoding="utf-8")
    (root / "queries.jsonl").write_text(default_queries if queries is None else queries, encoding="utf-8")
    (root / "qrels").mkdir(exist_ok=True)
    for split, text in (qrels or {"test": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td9\t0\n"}).items():
        (root / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
    return root


def test_small_dataset_keeps_only_judged_queries(tmp_path: Path) -> None:
    dataset = load_beir(_write_dataset(tmp_path))
    assert dataset.corpus == {"d1": BeirDoc("d1", "T1", "one"), "d2": BeirDoc("d2", "", "two")}
    assert dataset.queries == {"q1": "first?"}
    assert dataset.qrels == {"q1": {"d1": 2, "d9": 0}}  # d9 is not in the corpus: kept, as in BEIR


def test_qrels_header_is_optional_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    dataset = load_beir(_write_dataset(tmp_path, qrels={"test": "q1\td1\t1\r\n\nq2\td2\t1\n"}))
    assert dataset.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}}


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl"])
def test_missing_jsonl_file(tmp_path: Path, name: str) -> None:
    (_write_dataset(tmp_path) / name).unlink()
    with pytest.raises(DocumentReadError, match=f"{name} is missing"):
        load_beir(tmp_path)


def test_missing_directory_and_qrels_folder(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError, match="does not exist"):
        load_beir(tmp_path / "nope")
    root = _write_dataset(tmp_path / "ds")
    for path in (root / "qrels").iterdir():
        path.unlink()
    (root / "qrels").rmdir()
    with pytest.raises(DocumentReadError, match=r"qrels is missing"):
        load_beir(root)


def test_unknown_split_lists_the_existing_ones(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path, qrels={"train": "q1\td1\t1\n", "dev": "q1\td1\t1\n"})
    with pytest.raises(ConfigurationError, match=r"test\.tsv is missing; .*splits found: dev, train$"):
        load_beir(root)
    with pytest.raises(ConfigurationError, match="not a plain name"):
        load_beir(root, split="../train")


@pytest.mark.parametrize(
    ("corpus", "message"),
    [
        ('{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": \n', r"corpus\.jsonl line 2 is not valid JSON"),
        ('{"_id": "d1", "text": "ok"}\n\n["list"]\n', r"corpus\.jsonl line 3 is not a JSON object"),
        ('{"text": "no id"}\n', r"line 1: '_id' must be a non-empty string"),
        ('{"_id": 7, "text": "int id"}\n', r"line 1: '_id' must be a non-empty string"),
        ('{"_id": "d1"}\n', r"line 1: 'text' must be a string"),
        ('{"_id": "d1", "title": 3, "text": "x"}\n', r"line 1: 'title' must be a string"),
        ('{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n', r"line 2: duplicate _id 'd1'"),
    ],
)
def test_malformed_corpus_names_the_line(tmp_path: Path, corpus: str, message: str) -> None:
    with pytest.raises(DocumentReadError, match=message):
        load_beir(_write_dataset(tmp_path, corpus=corpus))


def test_non_utf8_line(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path)
    (root / "queries.jsonl").write_bytes(b'{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": "\xff"}\n')
    with pytest.raises(DocumentReadError, match=r"queries\.jsonl line 2 is not valid UTF-8"):
        load_beir(root)


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        ("query-id\tcorpus-id\tscore\nq1 d1 1\n", r"test\.tsv line 2 has 1 tab-separated fields"),
        ("q1\td1\trelevant\n", r"test\.tsv line 1: score 'relevant' is not an integer"),
        ("q1\t\t1\n", r"line 1: query-id and corpus-id must be non-empty"),
        ("q1\td1\t1\nq1\td1\t2\n", r"line 2: duplicate row for query 'q1', document 'd1'"),
        ("q1\td1\t1\nq7\td1\t1\n", r"test\.tsv line 2: query id 'q7' is not in queries\.jsonl"),
    ],
)
def test_malformed_qrels_names_the_line(tmp_path: Path, qrels: str, message: str) -> None:
    with pytest.raises(DocumentReadError, match=message):
        load_beir(_write_dataset(tmp_path, qrels={"test": qrels}))


def test_error_messages_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError) as info:
        load_beir(_write_dataset(tmp_path, corpus='{"_id": "d1",\n'))
    assert "\n" not in str(info.value)


def test_a_judged_query_without_text_names_its_line_before_any_work(tmp_path: Path) -> None:
    queries = '{"_id": "q2", "text": ""}\n{"_id": "q1", "text": "  "}\n'  # q2 is not judged: left out, not refused
    with pytest.raises(DocumentReadError) as raised:
        load_beir(_write_dataset(tmp_path, queries=queries))
    assert str(raised.value) == (
        f"{tmp_path / 'queries.jsonl'} line 2: query 'q1' has no text; write its question, or remove the query and "
        "its qrels rows"
    )


def test_qrels_without_a_judged_row_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError) as raised:
        load_beir(_write_dataset(tmp_path, qrels={"test": "query-id\tcorpus-id\tscore\n"}))
    assert str(raised.value).startswith(f"{tmp_path / 'qrels' / 'test.tsv'} has no judged rows;")
