"""The search page in real headless Chromium (Debian's package): type a query, see the results."""

from __future__ import annotations

import json
import os
import re
import shutil
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from rag_service.retrieve.relevance import no_relevant_passages
from tests.server.conftest import READ_TOKEN, LiveServer

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None)
# as root Chromium needs --no-sandbox; the rest keeps it from reaching out to the network
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-gpu",
]

MISSING = "no /usr/bin/chromium: `make browser` installs Debian's package (as root, with apt)"
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")  # then missing = failure

pytestmark = pytest.mark.skipif(CHROMIUM is None and not IN_CI, reason=MISSING)


#: how long a wait for the page may take (wait_for_function's default); its string predicates ran through eval,
#: which the page's Content-Security-Policy refuses, so the waits are locators'
WAIT_MS = 30_000


def _status_says(page, text: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until the status line contains ``text`` (case-sensitive)."""
    from playwright.sync_api import expect

    expect(page.locator("#status")).to_contain_text(text, timeout=WAIT_MS)


def _url_has(page, text: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until the page's address contains ``text``."""
    from playwright.sync_api import expect

    expect(page).to_have_url(re.compile(re.escape(text)), timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if CHROMIUM is None:
        pytest.fail(f"CI is set and there is {MISSING}", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


def test_type_a_query_and_see_results(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(live.url) else outside.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(live.url + "/")
    page.wait_for_selector("#preset option[value=agent]", state="attached")
    assert page.locator("#preset").input_value() == "search"
    assert "default" in page.locator("#collection option").all_inner_texts()
    # the preset first: with a query typed, a new preset searches at once, and Enter then started a second search
    # while the first one's results showed (its status "searching…": a failed clean clone, session 49)
    page.select_option("#preset", "agent")
    page.fill("#query", "how are backups restored with pg_restore")
    page.press("#query", "Enter")
    page.wait_for_selector("li.result")
    first = page.locator("li.result").first
    assert first.locator(".source").inner_text() == "ops.md"
    assert "Operations > Backups" in first.locator(".header-path").inner_text()
    assert "%" in first.locator(".relevance").inner_text()
    marked = first.locator("mark").all_inner_texts()
    assert marked and any("backup" in m.lower() or "pg_restore" in m for m in marked), marked
    assert "ms" in page.locator("#status").inner_text()
    page.screenshot(path=str(Path(__file__).parent.parent.parent / ".pytest_cache" / "search-page.png"))

    page.fill("#query", "")
    page.fill("#query", "zzzz qqqq")
    page.select_option("#collection", "default")
    page.press("#query", "Enter")
    _status_says(page, "result")
    assert errors == [] and outside == []
    page.close()


def test_errors_show_as_one_line(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.goto(live.url + "/")
    page.wait_for_selector("#preset option[value=agent]", state="attached")
    page.evaluate("document.querySelector('#preset').append(new Option('nope', 'nope'))")
    page.select_option("#preset", "nope")
    page.fill("#query", "backups")
    page.press("#query", "Enter")
    page.wait_for_selector("#status.error")
    assert "unknown context 'nope'" in page.locator("#status").inner_text()
    page.close()


NOTES = "# Pooling\n\nThe PostgreSQL pool lends connections to requests.\n\n```python\npool = make_pool(size=5)\n```\n"


def test_a_search_in_the_address_runs_renders_code_and_marks_whole_words(  # type: ignore[no-untyped-def]
    browser, live: LiveServer
) -> None:
    # 'aaa-notes' (one document) sorts first, 'default' has two, 'zz-handbook' three: the page takes the largest
    assert live.service.index_texts([("notes.md", "", NOTES)], collection="aaa-notes", strategy="markdown").ok
    handbook = [(f"page-{n}.md", "", f"# Page {n}\n\nThe handbook page {n} on backups.\n") for n in range(3)]
    assert live.service.index_texts(handbook, collection="zz-handbook", strategy="markdown").ok
    page = browser.new_page()  # a new browser context: nothing remembered
    page.goto(live.url + "/")
    page.wait_for_selector("#collection option[value=aaa-notes]", state="attached")
    assert page.locator("#collection").input_value() == "zz-handbook", "the collection with the most documents"
    page.close()

    page = browser.new_page()
    page.goto(live.url + "/?q=PostgreS%20pool&collection=aaa-notes&context=search")
    page.wait_for_selector("li.result")
    assert page.locator("#query").input_value() == "PostgreS pool"
    assert page.locator("#collection").input_value() == "aaa-notes"
    passage = page.locator("li.result .passage").first
    assert passage.locator("pre code").inner_text() == "pool = make_pool(size=5)"  # a code block, no ``` text
    assert "```" not in passage.inner_text()
    marked = passage.locator("mark").all_inner_texts()
    assert marked and all(m.lower() == "pool" for m in marked), marked  # never "PostgreS" inside "PostgreSQL"

    page.select_option("#collection", "default")
    page.fill("#query", "backups")
    page.press("#query", "Enter")
    _url_has(page, "q=backups")
    assert "collection=default" in page.url and "context=search" in page.url
    page.goto(live.url + "/")  # the same browser remembers the collection searched last
    page.wait_for_selector("#collection option[value=aaa-notes]", state="attached")
    assert page.locator("#collection").input_value() == "default"
    page.close()


# the page's first search answers late (held back in the browser), every later one at once
SLOW_FIRST_SEARCH = """(() => { const fetch = window.fetch; let searches = 0;
  window.fetch = (url, options) => {
    const wait = String(url).includes('/api/rag/retrieve') && ++searches === 1 ? 1500 : 0;
    return new Promise((resolve) => setTimeout(resolve, wait)).then(() => fetch(url, options));
  }; })();"""


def test_only_the_latest_search_renders_and_waiting_shows(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.add_init_script(SLOW_FIRST_SEARCH)
    page.goto(live.url + "/?collection=default")
    page.wait_for_selector("#preset option[value=agent]", state="attached")
    page.fill("#query", "streaming replica failover promotes")
    page.press("#query", "Enter")
    page.wait_for_selector("#results[aria-busy=true]", state="attached")  # waiting is shown...
    assert page.locator("#status").inner_text() == "searching…"
    page.fill("#query", "hybrid vector keyword reciprocal rank fusion")  # ...and Enter still starts a newer search
    page.press("#query", "Enter")
    page.wait_for_selector("li.result")
    page.wait_for_selector("#results:not([aria-busy])", state="attached")
    page.wait_for_timeout(2000)  # the first search's answer would have come by now
    assert "Hybrid search" in page.locator("li.result .header-path").first.inner_text()
    assert "result" in page.locator("#status").inner_text()
    page.close()


def with_first_chunk(content: str, match: str):  # type: ignore[no-untyped-def]
    """A route handler: the server's real answer, its first chunk's text replaced by ``content`` with the span
    ``match`` as the match, in code points as the API counts them (``start_char`` 100 into the document)."""

    def handle(route) -> None:  # type: ignore[no-untyped-def]
        body = route.fetch().json()
        chunk = body["result"]["chunks"][0]
        start = content.index(match)
        chunk.update(content=content, start_char=100, end_char=100 + len(content))
        chunk.update(match_start=100 + start, match_end=100 + start + len(match))
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    return handle


def test_the_match_is_marked_after_emoji(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    text = "Rockets 🚀🚀 and 𝔪𝔞𝔱𝔥 letters come first.\n\nThen the backups section starts here, after them."
    page.route("**/api/rag/retrieve", with_first_chunk(text, "the backups section"))
    page.goto(live.url + "/?q=backups&collection=default&context=search")
    page.wait_for_selector("li.result mark")
    assert page.locator("li.result").first.locator("mark").all_inner_texts() == ["the backups section"]
    page.close()


#: (query, a passage that is all match, so the query's words are marked, what is marked): a CJK word inside a sentence
#: (no space around it), a Japanese query whose pieces are found apart, a word typed in NFC in decomposed text
MARKED_WORDS = [
    ("全量备份", "我们每天凌晨两点执行一次全量备份，并且每小时执行一次增量备份。", ["全量备份"]),
    (
        "ロールバックの方法",
        "問題が発生した場合は、直ちにロールバックを行います。方法は手順書にあります。",
        ["ロールバック", "方法"],
    ),
    (
        "Résumé",
        unicodedata.normalize("NFD", "Résumé de l'équipe: send the résumé today.") + " No résumés.",
        ["Re\u0301sume\u0301", "re\u0301sume\u0301"],
    ),
    ("PostgreSQL setup", "PostgreSQLの設定: see the PostgreS pages and the setup guide.", ["PostgreSQL", "setup"]),
]


@pytest.mark.parametrize(("query", "content", "marked"), MARKED_WORDS)
def test_query_words_are_marked_inside_cjk_sentences_and_in_decomposed_text(  # type: ignore[no-untyped-def]
    browser, live: LiveServer, query: str, content: str, marked: list[str]
) -> None:
    page = browser.new_page()
    page.route("**/api/rag/retrieve", with_first_chunk(content, content))
    page.goto(live.url + "/?" + urlencode({"q": query, "collection": "default", "context": "search"}))
    page.wait_for_selector("li.result mark")
    assert page.get_attribute("#query", "dir") == "auto"  # an Arabic or Hebrew query reads right to left
    passage = page.locator("li.result .passage").first
    assert passage.locator("mark").all_inner_texts() == marked
    assert passage.inner_text() == content  # the marks cover whole characters: nothing lost or doubled
    page.close()


def test_a_shared_link_runs_once_the_token_works(  # type: ignore[no-untyped-def]
    browser, serve: Callable[..., LiveServer]
) -> None:
    guarded = serve(read_token=READ_TOKEN)
    handbook = [("kb.md", "", "# Handbook\n\nBackups are restored with pg_restore into a fresh database.\n")]
    assert guarded.service.index_texts(handbook, collection="kb", strategy="markdown").ok
    page = browser.new_page()  # a fresh browser: no token remembered
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization")) if "/api/" in r.url else None)
    page.goto(guarded.url + "/?q=backups&collection=kb&context=agent")
    page.wait_for_selector("#status.error")
    assert "reads need" in page.locator("#status").inner_text()
    assert page.locator("#query").input_value() == "backups", "the shared query is kept while it cannot run"

    page.fill("#token", "wrong")
    page.press("#token", "Tab")
    _status_says(page, "reads need")
    page.wait_for_timeout(300)
    assert page.evaluate("sessionStorage.getItem('rag-token')") is None, "a refused token is not kept"

    page.fill("#token", READ_TOKEN)
    page.press("#token", "Tab")  # the pickers load again, and the shared search runs
    page.wait_for_selector("li.result")
    assert page.locator("#collection").input_value() == "kb"
    assert page.locator("#preset").input_value() == "agent"
    assert page.locator("li.result .source").first.inner_text() == "kb.md"
    assert page.evaluate("sessionStorage.getItem('rag-token')") == READ_TOKEN

    page.fill("#token", "")  # an empty field sends no token
    sent.clear()
    page.press("#query", "Enter")
    page.wait_for_selector("#status.error")
    assert "reads need" in page.locator("#status").inner_text()
    assert sent and all(header is None for header in sent), sent
    page.close()


def test_an_unknown_collection_or_preset_in_the_address_is_named(  # type: ignore[no-untyped-def]
    browser, live: LiveServer
) -> None:
    page = browser.new_page()
    page.goto(live.url + "/?q=backups&collection=defualt&context=search")
    page.wait_for_selector("#status.error")
    assert "collection 'defualt' does not exist" in page.locator("#status").inner_text()
    assert page.locator("#collection").input_value() == "defualt"  # not quietly another collection
    assert page.locator("li.result").count() == 0
    page.goto(live.url + "/?q=backups&collection=default&context=serch")
    page.wait_for_selector("#status.error")
    assert "unknown context 'serch'" in page.locator("#status").inner_text()
    # without a query nothing is searched: the page says so itself, once the pickers have loaded
    page.goto(live.url + "/?collection=defualt")
    page.wait_for_selector("#status.error")
    status = page.locator("#status").inner_text()
    assert "collection 'defualt' does not exist here; the collections are " in status and "'default'" in status
    page.goto(live.url + "/?collection=default&context=serch")
    page.wait_for_selector("#status.error")
    status = page.locator("#status").inner_text()
    assert "preset 'serch' does not exist here; the presets are 'chatbot', 'agent'" in status
    page.close()


def test_a_phone_wide_page_does_not_scroll_sideways(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    url = "https://example.com/" + "very-long-path-segment/" * 12 + "?backups=" + "x" * 120
    page = browser.new_page(viewport={"width": 360, "height": 640})
    page.goto(live.url + "/?collection=default")
    page.wait_for_selector("#preset option[value=agent]", state="attached")
    fits = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    assert page.evaluate(fits), "the empty form is wider than a phone"
    page.route("**/api/rag/retrieve", with_first_chunk(f"Backups are listed at {url} every night.", url))
    page.fill("#query", "backups")
    page.press("#query", "Enter")
    page.wait_for_selector("li.result mark")
    assert page.evaluate(fits), page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    page.close()


def test_a_stopped_server_is_named_and_the_old_degraded_line_goes(  # type: ignore[no-untyped-def]
    browser, serve: Callable[..., LiveServer]
) -> None:
    doomed = serve()

    def degraded(route) -> None:  # type: ignore[no-untyped-def]
        body = route.fetch().json()
        body["metrics"]["degraded"] = ["reranker: model not loaded"]
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page = browser.new_page()
    page.route("**/api/rag/retrieve", degraded)
    page.goto(doomed.url + "/?q=backups&collection=default&context=search")
    page.wait_for_selector("li.result")
    assert "reranker: model not loaded" in page.locator("#degraded").inner_text()
    page.unroute("**/api/rag/retrieve")
    doomed.stop()
    page.press("#query", "Enter")
    page.wait_for_selector("#status.error")
    assert "server cannot be reached" in page.locator("#status").inner_text()
    assert page.locator("#degraded").inner_text() == ""
    page.close()


def test_no_results_say_why(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    # the hashing embedder has no calibration, so min_relevance never empties a real answer here: empty it as a
    # calibrated model's would be, with the line the library writes then
    line = no_relevant_passages("backups", 0.12, 0.35)

    def nothing_relevant(route) -> None:  # type: ignore[no-untyped-def]
        body = route.fetch().json()
        body["result"].update(chunks=[], formatted_context=line)
        body["metrics"]["filtered_below_relevance"] = 3
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page = browser.new_page()
    page.route("**/api/rag/retrieve", nothing_relevant)
    page.goto(live.url + "/?q=backups&collection=default&context=search")
    _status_says(page, "results")
    assert page.locator("li.result").count() == 0
    status = page.locator("#status").inner_text()
    assert "no relevant passages for 'backups'" in status and "lower min_relevance" in status, status
    page.close()


def test_a_blank_or_long_query_is_answered(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.goto(live.url + "/?collection=default")
    page.wait_for_selector("#preset option[value=agent]", state="attached")
    page.fill("#query", "   ")
    page.press("#query", "Enter")
    page.wait_for_selector("#status.error")
    assert "type a question" in page.locator("#status").inner_text()
    page.fill("#query", "backups " * 1100)  # a long paste reaches the server whole, which names its limit
    page.press("#query", "Enter")
    _status_says(page, "send at most")
    assert "query: 8799 characters; send at most 8000" in page.locator("#status").inner_text()
    page.close()


def test_a_new_collection_or_preset_searches_again(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.goto(live.url + "/?q=backups&collection=default&context=search")
    page.wait_for_selector("li.result")
    page.select_option("#preset", "agent")
    _url_has(page, "context=agent")
    _status_says(page, "result")
    assert "q=backups" in page.url
    page.close()


def test_right_to_left_passages_and_no_missing_icon(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    page.on("console", lambda m: failed.append(m.text) if m.type == "error" else None)
    page.route("**/api/rag/retrieve", with_first_chunk("مرحبا بالعالم: النسخ الاحتياطية كل ليلة", "النسخ"))
    page.goto(live.url + "/?q=backups&collection=default&context=search")
    page.wait_for_selector("li.result mark")
    direction = "getComputedStyle(document.querySelector('li.result .passage')).direction"
    assert page.evaluate(direction) == "rtl"
    assert page.locator("link[rel=icon]").count() == 1  # no request for /favicon.ico, no 404 in the console
    assert failed == []
    page.close()


def test_the_page_works_under_its_content_security_policy(browser, live: LiveServer) -> None:  # type: ignore[no-untyped-def]
    """The page's policy allows only its own files: its styles moved out of the page, and nothing is refused."""
    page = browser.new_page()
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    response = page.goto(live.url + "/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.fill("#query", "how are backups restored")
    page.press("#query", "Enter")
    page.wait_for_selector("li.result")
    assert page.eval_on_selector("#results", "e => getComputedStyle(e).listStyleType") == "none"  # search.css
    assert page.eval_on_selector("body", "e => getComputedStyle(e).maxWidth") != "none"
    assert refused == []
    page.close()


def test_an_unknown_collection_in_the_address_names_ten_collections_not_all(  # type: ignore[no-untyped-def]
    browser, live: LiveServer
) -> None:
    """The page named every collection in its one status line: a team's 333 made a line of ~6,000 characters. Now
    ten, those sharing the longest start with the name first, and how many more (as the server's errors)."""
    service = live.service
    names = [f"team-{i:02d}" for i in range(14)]
    for name in names:
        assert service.index_texts([("t.md", "", f"# T\n\nNotes of {name}.")], collection=name).ok
    try:
        page = browser.new_page()
        page.goto(live.url + "/?collection=team-1")
        page.wait_for_selector("#status.error")
        status = page.locator("#status").inner_text()
        assert status.startswith("collection 'team-1' does not exist here; the collections are 'team-10', "), status
        assert status.count("', '") == 9 and re.search(r"' and \d+ more \(pick one above\)$", status), status
        page.close()
    finally:
        for name in names:
            service.delete_document("t.md", collection=name)
