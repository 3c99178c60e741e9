"""One definition per preset knob, per setting a stage also reads, and per input limit: type, default, range.

``Preset.validate`` (presets and per-call overrides), the HTTP API's schema (``server/schemas.py``),
``Settings`` (``config.py``), the database columns (``db/models.py``) and the stages that read a value
(``retrieve/fusion.py``, the reranker, keywords, summaries) all take their default and checks from
here; ``tests/unit/test_knobs.py`` holds the API schema, ``Settings`` and the stages to these
definitions. To add a preset knob: add a ``Knob`` to ``PRESET_KNOBS`` and the field to ``Preset`` (and
to ``server/schemas.PresetValues``). A setting only ``Settings`` reads is defined there alone.

One rule for the type of every knob value (``check_knobs``, before any search or write): a value of the
knob's kind (``numbers.Integral`` for an int knob, ``numbers.Real`` for a float one, ``bool`` or numpy's
``bool_`` for a switch) is converted to the plain Python type (``Knob.plain``), so presets hold and store
plain values; any other value (``3.0`` or ``5.5`` for a count, ``1`` for a switch) is refused in one line.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

FusionMethod = Literal["rrf", "linear"]
KeywordScorer = Literal["bm25", "ts_rank_cd"]

#: the largest hnsw.ef_search pgvector accepts (``RAG_HNSW_EF_SEARCH``'s bound)
MAX_EF_SEARCH = 1000
#: deepest candidate list per arm: the vector arm searches with ef_search >= candidate_k
MAX_CANDIDATE_K = MAX_EF_SEARCH
# fusion defaults chosen on SciFact train (migration 0003, docs/benchmarks.md)
DEFAULT_VECTOR_WEIGHT = 0.6
DEFAULT_KEYWORD_WEIGHT = 0.4
DEFAULT_RRF_K = 20
DEFAULT_FUSION_METHOD: FusionMethod = "linear"
DEFAULT_CANDIDATE_K = 20
DEFAULT_KEYWORD_SCORER: KeywordScorer = "bm25"
#: results whose calibrated relevance is below this are dropped; 0 keeps every result (the stock
#: presets that set it: ``config.DEFAULT_PRESETS``, migration 0009)
DEFAULT_MIN_RELEVANCE = 0.0

#: longest query text the library reads (longer ones are cut at a word boundary); the HTTP API's
#: ``RAG_API_MAX_QUERY_CHARS`` may be set up to this, and its schema refuses longer queries
MAX_QUERY_CHARS = 8000
#: longest collection name (``validate_collection``, the ``collection`` columns, the API schema)
MAX_COLLECTION_CHARS = 200
#: longest preset name (the ``rag_configurations.context_type`` column, the API's ``context``)
MAX_PRESET_NAME_CHARS = 64

_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}


@dataclass(frozen=True, slots=True)
class Knob:
    """A tunable value: its name, type, default (None: each preset sets its own), range or choices, meaning."""

    name: str
    kind: type
    description: str
    default: Any = None
    ge: float | None = None
    le: float | None = None
    choices: tuple[str, ...] = ()

    def problem(self, value: object) -> str | None:
        """One line naming the knob and what is wrong with ``value``; None when it is fine."""
        wrong = self.requirement(value)
        return None if wrong is None else f"{self.name} ({shown_value(value)}) {wrong}"

    def sent_problem(self, value: object) -> str | None:
        """``problem`` of a value sent as JSON (the HTTP API, MCP): text sent for a number or a switch also names the
        JSON wanted (``max_chunks ('3') must be a whole number; send 3 without quotes``)."""
        problem = self.problem(value)
        if problem is not None and isinstance(value, str) and self.kind is not str:
            return f"{problem}; send {self.spelling(value)} without quotes"
        return problem

    def requirement(self, value: object) -> str | None:
        """What ``value`` fails (``must be between 0 and 1``), without the knob's name; None when it is fine."""
        if self.choices:
            return None if value in self.choices else f"must be one of {', '.join(map(repr, self.choices))}"
        if not _is_kind(value, self.kind):
            if self.kind is int and isinstance(value, float) and value.is_integer():  # 3.0: a whole number, not an int
                return f"must be an int, not {type(value).__name__}; pass {int(value)}"
            return f"must be {_WORDS[self.kind]}"
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float is out of every range
            number = math.inf
        if (
            not math.isfinite(number)
            or (self.ge is not None and number < self.ge)
            or (self.le is not None and number > self.le)
        ):
            return f"must be between {_num(self.ge)} and {_num(self.le)}"
        if number != 0 and abs(number) < sys.float_info.min:  # subnormal: PostgreSQL's float8 refuses it
            return f"is too close to 0 to store; send 0 or at least {sys.float_info.min:g}"
        return None

    def spelling(self, text: str) -> str:
        """The JSON of the value ``text`` stands for (``5`` for "05", ``0.5`` for ".5", ``true`` for "True"), else
        what this knob takes ("true or false", "a whole number from 1 to 1000"): the fix of a value sent as text."""
        word = text.strip()
        if self.choices:
            return " or ".join(self.choices)
        if self.kind is bool:
            return word.lower() if word.lower() in ("true", "false") else "true or false"
        try:
            number = int(word) if self.kind is int else float(word)
        except ValueError:  # no number, or an int of over 4,300 digits
            number = math.nan
        if self.requirement(number) is None:  # one it takes: written as JSON writes it
            return repr(number)
        kind = "a whole number" if self.kind is int else "a number"
        return kind if self.ge is None or self.le is None else f"{kind} from {_num(self.ge)} to {_num(self.le)}"

    def plain(self, value: object) -> object:
        """``value`` as this knob's plain Python type (numpy scalars, ``Fraction``: ``int``, ``float``, ``bool``,
        ``str``) when it is of the right kind, else ``value`` as it is, for ``requirement`` to name."""
        if self.choices or not _is_kind(value, self.kind):
            return str(value) if isinstance(value, str) else value
        if self.kind is float:
            return _plain_float(value)
        try:
            return self.kind(value)
        except (TypeError, ValueError):  # an exotic subclass: left for requirement() to judge
            return value

    def field_bounds(self) -> dict[str, Any]:
        """Keyword arguments of a pydantic ``Field`` with this knob's bounds and meaning."""
        bounds: dict[str, Any] = {"description": self.description}
        if self.kind in (int, float, bool) and not self.choices:
            # JSON true/false or "0.5" is not a number (lax mode read false as 0), nor "yes", "off", 1 a boolean
            bounds["strict"] = True
        if self.ge is not None:
            bounds["ge"] = self.kind(self.ge)
        if self.le is not None:
            bounds["le"] = self.kind(self.le)
        return bounds


#: longest value an error line shows whole: a 10,000-character text or a 5,000-digit int is cut to its start
SHOWN_VALUE_CHARS = 60


def shown_value(value: object) -> str:
    """``value``'s repr for an error line: a long one cut to its first characters and its length. An int of more
    digits than ``repr`` converts (``sys.get_int_max_str_digits``) is shown so too, not a ValueError."""
    if isinstance(value, int) and not isinstance(value, bool) and (digits := _digits(value)) > SHOWN_VALUE_CHARS:
        lead = abs(value) // 10 ** (digits - 12)  # its first 12 digits, without converting the whole number
        return f"{'-' if value < 0 else ''}{lead}\u2026, {digits} digits"
    text = repr(value)
    if len(text) <= SHOWN_VALUE_CHARS:
        return text
    if isinstance(value, str):
        start = repr(value[: SHOWN_VALUE_CHARS - 20])
        return f"{start[:-1]}\u2026{start[-1]}, {len(value)} characters"
    return f"{text[: SHOWN_VALUE_CHARS - 1]}\u2026"


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has (``len(str(value))`` fails over 4,300 of them)."""
    bits = max(abs(value).bit_length(), 1)
    at_least = int((bits - 1) * math.log10(2)) + 1  # 2**(bits-1) <= |value| < 2**bits
    return at_least if abs(value) < 10**at_least else at_least + 1


def _is_kind(value: object, kind: type) -> bool:
    if isinstance(value, bool) or _is_numpy_bool(value):
        return kind is bool
    if kind is int:
        return isinstance(value, numbers.Integral)
    if kind is float:
        return isinstance(value, numbers.Real)
    return isinstance(value, kind)


def _is_numpy_bool(value: object) -> bool:
    numpy = sys.modules.get("numpy")  # not imported: value cannot be one (and importing it costs ~0.1 s)
    return numpy is not None and isinstance(value, numpy.bool_)


def _plain_float(value: object) -> object:
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.floating) and not isinstance(value, float):
        # float32(0.1) is 0.10000000149011612 as a float: keep the number meant, its shortest repr
        return float(str(value))
    try:
        return float(value)  # type: ignore[arg-type]  # a Real: int, Fraction, float subclasses
    except OverflowError:  # an int beyond any float: requirement() calls it out of range
        return value


def _num(bound: float | None) -> str:
    return "any" if bound is None else str(int(bound)) if float(bound).is_integer() else f"{bound:g}"  # not 1e+06


PRESET_KNOBS: dict[str, Knob] = {
    knob.name: knob
    for knob in (
        Knob("max_chunks", int, "most chunks returned", ge=1, le=1000),
        Knob("max_tokens", int, "token budget of the formatted context", ge=1, le=1_000_000),
        Knob("diversity", float, "MMR trade-off: 0 = relevance only, 1 = novelty only", ge=0.0, le=1.0),
        Knob("expand_query", bool, "add query variants"),
        Knob("return_parents", bool, "return each match's parent section"),
        Knob("vector_weight", float, "the vector arm's weight in fusion", DEFAULT_VECTOR_WEIGHT, 0.0, 1.0),
        Knob("keyword_weight", float, "the keyword arm's weight in fusion", DEFAULT_KEYWORD_WEIGHT, 0.0, 1.0),
        Knob("rerank_enabled", bool, "rerank the fused candidates with the cross-encoder", True),
        Knob("rrf_k", int, "rank offset of reciprocal rank fusion", DEFAULT_RRF_K, 1, 10_000),
        Knob("fusion_method", str, "how the arms are merged", DEFAULT_FUSION_METHOD, choices=("rrf", "linear")),
        Knob(
            "candidate_k",
            int,
            "candidates per arm; never fewer than max_chunks (4 x max_chunks with return_parents), and read deeper "
            "where identical texts leave fewer distinct ones",
            DEFAULT_CANDIDATE_K,
            1,
            MAX_CANDIDATE_K,
        ),
        Knob("keyword_scorer", str, "the keyword arm's score", DEFAULT_KEYWORD_SCORER, choices=("bm25", "ts_rank_cd")),
        Knob("show_metadata", bool, "the formatted context shows summaries and keywords", False),
        Knob("graph_weight", float, "the graph walk's share of the ranking; 0 = off", 0.0, 0.0, 1.0),
        Knob(
            "min_relevance",
            float,
            "the first result's relevance (0..1) must reach this, the others 0.4 of it; 0 = keep all",
            DEFAULT_MIN_RELEVANCE,
            0.0,
            1.0,
        ),
    )
}


def plain_knobs(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with each knob's value as its plain Python type (``Knob.plain``); other names as they are."""
    return {name: PRESET_KNOBS[name].plain(v) if name in PRESET_KNOBS else v for name, v in values.items()}


#: other libraries' names for the number of results (LangChain's ``search_kwargs={"k": 4}``): our ``max_chunks``
COUNT_ALIASES = {"k": "max_chunks", "top_k": "max_chunks"}


def name_hint(name: str, names: Iterable[str], *, quoted: bool = False) -> str:
    """``"did you mean max_chunks? "`` for a name that is not one of ``names``: the knob of a count alias
    (``COUNT_ALIASES``: ``top_k``) when ``names`` has it, else the closest name (``errors.did_you_mean``), else ``""``.
    Every entry's unknown-name error (Python, CLI, HTTP fields, MCP arguments) hints so."""
    from rag_service.errors import did_you_mean

    known = list(names)
    alias = COUNT_ALIASES.get(name)
    if alias in known:
        return f"did you mean {alias!r}? " if quoted else f"did you mean {alias}? "
    return did_you_mean(name, known, quoted=quoted)


def check_knob_names(names: Iterable[object]) -> None:
    """Raise ConfigurationError naming the ``names`` that are no preset knob, with a did-you-mean for one."""
    from rag_service.errors import ConfigurationError

    unknown = sorted({str(name) for name in names if name not in PRESET_KNOBS})
    if unknown:
        hint = name_hint(unknown[0], PRESET_KNOBS) if len(unknown) == 1 else ""
        raise ConfigurationError(
            f"unknown override(s) {', '.join(unknown)}; {hint}valid ones: {', '.join(sorted(PRESET_KNOBS))}"
        )


def check_knobs(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as plain types (``plain_knobs``), or ConfigurationError naming the first knob of the wrong
    type or out of range."""
    from rag_service.errors import ConfigurationError

    plain = plain_knobs(values)
    for name, value in plain.items():
        knob = PRESET_KNOBS.get(name)
        wrong = knob.requirement(value) if knob is not None else None
        if wrong is not None:  # named as given: diversity=3 is "diversity (3)", not its float 3.0
            raise ConfigurationError(f"{name} ({shown_value(values[name])}) {wrong}")
    return plain


#: ``retrieve()``'s own arguments beside the knobs: an override of one of these names would be given twice
CALL_ARGUMENTS: tuple[str, ...] = ("query", "context", "collection", "filters")


def call_arguments_in(overrides: Iterable[str]) -> list[str]:
    """The names in ``overrides`` that are ``retrieve()``'s own arguments (``CALL_ARGUMENTS``), not knobs."""
    given = set(overrides)
    return [name for name in CALL_ARGUMENTS if name in given]


# Settings (``RAG_<NAME>``) whose default a stage also needs when called without ``Settings``: the
# ``Settings`` field of the knob's name and the stage's default both come from these.
RERANK_MODEL = Knob(
    "rerank_model", str, "cross-encoder name or local path; 'none' turns reranking off", "ms-marco-MiniLM-L-6-v2"
)
CHUNK_KEYWORDS = Knob(
    "chunk_keywords", int, "keywords per chunk in metadata.keywords (BM25-weighted terms); 0: none", 8, 0, 50
)
SUMMARY_SENTENCES = Knob(
    "summary_sentences", int, "sentences of each document's extractive metadata.summary; 0: none", 3, 0, 20
)
EMBEDDING_BATCH_SIZE = Knob("embedding_batch_size", int, "texts embedded per model call", 64, 1, 4096)
LLM_TIMEOUT_S = Knob("llm_timeout_s", float, "seconds an LLM call may take in all before it degrades", 30.0, 0.001, 600)


def llm_rerank_weights(value: str) -> tuple[float, float, float]:
    """``"semantic,vector,position"`` as three weights in 0..1 summing to 1 (NeuroLink's multi-factor score)."""
    parts = value.split(",")
    try:
        weights = tuple(float(p) for p in parts)
    except ValueError:
        weights = ()
    if len(weights) != 3 or any(not 0.0 <= w <= 1.0 for w in weights) or abs(sum(weights) - 1.0) > 1e-6:
        raise ValueError(
            f"{value!r} must be three weights semantic,vector,position in 0..1 summing to 1, e.g. 0.5,0.3,0.2"
        )
    return weights[0], weights[1], weights[2]
