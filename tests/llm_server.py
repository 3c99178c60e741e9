"""A small OpenAI-compatible chat server for tests: a real HTTP server on localhost, canned answers.

Modes (``FakeLLM.mode``): ``ok`` answers summaries with ``"LLM summary: <first words>"`` and rating
requests with 10 for each passage containing ``FakeLLM.relevant_word``, else 0; ``slow`` sleeps
``FakeLLM.delay_s`` before answering; ``error`` answers HTTP 500; ``nonsense`` answers text that is not
a JSON array. ``FakeLLM.summary``, when set, answers every summary request; ``FakeLLM.on_request``, when set,
is called with each request's body before it is answered. Every request body and its Authorization header
are recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rag_service.llm import RERANK_PROMPT, SUMMARY_PROMPT


class FakeLLM:
    """The server's state; ``base_url`` is what ``RAG_LLM_BASE_URL`` takes."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.delay_s = 2.0
        self.relevant_word = "replica"
        self.summary: str | None = None
        self.on_request: Callable[[dict[str, Any]], None] | None = None
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # a 50 ms poll: stop() waits for serve_forever's next poll (0.5 s by default, at every test's end)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict[str, Any]) -> str:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if self.mode == "nonsense":
            return "I think the second one is best."
        if system == SUMMARY_PROMPT:
            return self.summary if self.summary is not None else "LLM summary: " + " ".join(user.split()[:6])
        if system == RERANK_PROMPT:
            passages = re.split(r"\n\n\[\d+\] ", "\n\n" + user.split("Passages:\n", 1)[1])[1:]
            return json.dumps([10 if self.relevant_word in p.lower() else 0 for p in passages])
        return "?"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                fake.auth.append(self.headers.get("Authorization"))
                if fake.on_request is not None:
                    fake.on_request(body)
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                elif fake.mode == "error":
                    self._send(500, {"error": {"message": "model crashed"}})
                else:
                    if fake.mode == "slow":
                        time.sleep(fake.delay_s)
                    content = fake.answer(body)
                    self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        return Handler
