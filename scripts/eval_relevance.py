#!/usr/bin/env python
"""Does the calibrated relevance tell answerable questions from unanswerable ones? (issue 25.3)

Every question set is asked of every collection through ``retrieve()`` (preset ``--context``, no
cross-encoder, ``min_relevance`` 0, 10 results as ``rag eval`` asks on documentation). A set's own
questions asked of its own collection are in-domain (answerable); the other sets' questions are
out-of-domain. Reported per collection:

* the first result's relevance, percentiles, in-domain and out-of-domain, and a histogram (``--plot``);
* ROC AUC of the first result's relevance as a classifier of in-domain vs each out-of-domain set;
* for each floor in ``--floors``: chunks returned per question, in-domain and out-of-domain (the
  ratio), and nDCG@10 of the documentation sets' own questions with that floor (``finalize``'s rule:
  a first result below the floor drops the list, else results below ``--tail-share`` of the floor are
  cut; each floor is that cut of the one run at 0). ``--dump`` keeps the ranked lists, and
  ``--from-dump`` scores them again with other floors or another ``--tail-share`` without retrieving.
  These cuts leave out the floor's lexical evidence (a first result just under the floor that passes on the
  question's words its results hold: ``retrieve/relevance.py``); ``--preset-floor --floors 0`` measures the
  product's whole rule.

    RAG_DATA_DIR=/tmp/relevance-data scripts/eval_relevance.py \\
        --set ray-docs-qa=/work/shared/datasets/ray-docs-qa \\
        --set anthropic-docs-qa=/work/shared/datasets/anthropic-docs-qa \\
        --set scifact=/work/shared/datasets/scifact --json bench_out/relevance.json --plot docs/relevance_first_result.png

The collections must already hold the sets (``rag eval DIR`` indexes them: ``docs-<dir>``, ``beir-<dir>``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag_service.config import load_settings
from rag_service.errors import RagError
from rag_service.evaluation.beir import read_judged_queries
from rag_service.evaluation.docrun import DOC_MAX_CHUNKS, docset_collection, section_mapper
from rag_service.evaluation.docset import SectionMapper, is_docset, load_docset, rank_sections
from rag_service.evaluation.metrics import evaluate_run
from rag_service.evaluation.runner import collection_for
from rag_service.retrieve.relevance import TAIL_SHARE
from rag_service.service import UniversalRAGService, build_service

PERCENTILES = (5, 10, 25, 50, 75, 90, 95)
DEFAULT_FLOORS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


@dataclass
class QuestionSet:
    """One set's questions, its collection and (documentation sets) its qrels and section mapper."""

    name: str
    collection: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    mapper: SectionMapper | None = None


@dataclass
class Answers:
    """What one question set got from one collection: per question, its results' relevances (ranked)."""

    relevances: dict[str, list[float]] = field(default_factory=dict)
    hits: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


def load_set(name: str, root: Path, max_bytes: int) -> QuestionSet:
    """A set's questions (the test split's judged ones) and where it is indexed."""
    if is_docset(root):
        docset = load_docset(root)
        return QuestionSet(
            name, docset_collection(root), docset.queries, docset.qrels, section_mapper(docset, max_bytes=max_bytes)
        )
    queries, qrels = read_judged_queries(root, "test")
    return QuestionSet(name, collection_for(root), queries, qrels)


def ask(
    service: UniversalRAGService, questions: dict[str, str], collection: str, context: str, *, preset_floor: bool
) -> Answers:
    """Every question through ``retrieve()`` with no cross-encoder and no floor (or the preset's own)."""
    answers = Answers()
    floor = {} if preset_floor else {"min_relevance": 0.0}
    for qid, query in questions.items():
        result = service.retrieve(
            query, context, collection=collection, rerank_enabled=False, max_chunks=DOC_MAX_CHUNKS, **floor
        )
        ranked = sorted(result.chunks, key=lambda c: -c.relevance_score)
        answers.relevances[qid] = [c.relevance_score for c in ranked]
        answers.hits[qid] = [(c.source, c.match_start) for c in ranked]
    return answers


def first(answers: Answers) -> np.ndarray[Any, Any]:
    """The first result's relevance of each question (0 when nothing came back)."""
    return np.array([r[0] if r else 0.0 for r in answers.relevances.values()])


def roc_auc(positive: np.ndarray[Any, Any], negative: np.ndarray[Any, Any]) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    above = (positive[:, None] > negative[None, :]).mean()
    ties = (positive[:, None] == negative[None, :]).mean()
    return float(above + 0.5 * ties)


def passing(relevances: list[float], floor: float, tail_share: float) -> int:
    """How many of one ranked list ``finalize`` keeps: none if the first is below ``floor``, else those
    at or above ``tail_share * floor`` (``tail_share`` 1 is the rule before session 10: one floor for all)."""
    if not relevances or relevances[0] < floor:
        return 0
    return sum(1 for r in relevances if r >= tail_share * floor)


def kept(answers: Answers, floor: float, tail_share: float) -> int:
    """Results returned with ``floor`` (a tail of each ranked list is cut, or all of it)."""
    return sum(passing(rels, floor, tail_share) for rels in answers.relevances.values())


def ndcg_with_floor(answers: Answers, qset: QuestionSet, floor: float, tail_share: float) -> float:
    """nDCG@10 of a documentation set's own questions with the results ``floor`` drops left out."""
    assert qset.mapper is not None
    run = {
        qid: rank_sections(answers.hits[qid][: passing(rels, floor, tail_share)], qset.mapper)
        for qid, rels in answers.relevances.items()
    }
    return evaluate_run(run, qset.qrels, measures=("ndcg@10",))["ndcg@10"]


def report(
    sets: list[QuestionSet], table: dict[tuple[str, str], Answers], floors: list[float], tail_share: float
) -> dict[str, Any]:
    """The numbers per collection (``table[(collection set, question set)]``)."""
    out: dict[str, Any] = {}
    for home in sets:
        own = first(table[(home.name, home.name)])
        entry: dict[str, Any] = {
            "collection": home.collection,
            "first_result": {
                q.name: dict(
                    zip(
                        map(str, PERCENTILES),
                        np.percentile(first(table[(home.name, q.name)]), PERCENTILES).round(3).tolist(),
                        strict=True,
                    )
                )
                for q in sets
            },
            "auc": {q.name: round(roc_auc(own, first(table[(home.name, q.name)])), 4) for q in sets if q is not home},
            "floors": {},
        }
        for floor in floors:
            in_domain = kept(table[(home.name, home.name)], floor, tail_share) / max(len(home.queries), 1)
            row: dict[str, Any] = {"in_domain_chunks": round(in_domain, 3)}
            for q in sets:
                if q is not home:
                    outside = kept(table[(home.name, q.name)], floor, tail_share) / max(len(q.queries), 1)
                    row[f"{q.name}_chunks"] = round(outside, 3)
                    row[f"{q.name}_ratio"] = round(outside / in_domain, 3) if in_domain else None
            if home.mapper is not None:
                row["ndcg@10"] = round(ndcg_with_floor(table[(home.name, home.name)], home, floor, tail_share), 4)
            entry["floors"][str(floor)] = row
        out[home.name] = entry
    return out


def plot(sets: list[QuestionSet], table: dict[tuple[str, str], Answers], path: Path) -> None:
    """One histogram per collection: its own questions' first-result relevance against the others'."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sets), figsize=(5 * len(sets), 3.6), sharey=False)
    bins = np.linspace(0, 1, 26)
    for ax, home in zip(np.atleast_1d(axes), sets, strict=True):
        for q in sets:
            label = f"{q.name} (in-domain)" if q is home else f"{q.name} (out-of-domain)"
            ax.hist(first(table[(home.name, q.name)]), bins=bins, alpha=0.55, label=label, density=True)
        ax.set_title(f"asked of {home.collection}")
        ax.set_xlabel("relevance of the first result")
        ax.legend(fontsize=7)
    axes_list = np.atleast_1d(axes)
    axes_list[0].set_ylabel("density")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def write_dump(table: dict[tuple[str, str], Answers], path: Path) -> None:
    """Every question's ranked (relevance, source, match_start), per (collection set, question set)."""
    rows = {
        f"{home}|{asked}": {
            qid: [[r, *hit] for r, hit in zip(rels, answers.hits[qid], strict=True)]
            for qid, rels in answers.relevances.items()
        }
        for (home, asked), answers in table.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))


def read_dump(path: Path) -> dict[tuple[str, str], Answers]:
    """The table ``write_dump`` wrote."""
    table: dict[tuple[str, str], Answers] = {}
    for key, questions in json.loads(path.read_text()).items():
        home, asked = key.split("|")
        answers = Answers()
        for qid, ranked in questions.items():
            answers.relevances[qid] = [float(r[0]) for r in ranked]
            answers.hits[qid] = [(str(r[1]), int(r[2])) for r in ranked]
        table[(home, asked)] = answers
    return table


def _named(value: str) -> tuple[str, Path]:
    name, sep, root = value.partition("=")
    if not sep or not name or not root:
        raise argparse.ArgumentTypeError(f"--set {value!r} must be NAME=DATASET_DIR")
    return name, Path(root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="sets", type=_named, action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--context", default="agent")
    parser.add_argument("--floors", type=float, nargs="+", default=list(DEFAULT_FLOORS))
    parser.add_argument("--tail-share", type=float, default=TAIL_SHARE, help="the rest are kept down to this x floor")
    parser.add_argument(
        "--preset-floor", action="store_true", help="ask with the preset's own min_relevance (use with --floors 0)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    parser.add_argument("--plot", type=Path, default=None, help="write the histogram PNG here")
    parser.add_argument("--dump", type=Path, default=None, help="write every ranked list here (for --from-dump)")
    parser.add_argument("--from-dump", type=Path, default=None, help="score a --dump again (no retrieval)")
    args = parser.parse_args()

    settings = load_settings()
    sets = [load_set(name, root, settings.max_file_bytes) for name, root in args.sets]
    if args.from_dump is not None:
        table = read_dump(args.from_dump)
    else:
        service = build_service(settings)
        try:
            for qset in sets:
                service.require_collection(qset.collection)
            table = {
                (home.name, q.name): ask(
                    service, q.queries, home.collection, args.context, preset_floor=args.preset_floor
                )
                for home in sets
                for q in sets
            }
        except RagError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            service.close()
    if args.dump is not None:
        write_dump(table, args.dump)
    numbers = report(sets, table, args.floors, args.tail_share)
    text = json.dumps({"context": args.context, "tail_share": args.tail_share, "collections": numbers}, indent=2)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    if args.plot is not None:
        plot(sets, table, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
