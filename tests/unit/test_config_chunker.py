"""The ``config`` strategy (audit 56b D14): TOML tables and YAML keys are headers, offsets exact, invalid files still
split where their lines allow, and ``auto`` picks it for ``.toml``, ``.yaml`` and ``.yml``."""

from __future__ import annotations

import pytest

from rag_service.ingest.chunkers import make_chunker, recommend_strategy

PYPROJECT = """\
[project]
name = "demo"
description = '''
[not.a.table]
'''

# type checking
[tool.mypy]
python_version = "3.11"
strict = true

[[tool.mypy.overrides]]
module = "yaml.*"
ignore_missing_imports = true

[[tool.mypy.overrides]]
module = "toml.*"
ignore_missing_imports = true

[ tool . "ruff" ]
line-length = 120
"""

WORKFLOW = """\
name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
{steps}
  # the docs job
  docs:
    runs-on: ubuntu-latest
    steps:
      - run: make docs
"""


def _split(text: str, source: str, **sizes: int):
    chunks = make_chunker("auto", source=source, **sizes).split(text).chunks
    for chunk in chunks:
        assert text[chunk.start_char : chunk.end_char] == chunk.content
    return chunks


def _paths(chunks) -> list[str]:
    return [chunk.header_path for chunk in chunks]


@pytest.mark.parametrize("name", ["pyproject.toml", "ci.yaml", "ci.YML", "setup.cfg", "tox.ini"])
def test_auto_picks_config_for_toml_and_yaml(name):
    assert recommend_strategy(name) == "config"


def test_toml_tables_are_headers_with_their_comments_and_arrays_joined():
    chunks = _split(PYPROJECT, "pyproject.toml")
    assert _paths(chunks) == [
        "pyproject.toml > project",
        "pyproject.toml > tool.mypy",
        "pyproject.toml > tool.mypy.overrides",
        "pyproject.toml > tool.ruff",
    ]
    assert chunks[1].content.startswith("# type checking\n[tool.mypy]")  # the comment above belongs to its table
    assert chunks[2].content.count("[[tool.mypy.overrides]]") == 2  # one array of tables, one chunk while it fits
    assert "[not.a.table]" in chunks[0].content  # inside a multi-line string: no table


def test_a_large_section_is_split_under_its_header():
    keys = "".join(f"key_{i} = {i}  # setting number {i}\n" for i in range(60))
    text = f"[small]\nname = 'a small table of one key'\n\n[big]\n{keys}"
    chunks = _split(text, "settings.toml", chunk_size=300, chunk_overlap=50)
    assert _paths(chunks)[0] == "settings.toml > small"
    big = [c for c in chunks if c.header_path == "settings.toml > big"]
    assert len(big) > 3 and all(len(c.content) <= 300 for c in big)
    assert chunks[-1].content.endswith("# setting number 59")


def test_yaml_top_level_keys_and_one_nested_level_where_a_block_is_large():
    steps = "".join(f"      - run: echo step {i} of the test job, a long line\n" for i in range(12))
    text = WORKFLOW.format(steps=steps.rstrip("\n"))
    chunks = _split(text, "ci.yml", chunk_size=500, chunk_overlap=100)
    paths = _paths(chunks)
    assert paths[0] == "ci.yml > name, on"  # name and on: short keys, joined and both named
    assert chunks[0].content == "name: ci\non: [push]"
    assert "ci.yml > jobs > test" in paths and paths[-1] == "ci.yml > jobs > docs"
    assert next(c for c in chunks if c.header_path.endswith("test")).content.startswith("jobs:\n  test:")
    assert chunks[-1].content.startswith("  # the docs job\n  docs:")  # its first line's indentation kept
    assert not any("steps" in p for p in paths)  # list entries are no keys
    whole = WORKFLOW.format(steps="      - run: pytest")
    small = _split(whole, "ci.yml")
    assert _paths(small) == ["ci.yml > name, on, jobs"] and small[0].content == whole.strip()  # one chunk


def test_invalid_files_are_still_split_where_their_lines_allow():
    toml = "[ok]\nname = 'fine, this table holds a value'\n\n[broken\nx = = =\n[also.ok]\nvalue = 'after the error'\n"
    chunks = _split(toml, "bad.toml")
    assert _paths(chunks) == ["bad.toml > ok", "bad.toml > also.ok"]
    assert "[broken\nx = = =" in chunks[0].content  # kept, as text of the section before
    yaml = "server:\n  port: [8080  # the port it listens on\n\tbad: indentation: here\n"
    yaml += "client:\n  retries: 3  # how often\n"
    chunks = _split(yaml, "bad.yaml")
    assert _paths(chunks) == ["bad.yaml > server", "bad.yaml > client"]
    assert "\tbad: indentation: here" in chunks[0].content


def test_config_without_a_known_suffix_reads_toml_by_its_tables_else_yaml_keys():
    chunker = make_chunker("config", source="settings.conf")
    text = "[metadata]\nname = demo package with a long enough name\n"
    assert [c.header_path for c in chunker.split(text).chunks] == ["settings.conf > metadata"]
    text = "server:\n  port: 8080  # the port the server listens on\n"
    assert [c.header_path for c in chunker.split(text).chunks] == ["settings.conf > server"]


def test_ini_sections_are_headers_whatever_their_names():
    # audit 58c: setup.cfg and tox.ini went to ``recursive``: a chunk never said which [testenv] it came from
    tox = (
        "[tox]\nenvlist = py311, docs\n\n"
        "[testenv:py311]\n; the unit tests\ndeps =\n    pytest>=8\n    hypothesis\n"
        "commands = pytest tests/unit {posargs}\n\n"
        "[testenv:docs]\ndeps = mkdocs-material\ncommands = mkdocs build --strict --site-dir site\n\n"
        "[mypy-yaml.*]\nignore_missing_imports = True\n"
    )
    chunks = _split(tox, "tox.ini", chunk_size=80, chunk_overlap=10)
    assert "tox.ini > testenv:py311" in _paths(chunks) and "tox.ini > testenv:docs" in _paths(chunks)
    assert _paths(chunks)[-1] == "tox.ini > mypy-yaml.*"
    py311 = [c.content for c in chunks if c.header_path == "tox.ini > testenv:py311"]
    deps = "[testenv:py311]\n; the unit tests\ndeps =\n    pytest>=8\n    hypothesis"  # a value with its key
    assert py311 == [deps, "commands = pytest tests/unit {posargs}"]


# -- audit 58c: documents, values that look like keys, long sections, indentation ---------------------------------

K8S = """\
# the web tier
apiVersion: v1
kind: Namespace
metadata:
  name: web
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-frontend
  labels:
    app: web-frontend
spec:
  replicas: 3
  template:
    spec:
      containers:
{containers}
---
apiVersion: v1
kind: Service
metadata:
  name: web-frontend
spec:
  ports:
    - port: 80
      targetPort: 8080
---
kind: ConfigMap
data:
  nginx.conf: |
    server:
      listen: 8080
"""


def test_yaml_documents_are_kept_apart_and_named_by_kind_and_name():
    containers = "".join(f"        - name: sidecar-{i}\n          image: example.com/sidecar:{i}\n" for i in range(8))
    text = K8S.format(containers=containers.rstrip("\n"))
    chunks = _split(text, "web.yaml", chunk_size=400, chunk_overlap=80)
    paths = _paths(chunks)
    assert paths[0] == "web.yaml > Namespace web" and chunks[0].content.startswith("# the web tier\napiVersion: v1")
    assert "web.yaml > Service web-frontend" in paths and paths[-1] == "web.yaml > ConfigMap"
    deployment = [c for c in chunks if "Deployment web-frontend" in c.header_path]
    assert len(deployment) > 1  # longer than a chunk: split at its keys, under the document's name
    assert any(p.startswith("web.yaml > Deployment web-frontend > spec") for p in paths)
    for chunk in chunks:  # no chunk holds two documents, nor starts or ends with their marker
        assert "\n---\n" not in chunk.content and not chunk.content.startswith("---")
        assert not chunk.content.endswith("---")
        assert chunk.content.count("kind:") <= 1


def test_a_block_scalar_holding_key_like_lines_opens_no_section():
    lines = "".join(f"  Note {i}: the field {i} is read by the indexer and the retriever alike.\n" for i in range(20))
    text = f"description: |\n{lines}\nversion: 2\n"
    chunks = _split(text, "chart.yaml", chunk_size=500, chunk_overlap=100)
    assert set(_paths(chunks)) <= {"chart.yaml > description", "chart.yaml > version", "chart.yaml"}
    quoted = 'message: "a quoted scalar\nworld: over two lines, not a key"\nafter: a real key with a value\n'
    assert [h.get("h2") for _, _, h in make_chunker("config", source="q.yaml").sections(quoted)] == ["message", "after"]


def test_toml_strings_in_comments_and_arrays_of_arrays_open_nothing():
    text = (
        '[tool.pytest.ini_options]\n# strings use """ in docstrings\naddopts = "-q"\n\n'
        '[matrix]\ninclude = [\n  ["linux", "x86_64"],\n  ["macos"]\n]\n\n[tool.coverage.run]\nbranch = true\n'
    )
    sections = make_chunker("config", source="pyproject.toml").sections(text)
    assert [h.get("h2") for _, _, h in sections] == ["tool.pytest.ini_options", "matrix", "tool.coverage.run"]


def test_a_long_section_is_cut_between_its_entries_never_inside_a_value():
    steps = "".join(
        f"      - name: Step {i}\n        run: |\n          echo start {i}\n          key{i}: not a key\n"
        f"          echo end {i}\n"
        for i in range(14)
    )
    text = f"jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n{steps}"
    chunks = _split(text, "ci.yml", chunk_size=400, chunk_overlap=80)
    assert len(chunks) > 3 and all(len(c.content) <= 400 for c in chunks)
    for chunk in chunks[1:]:
        assert chunk.content.startswith("      - name: Step")  # whole steps, each with its block scalar
        assert chunk.content.count("echo start") == chunk.content.count("echo end")


def test_a_nested_section_keeps_its_first_line_indentation():
    values = "".join(f"    setting_{i}: {i}  # the setting number {i}\n" for i in range(20))
    text = f"postgresql:\n  enabled: true\n  primary:\n{values}  metrics:\n    enabled: true\n"
    chunks = _split(text, "values.yaml", chunk_size=400, chunk_overlap=80)
    primary = [c for c in chunks if c.header_path == "values.yaml > postgresql > primary"]
    assert primary and primary[0].content.startswith("  primary:\n    setting_0")


def test_two_documents_of_one_name_stay_apart():
    doc = "kind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: {mode}\n"
    text = "---\n".join(doc.format(mode=mode) for mode in ("development", "production"))
    chunks = _split(text, "cm.yaml")
    assert _paths(chunks) == ["cm.yaml > ConfigMap settings", "cm.yaml > ConfigMap settings (2)"]
    assert all(c.content.endswith(mode) for c, mode in zip(chunks, ("development", "production"), strict=True))


@pytest.mark.parametrize("name", [".pre-commit-config.yaml", ".travis.yml", ".golangci.yml"])
def test_a_dotfile_at_a_checkout_s_root_is_read_by_its_suffix_not_as_a_bare_suffix(name):
    # audit 58c: its key (no folder) read as a bare suffix (".pre-commit-config.yaml"): recursive, yet fenced as YAML
    from pathlib import Path

    assert recommend_strategy(name) == recommend_strategy(Path(name)) == "config"
    assert recommend_strategy(".yaml") == "config" and recommend_strategy(".eslintrc.json") == "json"
    assert recommend_strategy(".bashrc") == "recursive" and recommend_strategy(".py") == "code"


# -- fix-cfg2: list items, [[array]] entries and merged sections are named ------------------------------------------

PLAYBOOK = """\
- name: Install web
  hosts: web
  become: true
  tasks:
{tasks}
- name: Configure database
  hosts: db
  tasks:
    - name: Install postgres
      apt:
        name: postgresql
"""


def test_a_top_level_list_s_items_are_sections_named_by_their_name():
    tasks = "".join(
        f"    - name: Task {i}\n      apt:\n        name: package-{i}\n        state: present\n" for i in range(12)
    )
    text = PLAYBOOK.format(tasks=tasks.rstrip("\n"))
    chunks = _split(text, "site.yml", chunk_size=300, chunk_overlap=60)
    paths = _paths(chunks)
    assert paths[-1] == "site.yml > Configure database"
    web = [c for c in chunks if c.header_path.startswith("site.yml > Install web > tasks")]
    assert len(web) > 2  # its long ``tasks`` key split under its own header, cut between tasks
    assert all(c.content.lstrip().startswith(("tasks:", "- name: Task")) for c in web)
    assert all(p.startswith("site.yml > Install web") for p in paths[:-1])
    steps = "- uses: actions/checkout@v4\n  with:\n    fetch-depth: 0\n- id: build\n  run: make build all targets\n"
    assert _paths(_split(steps, "steps.yml", chunk_size=60, chunk_overlap=10)) == [
        "steps.yml > item 1",
        "steps.yml > build",
    ]


def test_toml_array_tables_are_named_by_their_name_key_else_numbered():
    text = (
        '[package]\nname = "tool"\nversion = "0.1.0"\nedition = "2021"\n\n'
        '[[bin]]\nname = "cli"\npath = "src/cli.rs"\nrequired-features = ["cli"]\n\n'
        '[[bin]]\npath = "src/other.rs"\nrequired-features = ["other"]\n\n'
        '[[bin]]\nname = "server"\npath = "src/server.rs"\nrequired-features = ["server"]\n'
    )
    sections = make_chunker("config", source="Cargo.toml").sections(text)
    assert [h.get("h2") for _, _, h in sections] == ["package", "bin cli", "bin (2)", "bin server"]
    chunks = _split(text, "Cargo.toml", chunk_size=80, chunk_overlap=10)
    assert _paths(chunks) == [
        "Cargo.toml > package",
        "Cargo.toml > bin cli",
        "Cargo.toml > bin (2)",
        "Cargo.toml > bin server",
    ]
    joined = _split(text, "Cargo.toml", chunk_size=500, chunk_overlap=100)  # one array's tables joined while they fit
    assert _paths(joined) == ["Cargo.toml > package", "Cargo.toml > bin cli, bin (2), bin server"]


def test_a_short_section_merged_with_the_next_keeps_both_names():
    text = 'image:\n  tag: "1.25"\nservice:\n  type: ClusterIP\n  port: 80\n  annotations:\n    a: "a longer block"\n'
    chunks = _split(text, "values.yaml", chunk_size=200, chunk_overlap=40)
    assert _paths(chunks) == ["values.yaml > image, service"]
    nested = "jobs:\n  lint:\n    run: ruff\n  test:\n    run: pytest\n  docs:\n"
    nested += "".join(f"    step_{i}: run the step {i}\n" for i in range(8))
    paths = _paths(_split(nested, "ci.yml", chunk_size=200, chunk_overlap=40))
    assert paths[0] == "ci.yml > jobs > lint, test"  # only the level they differ at lists them
    text = "# Default values for the chart.\n\nreplicaCount: 1\n"
    assert _paths(_split(text, "values.yaml")) == ["values.yaml > replicaCount"]  # the comment above adds no name


def test_a_piece_cut_to_the_size_is_shown_without_an_indentation_that_does_not_fit() -> None:
    """The recursive fallback cut ``0 0000000000`` to a size of 12; its line's indentation made 13 characters."""
    text = " 0\n 0 0 0\n 0 0000000000. \n"
    doc = make_chunker("config", chunk_size=12, chunk_overlap=0, min_chunk_chars=0).split(text)
    assert "0 0000000000" in [c.content for c in doc.chunks]
    assert all(len(c.content) <= 12 for c in doc.chunks)
