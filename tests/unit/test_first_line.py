"""``errors.first_line``: how another library's exception shows inside a one-line message."""

from __future__ import annotations

import psycopg
from sqlalchemy.exc import OperationalError

from rag_service.errors import first_line


def test_the_first_line_of_the_message_stripped_and_cut() -> None:
    assert first_line(ValueError("  bad value\n  detail\n")) == "bad value"
    assert first_line(ValueError("x" * 500)) == "x" * 300
    assert first_line(ValueError("x" * 500), limit=200) == "x" * 200


def test_a_blank_message_shows_the_type() -> None:
    assert first_line(KeyError()) == "KeyError"
    assert first_line(OSError("  \n ")) == "OSError"
    assert first_line(OSError(""), typed=True) == "OSError"


def test_typed_puts_the_type_first() -> None:
    assert first_line(FileNotFoundError("no such file\nmore"), typed=True) == "FileNotFoundError: no such file"


def test_a_wrapped_driver_error_shows_the_drivers_message_not_the_statement() -> None:
    driver = psycopg.OperationalError('connection refused\n\tIs the server running on "x"?')
    wrapped = OperationalError("SELECT 1", {}, driver)
    assert first_line(wrapped) == "connection refused"
    assert first_line(wrapped, typed=True) == "OperationalError: connection refused"
