"""Tools agents can call."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tool:
    """A named function an agent may call with JSON arguments."""

    name: str
    description: str


def default_tools() -> list[Tool]:
    """The tools every agent gets unless its config names others: search and hand-over."""
    return [
        Tool("search_knowledge", "Search the documentation for passages that answer a question."),
        Tool("hand_over", "Pass the conversation to a human operator."),
    ]
