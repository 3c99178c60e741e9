"""The definition bonus after fusion: a code chunk defining a name the question names ranks higher.

On code, a question naming a definition ("where is Store.get defined?", a bare ``coalesce``) finds the chunks that
use the name as readily as the one that defines it, and ranked the users first as often as not. Each chunk of a
document chunked as ``code`` ends its header path with its definition's name, after its container's
(``lib > Store > get``; ``ingest.code_names``). A candidate whose name the question names gets ``weight`` of the way
from its relevance to 1, ``1 - (1 - relevance) * (1 - weight * match)``, so relevance stays in 0..1 and the others keep
theirs; the candidates are ranked again, ties in their order. Chunks of other documents (documentation, configuration)
never match: their scores and order among themselves stay as they were.

Names compare as ``keyword_text.name_parts`` parts them, case-insensitively and whatever joins the parts: ``getBits``,
``get_bits``, ``GET-BITS`` and the words ``get bits`` in a row are one name. ``match`` is 1 when the name is one of the
question's identifiers or words (or up to ``MAX_RUN`` of them in a row); for a dotted (or ``::``) identifier
``Type.method``, 1 when the container is ``Type`` too and ``PARTIAL`` when it is another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rag_service.keyword_text import reads_name_parts
from rag_service.result import RetrievedChunk

#: the most words in a row read as one name (``scaling config`` for ``ScalingConfig``)
MAX_RUN = 3
#: the match of a chunk named ``method`` in another container than the question's ``Type.method`` names
PARTIAL = 0.5
#: an identifier or word of a question, with its dotted (``a.b.c``) or ``::`` path
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*")
_PATH_STEP = re.compile(r"\.|::")
#: what a header path's part is split at: its levels
_LEVEL = " > "


def name_key(name: str) -> str:
    """``name`` as names compare: its parts (snake_case, camelCase, dotted) lowercased and joined (``getBits`` ->
    ``getbits``)."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


@dataclass(frozen=True, slots=True)
class QueryNames:
    """The names a question names: ``whole`` (identifiers, words and runs of words) and ``scoped`` (``Type.method``
    as (type, method) keys)."""

    whole: frozenset[str]
    scoped: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, query: str) -> QueryNames:
        """The names in ``query``: each identifier's key, each run of up to ``MAX_RUN`` plain words joined, each
        dotted identifier's last two steps as a scoped name (``jinja2.nodes.EvalContext`` -> (nodes, evalcontext))."""
        whole: set[str] = set()
        scoped: set[tuple[str, str]] = set()
        plain: list[str] = []
        for token in _IDENTIFIER.findall(query):
            steps = [name_key(step) for step in _PATH_STEP.split(token)]
            if len(steps) > 1:
                scoped.add((steps[-2], steps[-1]))
                plain = []
                continue
            plain = [*plain[-(MAX_RUN - 1) :], steps[0]]
            whole.update("".join(plain[i:]) for i in range(len(plain)))
        return cls(frozenset(k for k in whole if k), frozenset(s for s in scoped if all(s)))

    def match(self, header_path: str) -> float:
        """How well a chunk named by ``header_path`` (``lib > Store > get``) is named by the question: 0, ``PARTIAL``
        or 1 (see the module's doc)."""
        levels = header_path.split(_LEVEL)
        if len(levels) < 2:  # the module alone: code outside any definition
            return 0.0
        steps = [name_key(s) for s in _PATH_STEP.split(levels[-1])]
        name, container = steps[-1], steps[-2] if len(steps) > 1 else name_key(levels[-2])
        if not name:
            return 0.0
        if (container, name) in self.scoped or name in self.whole:
            return 1.0
        return PARTIAL if any(method == name for _, method in self.scoped) else 0.0


def is_code(chunk: RetrievedChunk) -> bool:
    """Whether ``chunk``'s document was chunked by a strategy whose header paths end in definitions' names."""
    return reads_name_parts(chunk.chunker)


def add_definitions(chunks: Sequence[RetrievedChunk], query: str, weight: float) -> list[RetrievedChunk]:
    """``chunks`` with the definition bonus of ``query`` at ``weight`` (0..1), ranked again; unchanged (the same
    list's items, in order) with weight 0 or when no code chunk among them is named by the question."""
    if weight <= 0 or not any(is_code(c) and c.header_path for c in chunks):
        return list(chunks)
    names = QueryNames.of(query)
    if not names.whole and not names.scoped:
        return list(chunks)
    rescored = []
    for chunk in chunks:
        match = names.match(chunk.header_path) if is_code(chunk) and chunk.header_path else 0.0
        value = 1.0 - (1.0 - chunk.relevance_score) * (1.0 - weight * match)
        rescored.append(replace(chunk, relevance_score=value) if match else chunk)
    return [rescored[i] for i in sorted(range(len(rescored)), key=lambda i: (-rescored[i].relevance_score, i))]
