"""The LLM client (``rag_service.llm``) against a real local HTTP server that misbehaves on demand (the audit's
``fake_llm.py`` in spirit): every failure is one ``LLMError`` line, and no call outlives its deadline."""

from __future__ import annotations

import json
import multiprocessing
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rag_service.config import Settings
from rag_service.errors import LLMError
from rag_service.llm import OpenAICompatibleChat, chat_model_for, rate_passages

CHILD_TIMEOUT_S = 20
#: a handler's behaviour: it answers the request (its JSON body given) through the handler's helpers
Behaviour = Callable[["Handler", dict[str, Any]], None]


class Handler(BaseHTTPRequestHandler):
    """Keep-alive HTTP/1.1; ``server.behaviour`` decides the answer."""

    protocol_version = "HTTP/1.1"
    server: Endpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.auth.append(self.headers.get("Authorization"))
        self.server.behaviour(self, body)

    def send(self, status: int, data: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def completion(self, content: str) -> None:
        self.send(200, json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode())


def echo(handler: Handler, body: dict[str, Any]) -> None:
    """The user message back, with the client's port (which connection asked)."""
    handler.completion(f"{body['messages'][-1]['content']} via port {handler.client_address[1]}")


class Endpoint(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.behaviour: Behaviour = echo
        self.auth: list[str | None] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def chat(endpoint: Endpoint) -> Iterator[OpenAICompatibleChat]:
    client = OpenAICompatibleChat(endpoint.base_url, "fake", timeout_s=0.5)
    yield client
    client.close()


def ask(chat: OpenAICompatibleChat, text: str) -> str:
    return chat.complete([{"role": "system", "content": "s"}, {"role": "user", "content": text}], max_tokens=5)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_asks_on_a_connection_of_its_own(chat):
    parents = ask(chat, "parent")
    assert parents.startswith("parent via port ")

    def in_child() -> None:
        answer = ask(chat, "child")  # the parent's keep-alive socket would carry it (and another's answer back)
        raise SystemExit(0 if answer.startswith("child via port ") and answer[6:] != parents[7:] else 1)

    child = multiprocessing.get_context("fork").Process(target=in_child, daemon=True)
    child.start()
    child.join(CHILD_TIMEOUT_S)
    assert child.exitcode == 0, "the child asked on its parent's connection (or failed)"
    assert ask(chat, "parent") == parents, "the parent keeps its connection"


def trickle(handler: Handler, body: dict[str, Any]) -> None:
    """Headers at once, then the body a byte every 0.1 s: each read is quick, the answer takes 3 s."""
    data = json.dumps({"choices": [{"message": {"content": "late"}}]}).encode()
    data = b" " * (30 - len(data) % 30) + data
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    try:
        for start in range(0, len(data), len(data) // 30):
            handler.wfile.write(data[start : start + len(data) // 30])
            handler.wfile.flush()
            time.sleep(0.1)
    except OSError:  # the client left
        pass


def test_the_timeout_bounds_the_whole_call_not_each_read(endpoint, chat):
    endpoint.behaviour = trickle
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"did not answer within 0\.5 s \(RAG_LLM_TIMEOUT_S\)"):
        ask(chat, "slowly")
    assert time.monotonic() - started < 1.5


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_refused_connection_is_an_llm_error():
    chat = OpenAICompatibleChat(f"http://127.0.0.1:{_unused_port()}/v1", "fake", timeout_s=0.5)
    with pytest.raises(LLMError, match="could not be reached"):
        ask(chat, "anyone?")
    chat.close()


@pytest.mark.parametrize(
    ("url", "key"),
    [("http://[::1/v1", None), ("http://127.0.0.1:99999/v1", None), ("http://127.0.0.1:9/v1", "sk-clé")],
)
def test_anything_the_client_raises_is_an_llm_error(url, key):
    chat = OpenAICompatibleChat(url, "fake", api_key=key, timeout_s=0.5)
    with pytest.raises(LLMError, match=r"could not be (asked|reached): \w+"):
        ask(chat, "anyone?")
    chat.close()


def echo_auth(handler: Handler, body: dict[str, Any]) -> None:
    handler.send(400, f"bad request; you sent Authorization: {handler.headers.get('Authorization')}".encode())


def status_500(handler: Handler, body: dict[str, Any]) -> None:
    handler.send(500, b'{"error": {"message": "model crashed"}}')


def test_an_echoed_key_is_never_shown(endpoint):
    endpoint.behaviour = echo_auth
    chat = OpenAICompatibleChat(endpoint.base_url, "fake", api_key="sk-s3cret", timeout_s=0.5)
    with pytest.raises(LLMError) as raised:
        ask(chat, "who am I?")
    chat.close()
    assert str(raised.value).endswith("answered HTTP 400: bad request; you sent Authorization: Bearer ***")


@pytest.mark.parametrize("userinfo", ["user:s3cret", "user:s%33cret", "s3cret-token"])
def test_the_urls_userinfo_is_never_shown(endpoint, userinfo):
    endpoint.behaviour = status_500
    chat = OpenAICompatibleChat(endpoint.base_url.replace("//", f"//{userinfo}@"), "fake", timeout_s=0.5)
    with pytest.raises(LLMError) as raised:
        ask(chat, "anyone?")
    chat.close()
    assert str(raised.value).startswith("http://***@127.0.0.1:") and "s3cret" not in str(raised.value)
    assert "s%33cret" not in str(raised.value)


@pytest.mark.parametrize("userinfo", ["user:s3cret", "user:s%33cret", "s3cret-token"])
def test_the_basic_credentials_of_the_urls_userinfo_are_never_shown(endpoint, userinfo):
    endpoint.behaviour = echo_auth  # httpx sends the userinfo as Authorization: Basic base64(user:password)
    chat = OpenAICompatibleChat(endpoint.base_url.replace("//", f"//{userinfo}@"), "fake", timeout_s=0.5)
    with pytest.raises(LLMError) as raised:
        ask(chat, "anyone?")
    chat.close()
    assert endpoint.auth[0] is not None and endpoint.auth[0].startswith("Basic ")
    assert str(raised.value).endswith("you sent Authorization: Basic ***")


def test_a_key_read_with_its_newline_is_sent_without_it(endpoint):
    settings = Settings(llm_base_url=endpoint.base_url, llm_model="fake", llm_api_key="sk-s3cret\n")
    chat = chat_model_for(settings)
    assert chat is not None
    assert ask(chat, "hello").startswith("hello via port")
    chat.close()
    assert endpoint.auth == ["Bearer sk-s3cret"]


def answering(content: str) -> Behaviour:
    return lambda handler, body: handler.completion(content)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("[NaN, NaN, NaN]", "the LLM's ratings are not all finite numbers: '[NaN, NaN, NaN]'"),
        ("[10, Infinity, 0]", "the LLM's ratings are not all finite numbers: '[10, Infinity, 0]'"),
        ("[10, 1e999, 0]", "the LLM's ratings are not all finite numbers: '[10, 1e999, 0]'"),
        ("[99, -5, 7]", "the LLM rated 2 of 3 passages outside 0-10 (99, -5), as if on another scale: '[99, -5, 7]'"),
        ("[10, 10.5, 0]", "the LLM rated 1 of 3 passages outside 0-10 (10.5), as if on another scale"),
    ],
)
def test_ratings_that_are_not_finite_or_out_of_range_are_an_unusable_answer(endpoint, chat, answer, reason):
    endpoint.behaviour = answering(answer)
    with pytest.raises(LLMError) as raised:
        rate_passages(chat, "q", ["one", "two", "three"])
    assert str(raised.value).startswith(reason)


def test_ratings_in_range_become_relevances(endpoint, chat):
    endpoint.behaviour = answering("[10, 0, 7.5]")
    assert rate_passages(chat, "q", ["one", "two", "three"]) == [1.0, 0.0, 0.75]


def redirect(location: str) -> Behaviour:
    return lambda handler, body: handler.send(307, b"", Location=location)


def cut_off(handler: Handler, body: dict[str, Any]) -> None:
    """Promises 1000 bytes, sends 19 and closes."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    handler.wfile.write(b'{"choices": [{"mess')
    handler.wfile.flush()
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


def silent_close(handler: Handler, body: dict[str, Any]) -> None:
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


@pytest.mark.parametrize(
    ("behaviour", "said"),
    [
        (
            redirect("/elsewhere/v1/chat/completions"),
            "answered HTTP 307, a redirect to http://127.0.0.1:{port}/elsewhere/v1/chat/completions; "
            "set RAG_LLM_BASE_URL to http://127.0.0.1:{port}/elsewhere/v1",
        ),
        (
            redirect("https://user:s3cret@llm.example/login"),
            "answered HTTP 307, a redirect to https://***@llm.example/login",
        ),
        (
            cut_off,
            "broke off its answer: RemoteProtocolError: peer closed connection without sending complete message body "
            "(received 19 bytes, expected 1000)",
        ),
        (silent_close, "did not answer: RemoteProtocolError: Server disconnected without sending a response."),
        (
            lambda handler, body: handler.send(200, b'{"c": "caf\xe9"}'),
            'answered a body that is not UTF-8 (byte 0xe9 at offset 10): \'{"c": "caf\ufffd"}\'',
        ),
        (lambda handler, body: handler.send(200, b"{not json"), "answered a body that is not JSON: '{not json'"),
        (
            lambda handler, body: handler.send(200, b'{"id": "x"}'),
            'answered JSON without a chat completion (choices[0].message.content): \'{"id": "x"}\'',
        ),
    ],
)
def test_each_failure_says_what_happened(endpoint, chat, behaviour, said):
    endpoint.behaviour = behaviour
    with pytest.raises(LLMError) as raised:
        ask(chat, "anyone?")
    port = endpoint.server_address[1]
    assert str(raised.value) == f"http://127.0.0.1:{port}/v1/chat/completions " + said.replace("{port}", str(port))


def test_the_ratings_are_the_array_of_one_number_per_passage(endpoint, chat):
    endpoint.behaviour = answering("[1] is best: [10, 0, 5]")
    assert rate_passages(chat, "q", ["one", "two", "three"]) == [1.0, 0.0, 0.5]
    endpoint.behaviour = answering("[5, 5]")
    with pytest.raises(
        LLMError, match=r"^the LLM's ratings are not a JSON array of 3 numbers \(it gave 2\): '\[5, 5\]'"
    ):
        rate_passages(chat, "q", ["one", "two", "three"])


def test_an_answer_past_the_size_limit_is_not_read_on(endpoint, chat, monkeypatch):
    """The whole body was read into memory: a 3 MB summary was stored, 9 MB went out with a query."""
    import rag_service.llm as llm

    monkeypatch.setattr(llm, "MAX_ANSWER_BYTES", 10_000)
    endpoint.behaviour = lambda handler, body: handler.completion("word " * 5_000)
    with pytest.raises(LLMError, match=r"answered more than 10,000 bytes"):
        ask(chat, "long")
    endpoint.behaviour = echo
    assert ask(chat, "short").startswith("short via port")
