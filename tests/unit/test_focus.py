"""A long query is searched by its question (retrieve/focus.py; audit 56a, D2-D4): pasted tracebacks, logs, URLs and
background are left out by the shape of lines and sentences, and a short question is searched as written."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_service.retrieve.focus import FOCUS_WORDS, Focus, focus_query

QUESTION = "How do I restore a nightly backup into a fresh database?"
TRACEBACK = """Traceback (most recent call last):
  File "/home/dev/app/main.py", line 42, in <module>
    result = restore(config)
  File "/home/dev/.venv/lib/python3.11/site-packages/pgtools/restore.py", line 118, in restore
    conn = self._connect(timeout=timeout)
  File "/usr/lib/python3.11/socket.py", line 836, in create_connection
    raise err
ConnectionRefusedError: [Errno 111] Connection refused"""
LOG = """2024-05-02 10:14:03,112 INFO worker.py:88 -- started worker pid=4242
2024-05-02 10:14:05,907 WARNING restore.py:301 -- slow response from upstream (took 4210 ms)
2024-05-02 10:14:09,450 ERROR restore.py:207 -- restore failed: exit code 1, retrying (attempt 2/5)
[10:14:11] DEBUG GET http://10.0.3.7:8080/status 200 (12 ms)"""
BACKGROUND = (
    "Some background first. I joined a small team a few months ago and inherited a setup that somebody else built; "
    "the original author left and there is almost no documentation, so I am learning as I go. We run everything on a "
    "handful of machines and recently started moving parts of it elsewhere because the old hardware is slow."
)


def _no_window() -> None:
    return None


def _focus(text: str) -> Focus:
    return focus_query(text, window=_no_window)


def _word_window(room: int):  # type: ignore[no-untyped-def]
    """A model that reads ``room`` tokens, one per word."""

    def count(texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    return lambda: (count, room)


def test_a_traceback_before_the_question_is_left_out() -> None:
    focus = _focus(f"{TRACEBACK}\n\n{QUESTION}")
    assert focus.text == QUESTION
    assert focus.note == (
        "searched its prose (11 words); left out 8 lines of traceback: to search any of it, put it in the question"
    )


def test_a_traceback_after_the_question_goes_with_its_label() -> None:
    focus = _focus(f"{QUESTION}\n\nI get this error:\n\n{TRACEBACK}\n\nlogs:\n{LOG}")
    assert focus.text == QUESTION
    assert focus.note is not None and "left out 9 lines of traceback and 5 log lines:" in focus.note


def test_a_log_dump_around_a_question_is_left_out() -> None:
    focus = _focus(f"Here is what the worker printed\n{LOG}\nWhy does the restore keep failing?")
    assert focus.text == "Here is what the worker printed\n\nWhy does the restore keep failing?"
    assert focus.note is not None and "4 log lines" in focus.note


def test_long_background_keeps_its_questions_and_last_paragraph() -> None:
    text = f"{BACKGROUND} Is that a known problem?\n\n{BACKGROUND}\n\nSo my question is: {QUESTION}"
    focus = _focus(text)
    assert focus.text == f"Is that a known problem?\n\nSo my question is: {QUESTION}"
    assert focus.note is not None
    background = 2 * len(BACKGROUND.split())
    assert focus.note.startswith(f"searched its questions and last paragraph (20 words); left out {background} words")


def test_background_under_the_word_bound_is_searched_whole() -> None:
    text = f"We moved the database last week.\n\n{QUESTION}"
    assert len(text.split()) <= FOCUS_WORDS
    assert _focus(text) == Focus(text)


def test_past_the_window_the_last_sentences_are_kept_and_questions_first() -> None:
    text = f"{BACKGROUND} Is that a known problem? {BACKGROUND} So my question is: {QUESTION}"  # one paragraph
    focus = focus_query(text, window=_word_window(30))
    assert focus.text == f"Is that a known problem? So my question is: {QUESTION}"
    assert focus.note == (
        "searched its questions and last sentences (20 words); left out 118 words of background: to search any of it, "
        "put it in the question (the query was past the 30 tokens the embedding model reads)"
    )
    assert focus_query(text, window=_word_window(1000)) == Focus(text)  # within the window: as written


def test_a_question_with_a_short_code_line_keeps_it() -> None:
    text = "Why does this line fail on the replica?\npg_restore -d fresh --jobs=4 /backups/nightly.dump"
    assert _focus(text) == Focus(text)
    inline = "Why does `pg_restore -d fresh --jobs=4` fail with exit code 1?"
    assert _focus(inline) == Focus(inline)


def test_a_short_code_line_stays_beside_a_left_out_traceback() -> None:
    text = f"Running\npg_restore -d fresh --jobs=4 nightly.dump\nfails:\n\n{TRACEBACK}"
    assert _focus(text).text == "Running\npg_restore -d fresh --jobs=4 nightly.dump"  # "fails:" labels the trace


def test_a_long_query_leaves_its_code_out() -> None:
    code = "```python\nfor item in backups:\n    restore(item, target=fresh_db, jobs=4)\n```"
    text = f"{BACKGROUND}\n\n{code}\n\n{QUESTION}"
    focus = _focus(text)
    assert focus.text == QUESTION
    assert focus.note is not None and "4 lines of code or output" in focus.note


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12),
                max_size=FOCUS_WORDS))
def test_a_short_one_line_query_is_searched_as_written(words: list[str]) -> None:
    text = " ".join(words)
    if "\x85" in text or "\x1c" in text or "://" in text:
        return
    assert _focus(text) == Focus(text)


def test_the_visible_sets_shape_of_question_is_untouched() -> None:
    for text in (
        "how to run TorchTrainer on gpu?",
        'explain " resources_per_worker={ "CPU": 4, "GPU": 2, }"',
        "ValueError: invalid literal for int() with base 10",
        "2024-05-02 10:14:03 why did my job restart at this time",
        "What is the max_tokens limit of /v1/messages?",
    ):
        assert _focus(text) == Focus(text)


def test_urls_standing_apart_are_left_out_and_a_url_a_sentence_runs_through_stays() -> None:
    assert _focus(f"{QUESTION} (see https://github.com/some-org/some-repo/issues/9295)").text == QUESTION
    assert _focus(f"https://stackoverflow.com/questions/37027045/x {QUESTION}").text == QUESTION
    assert _focus(f"{QUESTION}\nhttps://discuss.example.org/t/setup/1061?u=user93").text == QUESTION
    through = "What does https://api.example.com/v1/backups return for a running restore?"
    assert _focus(through) == Focus(through)
    linked = "Is the [restore guide](https://example.com/restore) still right?"
    assert _focus(linked).text == "Is the [restore guide]() still right?"


def test_non_english_questions_are_focused_by_the_same_rules() -> None:
    german = "Wie stelle ich eine nächtliche Sicherung in einer neuen Datenbank wieder her?"
    assert _focus(f"{TRACEBACK}\n\n{german}").text == german
    background = (
        "Zuerst etwas Hintergrund. Ich bin vor ein paar Monaten in ein kleines Team gekommen und habe eine Umgebung "
        "geerbt, die jemand anderes gebaut hat; der ursprüngliche Autor ist gegangen und es gibt fast keine "
        "Dokumentation, also lerne ich nebenbei."
    )
    assert _focus(f"{background}\n\n{background}\n\nMeine Frage: {german}").text == f"Meine Frage: {german}"
    chinese_background = "我们的团队上个月把数据库迁移到了新的机器上。之前的作者已经离开了，几乎没有文档。" * 6
    chinese = "如何把夜间备份恢复到新的数据库？"
    focus = focus_query(chinese_background + chinese, window=lambda: (lambda ts: [len(t) for t in ts], 60))
    assert focus.text.endswith(chinese) and len(focus.text) <= 60


def test_machine_text_alone_is_searched_by_its_error_lines_never_as_nothing() -> None:
    focus = _focus(TRACEBACK)
    assert focus.text == "ConnectionRefusedError: [Errno 111] Connection refused"
    assert focus.note is not None and focus.note.startswith("searched its error lines (5 words); left out 7 lines")
    assert "ask about it in words" in focus.note
    assert _focus(LOG) == Focus(LOG)  # no error line: as written
    code = "for item in backups:\n    restore(item, target=fresh_db, jobs=4)\n    log.info(item)"
    assert _focus(code) == Focus(code)
    assert _focus("https://example.com/a\nhttps://example.com/b") == Focus("https://example.com/a\nhttps://example.com/b")


def test_prose_lines_that_name_an_error_stay() -> None:
    text = (
        f"{QUESTION}\nI get a ConnectionRefusedError every time, even with a longer timeout.\n"
        "Exception handling in my script retries three times."
    )
    assert _focus(text) == Focus(text)


# -- audit 58c ------------------------------------------------------------------------------------------------------


def test_a_question_that_starts_like_a_log_or_an_error_line_is_kept() -> None:
    # the line holding the question was left out as machine text, and the background alone searched
    for line in (
        'Error: relation "documents" does not exist. What migration did I miss?',
        "Warning: this makes chunks longer than the model reads. Should I lower it?",
        "INFO: the export is HTML. Can I index an export of the space?",
    ):
        text = f"We upgraded last night and ran the migrations again.\n{line}"
        assert _focus(text) == Focus(text)
    trace = f"{TRACEBACK}\nNameError: name 'restor' is not defined. Did you mean: 'restore'?\n\n{QUESTION}"
    assert _focus(trace).text == QUESTION  # a traceback's own line ending in "?" goes with it


def test_an_identifier_on_its_own_line_stays_in_its_sentence() -> None:
    text = f"{BACKGROUND}\n\nHow do I call\nretrieve_with_context\nwith a collection filter and a max_tokens budget?"
    focus = _focus(text)
    assert focus.text == "How do I call\nretrieve_with_context\nwith a collection filter and a max_tokens budget?"
    assert focus.note is not None and "code" not in focus.note


def test_go_and_rust_panics_are_left_out() -> None:
    go = (
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a1b2c]\n\n"
        "goroutine 1 [running]:\nmain.(*Server).Handle(0x0, {0x5d8e40, 0xc000010000})\n"
        "\t/home/me/srv/main.go:42 +0x2c\nmain.main()\n\t/home/me/srv/main.go:17 +0x85\nexit status 2"
    )
    assert _focus(f"{go}\n\n{QUESTION}").text == QUESTION
    rust = (
        "thread 'main' panicked at 'called `Option::unwrap()` on a `None` value', src/main.rs:4:37\n"
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
    )
    assert _focus(f"{rust}\n\n{QUESTION}").text == QUESTION
    js = "Uncaught TypeError: Cannot read properties of undefined (reading 'map')\n    at TodoList (TodoList.jsx:14:23)"
    assert _focus(f"{js}\n\n{QUESTION}").text == QUESTION


def test_kubernetes_json_and_access_log_lines_are_left_out() -> None:
    logs = (
        "E0501 12:00:06.123456       1 reflector.go:138] failed to list *v1.Pod: connection refused\n"
        '{"level":"error","ts":1714564806.5,"msg":"request failed","path":"/api/search","status":504}\n'
        '127.0.0.1 - - [01/May/2024:12:00:07 +0000] "POST /api/search HTTP/1.1" 504 0 "-" "curl/8.0"'
    )
    focus = _focus(f"{logs}\n\n{QUESTION}")
    assert focus.text == QUESTION
    assert focus.note is not None and "3 log lines" in focus.note


def test_unindented_lines_of_a_pasted_block_of_code_are_code() -> None:
    code = (
        "results = service.retrieve(query, collection=collection_name)\n"
        "for chunk in results.chunks:\n    print(chunk.source, chunk.start_line, chunk.relevance_score)"
    )
    focus = _focus(f"{BACKGROUND}\n\n{code}\n\n{QUESTION}")
    assert focus.text == QUESTION
    assert focus.note is not None and "3 lines of code or output" in focus.note


def test_a_question_in_a_fence_is_a_question() -> None:
    text = f"{BACKGROUND}\n\n```\n{QUESTION}\n```"
    assert _focus(text).text == QUESTION


def test_the_note_counts_one_line_in_the_singular() -> None:
    focus = _focus(f"{QUESTION}\n\nTraceback (most recent call last):")
    assert focus.note == (
        "searched its prose (11 words); left out 1 line of traceback: to search any of it, put it in the question"
    )


def test_a_list_of_questions_without_question_marks_is_kept_whole() -> None:
    # only the last item was searched: the others were "background" before the last paragraph
    items = [
        "1. the right chunk size for markdown files with long tables",
        "2. using a different embedding model for each collection we index",
        "3. what happens to stored vectors when switching the model later",
    ]
    intro = "I have three questions about setting up the service for our team:"
    text = "\n\n".join([BACKGROUND, intro, *items])
    assert _focus(text).text == "\n\n".join([intro, *items])
