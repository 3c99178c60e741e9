#!/usr/bin/env python3
"""Management command: the same as ``rag reindex`` (index paths incrementally, or ``--all``)."""

from __future__ import annotations

import sys

from rag_service.cli import main

if __name__ == "__main__":
    sys.exit(main(["reindex", *sys.argv[1:]]))
