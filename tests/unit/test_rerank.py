"""The reranking stage, against a tiny cross-encoder built here: no network, no model hub."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from rag_service.errors import ConfigurationError, ModelLoadError
from rag_service.retrieve.rerank import (
    CrossEncoderReranker,
    FlashRankReranker,
    FunctionReranker,
    OnnxReranker,
    RerankerCache,
    RerankScore,
    export_onnx,
    load_reranker,
    rerank,
)
from rag_service.retrieve.rerank import hub as rerank_hub

WORDS = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "how",
    "does",
    "work",
    "what",
    "agent",
    "factory",
    "database",
    "vector",
    "search",
    "rerank",
    "query",
    "document",
    "postgres",
    "index",
    "chunk",
    "model",
    "build",
    "create",
    "use",
    "with",
    "for",
    "on",
    "it",
    "this",
    "that",
    "fast",
    "slow",
]
QUERY = "how does the agent factory work"
DOCUMENTS = [
    "the agent factory is how agents work",
    "postgres index for vector search",
    "a rerank model for the query",
    "this chunk is slow",
    "create a database with postgres",
    "the agent factory is how agents work",  # a duplicate: equal scores keep input order
    "what does it use for fast search",
    "model",
]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT cross-encoder with random weights and a 40-word WordPiece vocabulary."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s", "##ing", "##ed"]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # from_pretrained reads vocab.txt on transformers 4 and 5 (5 ignores a vocab_file= argument)
    tokenizer = BertTokenizer.from_pretrained(str(path))
    for text in (QUERY, *DOCUMENTS):
        assert tokenizer.unk_token_id not in tokenizer(text)["input_ids"], text
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=0.3,  # wide enough that the pairs get clearly different scores
    )
    BertForSequenceClassification(config).eval().save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


@pytest.fixture(scope="session")
def tiny_logits(tiny_model: Path) -> np.ndarray:
    """The model's raw logits for (QUERY, doc), computed with plain transformers."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_model)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    logits = []
    with torch.no_grad():
        for doc in DOCUMENTS:  # one pair at a time: no padding involved
            enc = tokenizer(QUERY, doc, return_tensors="pt")
            logits.append(float(model(**enc).logits[0, 0]))
    return np.asarray(logits)


@pytest.fixture(scope="session")
def cross_encoder(tiny_model: Path) -> CrossEncoderReranker:
    reranker = load_reranker(str(tiny_model))
    assert isinstance(reranker, CrossEncoderReranker)
    return reranker


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_cross_encoder_order_and_scores_follow_the_model(
    cross_encoder: CrossEncoderReranker, tiny_model: Path, tiny_logits: np.ndarray
) -> None:
    assert cross_encoder.name == f"cross-encoder:{tiny_model}"
    assert cross_encoder.returns_logits
    distinct = np.delete(tiny_logits, 5)  # all but the duplicate: clearly apart, so the order means something
    assert np.diff(np.sort(distinct)).min() > 1e-3
    ranked = rerank(cross_encoder, QUERY, DOCUMENTS, top_k=len(DOCUMENTS))
    expected = [int(i) for i in np.argsort(-tiny_logits, kind="stable")]
    assert [r.index for r in ranked] == expected
    for r in ranked:
        assert r.score == pytest.approx(tiny_logits[r.index], abs=1e-5)
    positions = [r.index for r in ranked]
    assert positions.index(0) < positions.index(5)  # the duplicate's tie keeps input order


def test_top_k_keeps_the_best(cross_encoder: CrossEncoderReranker, tiny_logits: np.ndarray) -> None:
    top = rerank(cross_encoder, QUERY, DOCUMENTS, top_k=3)
    assert [r.index for r in top] == [int(i) for i in np.argsort(-tiny_logits, kind="stable")[:3]]
    assert rerank(cross_encoder, QUERY, [], top_k=3) == []


def test_onnx_int8_export_tracks_the_model(tiny_model: Path, tiny_logits: np.ndarray, tmp_path: Path) -> None:
    reranker = load_reranker(f"onnx:{tiny_model}", cache_dir=tmp_path)
    assert isinstance(reranker, OnnxReranker)
    assert reranker.name == f"onnx-int8:{tiny_model}"
    exports = list((tmp_path / "onnx").iterdir())
    assert len(exports) == 1 and (exports[0] / "model.onnx").is_file()
    scores = np.asarray(reranker.score(QUERY, DOCUMENTS))
    # int8 weights move the scores a little (here: one neighbouring pair swaps, 5% of the range)
    assert _spearman(scores, tiny_logits) > 0.85
    assert np.abs(scores - tiny_logits).max() < 0.15 * np.ptp(tiny_logits)
    # a second load reuses the export (the file is not written again), and a directory holding
    # model.onnx loads as it is
    written = (exports[0] / "model.onnx").stat().st_mtime_ns
    again = load_reranker(f"onnx:{tiny_model}", cache_dir=tmp_path)
    assert again is not None and list((tmp_path / "onnx").iterdir()) == exports
    assert (exports[0] / "model.onnx").stat().st_mtime_ns == written
    direct = load_reranker(f"onnx:{exports[0]}")
    assert direct is not None and direct.score(QUERY, DOCUMENTS) == pytest.approx(list(scores), abs=1e-6)


_LOAD_AGAIN = """
import json, sys
from pathlib import Path
from rag_service.retrieve.rerank import load_reranker
reranker = load_reranker("onnx:" + sys.argv[1], cache_dir=Path(sys.argv[2]))
scores = reranker.score("a query", ["one document", "another, longer document"])
print(json.dumps({"name": reranker.name, "scores": len(scores), "torch": "torch" in sys.modules}))
"""


def test_an_exported_reranker_starts_without_torch(tiny_model: Path, tmp_path: Path) -> None:
    import subprocess

    assert load_reranker(f"onnx:{tiny_model}", cache_dir=tmp_path) is not None  # exports (torch, once)
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_AGAIN, str(tiny_model), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": f"onnx-int8:{tiny_model}", "scores": 2, "torch": False}


def test_onnx_fp32_export_equals_the_model(tiny_model: Path, tiny_logits: np.ndarray, tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_model))
    target = export_onnx(model, AutoTokenizer.from_pretrained(str(tiny_model)), tmp_path / "fp32", quantize=False)
    reranker = OnnxReranker(target, batch_size=3)  # several padded batches
    assert reranker.score(QUERY, DOCUMENTS) == pytest.approx(list(tiny_logits), abs=1e-4)


def test_flashrank_backend_runs_a_model_from_its_cache(
    tiny_model: Path, tiny_logits: np.ndarray, tmp_path: Path
) -> None:
    """A FlashRank-layout directory made from the tiny model loads offline and gives raw logits."""
    from flashrank.Config import model_file_map
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    name = "ms-marco-TinyBERT-L-2-v2"
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_model))
    exported = export_onnx(model, AutoTokenizer.from_pretrained(str(tiny_model)), tmp_path / "x", quantize=False)
    model_dir = tmp_path / "cache" / "flashrank" / name
    shutil.copytree(exported, model_dir)
    (model_dir / "model.onnx").rename(model_dir / model_file_map[name])
    tokens = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]"}
    (model_dir / "special_tokens_map.json").write_text(json.dumps(tokens))

    reranker = load_reranker(f"flashrank:{name}", cache_dir=tmp_path / "cache")
    assert isinstance(reranker, FlashRankReranker) and reranker.name == f"flashrank:{name}"
    assert reranker.score(QUERY, DOCUMENTS) == pytest.approx(list(tiny_logits), abs=1e-4)


@pytest.mark.parametrize("spec", ["none", "NONE", " None "])
def test_none_turns_reranking_off(spec: str) -> None:
    assert load_reranker(spec) is None


@pytest.mark.parametrize("prefix", ["", "cross-encoder:", "onnx:"])
def test_missing_path_fails_fast_naming_it(prefix: str, tmp_path: Path, network: list[object]) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelLoadError, match="no-such-model") as err:
        load_reranker(f"{prefix}{missing}", cache_dir=tmp_path)
    assert network == [], "a missing path is not looked up on the hub"
    assert "\n" not in str(err.value) and "RAG_RERANK_MODEL" in str(err.value)


@pytest.mark.parametrize("spec", ["", "flashrank:", "onnx: "])
def test_specs_without_a_model_are_rejected(spec: str) -> None:
    with pytest.raises(ModelLoadError, match="RAG_RERANK_MODEL"):
        load_reranker(spec)


@pytest.mark.parametrize("prefix", ["", "cross-encoder:", "onnx:"])
def test_uncached_hub_model_fails_fast_offline(prefix: str, tmp_path: Path, network: list[object]) -> None:
    with pytest.raises(ModelLoadError, match="offline mode is on") as err:
        load_reranker(f"{prefix}rag-service-tests/no-such-cross-encoder", cache_dir=tmp_path)
    assert network == [], "offline, nothing waits on the network"
    assert "rag-service-tests/no-such-cross-encoder" in str(err.value)


def test_default_model_fails_fast_offline_when_not_cached(tmp_path: Path, network: list[object]) -> None:
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache("cross-encoder/ms-marco-MiniLM-L-6-v2", "config.json"), str):
        pytest.skip("the default reranker is in this machine's Hugging Face cache")
    with pytest.raises(ModelLoadError, match="cross-encoder/ms-marco-MiniLM-L-6-v2"):
        load_reranker("ms-marco-MiniLM-L-6-v2", cache_dir=tmp_path)
    assert network == [], "offline, nothing waits on the network"


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every attempt to reach the network (a connect or a name lookup), refused and recorded."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args[1:] if args and isinstance(args[0], socket.socket) else args)
        raise OSError("tests/unit/test_rerank.py: no network here")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, float | None]]:
    """Every socket connect as (address, the socket's timeout), passed on to the real connect."""
    seen: list[tuple[object, float | None]] = []
    real = socket.socket.connect

    def connect(sock: socket.socket, address: object) -> None:
        seen.append((address, sock.gettimeout()))
        real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound here but not listening: connections are refused, and nobody else can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A local port that accepts connections and never answers: a network that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield int(server.getsockname()[1])
    server.close()


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Offline mode off, with the hub at an address on this machine (set per test)."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.setattr(rerank_hub, "PROBE_TIMEOUT_S", 0.5)
    return monkeypatch


@pytest.mark.parametrize("hub", ["refused", "silent"])
@pytest.mark.parametrize(
    "spec", ["cross-encoder:rag-service-tests/no-such-cross-encoder", "flashrank:ms-marco-TinyBERT-L-2-v2"]
)
def test_unreachable_hub_fails_fast_online(
    online: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    hub: str,
    spec: str,
    tmp_path: Path,
    connections: list[tuple[object, float | None]],
) -> None:
    port = request.getfixturevalue("closed_port" if hub == "refused" else "silent_server")
    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(ModelLoadError, match="unreachable") as err:
        load_reranker(spec, cache_dir=tmp_path)
    # one probe with the probe's timeout, then it gives up: no download attempt, no retries
    assert connections == [(("127.0.0.1", port), rerank_hub.PROBE_TIMEOUT_S)]
    assert spec.partition(":")[2] in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "flashrank" / "ms-marco-TinyBERT-L-2-v2").exists()


def test_flashrank_missing_model_fails_fast_offline(tmp_path: Path, network: list[object]) -> None:
    with pytest.raises(ModelLoadError, match="offline mode is on") as err:
        load_reranker("flashrank:ms-marco-MiniLM-L-12-v2", cache_dir=tmp_path)
    assert network == [], "offline, nothing waits on the network"
    assert "ms-marco-MiniLM-L-12-v2" in str(err.value) and str(tmp_path) in str(err.value)


def test_flashrank_unknown_model_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="ms-marco-MiniLM-L-12-v2"):
        load_reranker("flashrank:no-such-ranker", cache_dir=tmp_path)


def test_rerank_sorts_by_score_with_stable_ties() -> None:
    reranker = FunctionReranker(lambda q, d: float(len(set(q.split()) & set(d.split()))))
    ranked = rerank(reranker, "a b c", ["a", "a b", "x", "b a", "c b a"], top_k=4)
    assert ranked == [RerankScore(4, 3.0), RerankScore(1, 2.0), RerankScore(3, 2.0), RerankScore(0, 1.0)]
    with pytest.raises(ConfigurationError, match=r"top_k \(0\)"):
        rerank(reranker, "q", ["d"], top_k=0)


def _inside(thread: threading.Thread, function: Callable[..., object]) -> bool:
    """Whether ``thread`` is running ``function`` now (anywhere down its stack, e.g. blocked on a lock)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False


def test_cache_loads_once_and_remembers_failures() -> None:
    calls: list[str] = []
    lock = threading.Lock()
    loading, release = threading.Event(), threading.Event()

    def loader(spec: str, *, cache_dir: Path | None, max_length: int) -> FunctionReranker | None:
        with lock:
            calls.append(spec)
        if spec == "m" and not loading.is_set():
            loading.set()
            assert release.wait(60), "the test never let the load finish"
        if spec == "broken":
            raise ModelLoadError("cannot load reranker model broken: no such thing; set RAG_RERANK_MODEL")
        return None if spec == "none" else FunctionReranker(lambda q, d: 0.0, name=spec)

    cache = RerankerCache(loader=loader)
    results: list[object] = []
    start = threading.Barrier(8)

    def get() -> None:
        start.wait()
        results.append(cache.get("m"))

    threads = [threading.Thread(target=get) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert loading.wait(60)
    # the load holds until every other thread is inside get() (or, with a broken cache, done): they
    # provably overlap it
    deadline = time.monotonic() + 60
    while not all(_inside(thread, RerankerCache.get) or not thread.is_alive() for thread in threads):
        assert time.monotonic() < deadline, "the threads never all called get()"
        release.wait(0.001)  # polling a condition, not a pause the test relies on
    release.set()
    for thread in threads:
        thread.join()
    assert calls == ["m"] and len(results) == 8 and len({id(r) for r in results}) == 1
    assert cache.get("none") is None and cache.get("none") is None

    for _ in range(3):
        with pytest.raises(ModelLoadError, match="no such thing"):
            cache.get("broken")
    assert calls.count("broken") == 1

    cache.reset("broken")
    with pytest.raises(ModelLoadError):
        cache.get("broken")
    assert calls.count("broken") == 2
    cache.reset()
    cache.get("m")
    assert calls.count("m") == 2


def test_cache_remembers_a_real_load_failure(tmp_path: Path) -> None:
    cache = RerankerCache(cache_dir=tmp_path)
    missing = str(tmp_path / "gone")
    with pytest.raises(ModelLoadError, match="gone") as first:
        cache.get(missing)
    with pytest.raises(ModelLoadError) as again:
        cache.get(missing)
    assert str(again.value) == str(first.value), "the remembered failure, not a new attempt"


def test_ranked_order_puts_nan_last_and_keeps_ties_in_input_order() -> None:
    from rag_service.retrieve.rerank import ranked_order

    nan = float("nan")
    assert ranked_order([1.0, nan, 3.0, nan, 2.0, 3.0]) == [2, 5, 4, 0, 1, 3]
    assert ranked_order([]) == []
