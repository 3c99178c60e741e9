"""An optional OpenAI-compatible chat endpoint (``RAG_LLM_BASE_URL``): document summaries at ingestion and
relevance ratings for reranking at query time.

``ChatModel`` is the interface (one method, ``complete``); ``OpenAICompatibleChat`` speaks
``POST {base_url}/chat/completions`` over httpx, imported only when an endpoint is configured. Every
failure (timeout, connection, HTTP status, a body without a completion) is an ``LLMError`` with a
one-line reason, so callers degrade their stage and say why instead of failing the call.
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
import weakref
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import unquote, urljoin, urlsplit

from rag_service.errors import ConfigurationError, LLMError
from rag_service.forks import ChildLock, after_fork_in_child
from rag_service.knobs import LLM_TIMEOUT_S

if TYPE_CHECKING:
    from rag_service.config import Settings

_T = TypeVar("_T")

#: characters of a document sent for its summary (the start of a page says what it is about)
SUMMARY_INPUT_CHARS = 12_000
#: characters of each candidate sent for its rating
RERANK_PASSAGE_CHARS = 1_000
#: the most of an answer read: a summary (800 characters kept) or one rating per passage is a few hundred bytes
MAX_ANSWER_BYTES = 1_000_000

SUMMARY_PROMPT = (
    "Summarize the document below in at most three sentences of plain text, for a search index. "
    "Answer with the summary only."
)
RERANK_PROMPT = (
    "Rate how relevant each numbered passage is to the query, from 0 (unrelated) to 10 (answers it). "
    "Answer with a JSON array of numbers only, one per passage, in passage order."
)


class ChatModel(Protocol):
    """A chat-completion model: messages in, the first choice's text out; ``LLMError`` on any failure."""

    name: str

    def complete(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> str:
        """The assistant's answer to ``messages``."""
        ...


class OpenAICompatibleChat:
    """``/chat/completions`` of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, OpenAI, ...).

    ``timeout_s`` bounds each call as a whole: connecting, waiting and reading the answer. The calls run on an
    event loop of the client's own (``_CallLoop``), built at the first call; a forked child builds its own
    (``rag_service.forks``).
    """

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = LLM_TIMEOUT_S.default
    ) -> None:
        import httpx

        if not (math.isfinite(timeout_s) and timeout_s > 0):  # asyncio would never end a nan deadline
            raise ValueError(f"timeout_s ({timeout_s!r}) must be a positive number of seconds")
        self.name = f"llm:{model}"
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        #: what messages show: the URL without its userinfo
        self.shown_url = shown_url(self.url)
        self.timeout_s = timeout_s
        api_key = api_key.strip() if api_key else None
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._secrets = _secrets(base_url, api_key)
        self._httpx = httpx
        self._calls: _CallLoop | None = None
        self._calls_lock = ChildLock()
        after_fork_in_child(self._forget_calls)

    def _forget_calls(self) -> None:
        # in a forked child: the parent's keep-alive sockets would carry this process's requests and hand it the
        # parent's answers, and its loop's thread does not exist here; kept as they are (the parent uses them)
        if self._calls is not None:
            _INHERITED.append(self._calls.forget())
        self._calls = None

    def _call_loop(self) -> _CallLoop:
        with self._calls_lock:
            if self._calls is None:
                self._calls = _CallLoop(self, self._httpx.AsyncClient(timeout=self.timeout_s, headers=self._headers))
            return self._calls

    async def _post(self, client: Any, body: dict[str, Any]) -> Any:
        import asyncio

        async with asyncio.timeout(self.timeout_s):  # httpx's timeouts bound each read, not the call
            response = await client.send(client.build_request("POST", self.url, json=body), stream=True)
            read = bytearray()
            try:
                async for part in response.aiter_bytes():
                    read += part
                    if len(read) > MAX_ANSWER_BYTES:  # a summary or ratings are a few hundred bytes: 3 MB were stored
                        raise _TooLong
            except self._httpx.TimeoutException:
                raise
            except self._httpx.HTTPError as exc:
                raise _BrokenOff(exc) from exc
            finally:
                await response.aclose()
            return self._httpx.Response(
                response.status_code, headers=response.headers, content=bytes(read), request=response.request
            )

    def complete(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> str:
        """The first choice's message content; ``LLMError`` naming the endpoint and what went wrong (credentials
        masked, also where the endpoint echoes them)."""
        body = {"model": self.model, "messages": list(messages), "max_tokens": max_tokens, "temperature": 0}
        try:
            calls = self._call_loop()
            response = calls.run(self._post(calls.client, body))
        except (TimeoutError, self._httpx.TimeoutException):
            raise self._error(f"did not answer within {self.timeout_s:g} s (RAG_LLM_TIMEOUT_S)") from None
        except _TooLong:
            raise self._error(
                f"answered more than {MAX_ANSWER_BYTES:,} bytes, which no completion asked for needs"
            ) from None
        except _BrokenOff as broken:
            exc = broken.__cause__
            raise self._error(f"broke off its answer: {type(exc).__name__}: {exc}") from None
        except (self._httpx.ConnectError, self._httpx.UnsupportedProtocol) as exc:
            raise self._error(f"could not be reached: {type(exc).__name__}: {exc}") from None
        except self._httpx.HTTPError as exc:
            raise self._error(f"did not answer: {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # anything else httpx raises (an invalid URL, a header it cannot encode): degrade
            while isinstance(exc, ExceptionGroup):  # anyio's connect attempts: the first one's error says it
                exc = exc.exceptions[0]
            raise self._error(f"could not be asked: {type(exc).__name__}: {exc}") from None
        return self._redacted(self._completion(response))

    def _completion(self, response: Any) -> str:
        if response.is_redirect:  # not followed: the URL to set is the one it points at
            target = urljoin(self.url, response.headers.get("location", ""))
            base = target.removesuffix("/chat/completions")
            hint = f"; set RAG_LLM_BASE_URL to {shown_url(base)}" if base != target else ""
            raise self._error(f"answered HTTP {response.status_code}, a redirect to {shown_url(target)}{hint}")
        if response.status_code != 200:
            raise self._error(f"answered HTTP {response.status_code}: {' '.join(self._shown(response.text).split())}")
        try:
            text = response.content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._error(
                f"answered a body that is not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): "
                f"{self._shown(response.text)!r}"
            ) from None
        try:
            content = json.loads(text)["choices"][0]["message"]["content"]
        except json.JSONDecodeError:
            raise self._error(f"answered a body that is not JSON: {self._shown(text)!r}") from None
        except (KeyError, IndexError, TypeError):
            raise self._error(
                f"answered JSON without a chat completion (choices[0].message.content): {self._shown(text)!r}"
            ) from None
        if not isinstance(content, str) or not content.strip():
            raise self._error("answered an empty completion")
        return content.strip()

    def _redacted(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _shown(self, body: str) -> str:
        """The start of an answer's body, as a message shows it (redacted before it is cut: no half key)."""
        return self._redacted(body)[:200]

    def _error(self, what: str) -> LLMError:
        return LLMError(self._redacted(f"{self.shown_url} {what}"))

    def close(self) -> None:
        """Close the HTTP connections and end the client's thread."""
        with self._calls_lock:
            calls, self._calls = self._calls, None
        if calls is not None:
            calls.close()


class _TooLong(Exception):
    """The endpoint's answer passed ``MAX_ANSWER_BYTES``: not read on."""


class _BrokenOff(Exception):
    """The endpoint's answer ended early (its cause says how): it was reached, and answered in part."""


#: a forked child's inherited call loops: the parent's, so never used nor closed there; held (collected, a loop that
#: seems to run warns)
_INHERITED: list[object] = []


class _CallLoop:
    """An asyncio event loop on a daemon thread, with the ``httpx.AsyncClient`` whose calls run there: a call
    cancelled at its deadline ends wherever it is. (A sync httpx call cannot be: its timeouts bound each read, so an
    endpoint sending a byte a second held it forever; httpx has no total timeout, encode/httpx#1450.)"""

    def __init__(self, owner: object, client: Any) -> None:
        import asyncio

        self.client = client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="rag-llm", daemon=True)
        self._thread.start()
        # an owner collected unclosed ends the thread too (not at exit: the daemon thread just stops)
        self._stop = weakref.finalize(owner, self._loop.call_soon_threadsafe, self._loop.stop)
        self._stop.atexit = False

    def _serve(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self.client.aclose())
            self._loop.close()

    def run(self, call: Coroutine[Any, Any, _T]) -> _T:
        """``call``'s result, waited for on this thread; an exception here (a signal's) cancels the call."""
        import asyncio

        future = asyncio.run_coroutine_threadsafe(call, self._loop)
        try:
            return future.result()
        finally:
            future.cancel()

    def forget(self) -> _CallLoop:
        """Itself, never to stop: a forked child's copy, whose thread and sockets are the parent's."""
        self._stop.detach()
        return self

    def close(self) -> None:
        """Close the connections and end the thread."""
        self._stop()
        self._thread.join()


#: a URL's userinfo (a password, or a token as the user name), with or without a scheme before it
_USERINFO = re.compile(r"^(?P<scheme>[^:/@]*://)?[^/@]*@")


def shown_url(url: str) -> str:
    """``url`` with its userinfo masked (``http://***@host/v1``), as messages show it."""
    return _USERINFO.sub(lambda found: (found["scheme"] or "") + "***@", url)


def _secrets(url: str, api_key: str | None) -> list[str]:
    """What an echo must not show: the key, the URL's password (or its user name when that is the token), and
    the Basic credentials httpx sends for them (``Authorization: Basic base64(user:password)``)."""
    found = _USERINFO.match(url)
    userinfo = found[0].removeprefix(found["scheme"] or "").removesuffix("@") if found else ""
    user, _, password = userinfo.partition(":")
    basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode() if userinfo else ""
    secrets = [api_key or "", password or user, basic]
    return sorted({form for s in secrets if s for form in (s, unquote(s))}, key=len, reverse=True)


def check_llm_settings(settings: Settings) -> str | None:
    """``RAG_LLM_API_KEY`` without the whitespace around it (a key file's newline), or None when unset;
    ``ConfigurationError`` naming the first ``RAG_LLM_*`` setting no call could use, and the fix."""
    url = settings.llm_base_url
    if not url:  # what asks for an LLM without one would be ignored, and nothing would say why
        asked = {"RAG_LLM_MODEL": settings.llm_model, "RAG_LLM_API_KEY": settings.llm_api_key}
        given = [name for name, value in asked.items() if value] + (["RAG_LLM_RERANK"] if settings.llm_rerank else [])
        if given:
            raise ConfigurationError(
                f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} set but RAG_LLM_BASE_URL is not; set it "
                f"to the endpoint (e.g. http://localhost:8000/v1), or unset {'it' if len(given) == 1 else 'them'}"
            )
        return None
    if not settings.llm_model:
        raise ConfigurationError("RAG_LLM_BASE_URL is set but RAG_LLM_MODEL is not; name the model to use")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (parses the port)
    except ValueError as exc:
        raise ConfigurationError(
            f"RAG_LLM_BASE_URL ({shown_url(url)!r}) is not a URL ({exc}); give the endpoint up to /v1, "
            "e.g. http://localhost:8000/v1"
        ) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"RAG_LLM_BASE_URL ({shown_url(url)!r}) must start with http:// or https:// and name a host, "
            "e.g. http://localhost:8000/v1"
        )
    key = settings.llm_api_key.get_secret_value().strip() if settings.llm_api_key else ""
    if key and not (key.isascii() and key.isprintable() and " " not in key):
        raise ConfigurationError(
            "RAG_LLM_API_KEY holds a space, a control or a non-ASCII character, which an HTTP header cannot carry; "
            "copy the key again"
        )
    if key and (parts.username or parts.password):  # httpx's Basic header from the userinfo replaced the Bearer one
        raise ConfigurationError(
            f"RAG_LLM_BASE_URL ({shown_url(url)!r}) holds a user name or password and RAG_LLM_API_KEY is set: both "
            "would be the Authorization header; keep one (the key is sent as Bearer)"
        )
    return key or None


def chat_model_for(settings: Settings) -> OpenAICompatibleChat | None:
    """The configured endpoint's model, or None when ``RAG_LLM_BASE_URL`` is unset (then httpx is not imported)."""
    if not settings.llm_base_url or not settings.llm_model:
        return None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return OpenAICompatibleChat(
        settings.llm_base_url, settings.llm_model, api_key=key, timeout_s=settings.llm_timeout_s
    )


def summarize(model: ChatModel, text: str) -> str:
    """The model's summary of ``text`` (its first ``SUMMARY_INPUT_CHARS`` characters), one paragraph."""
    answer = model.complete(
        [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": text[:SUMMARY_INPUT_CHARS]}],
        max_tokens=200,
    )
    return " ".join(answer.split())


_ARRAY = re.compile(r"\[[^\[\]]*\]")


def rate_passages(model: ChatModel, query: str, passages: Sequence[str]) -> list[float]:
    """The model's relevance of each passage to ``query``, in 0..1 (its 0-10 ratings / 10).

    ``LLMError`` when the answer holds no JSON array of one number per passage (the first such array counts), or
    when a rating is not finite or outside 0-10 (clamping an answer on another scale would leave no order).
    """
    numbered = "\n\n".join(f"[{i}] {' '.join(p[:RERANK_PASSAGE_CHARS].split())}" for i, p in enumerate(passages, 1))
    answer = model.complete(
        [
            {"role": "system", "content": RERANK_PROMPT},
            {"role": "user", "content": f"Query: {query}\n\nPassages:\n{numbered}"},
        ],
        max_tokens=8 * len(passages) + 20,
    )
    arrays = _number_arrays(answer)
    ratings = next((array for array in arrays if len(array) == len(passages)), None)
    if ratings is None:
        gave = f" (it gave {max(len(array) for array in arrays)})" if arrays else ""
        raise LLMError(f"the LLM's ratings are not a JSON array of {len(passages)} numbers{gave}: {answer[:120]!r}")
    if not all(math.isfinite(r) for r in ratings):  # json reads NaN, Infinity and 1e999
        raise LLMError(f"the LLM's ratings are not all finite numbers: {answer[:120]!r}")
    if outside := [f"{r:g}" for r in ratings if not 0 <= r <= 10]:
        raise LLMError(
            f"the LLM rated {len(outside)} of {len(ratings)} passages outside 0-10 ({', '.join(outside[:5])}), "
            f"as if on another scale: {answer[:120]!r}"
        )
    return [float(r) / 10.0 for r in ratings]


def _number_arrays(answer: str) -> list[list[float]]:
    """Every JSON array of numbers in ``answer``, in order (a model may write ``[1] is best: [10, 0, 3]``)."""
    arrays = []
    for found in _ARRAY.finditer(answer):
        try:
            parsed = json.loads(found[0])
        except json.JSONDecodeError:
            continue
        if parsed and all(isinstance(r, int | float) and not isinstance(r, bool) for r in parsed):
            arrays.append(parsed)
    return arrays
