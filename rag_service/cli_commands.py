"""Subcommands beyond ``rag db``: reindex, query, eval, demo (added as they are built)."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's subcommands to the ``rag`` parser."""
