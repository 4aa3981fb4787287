"""Fit the cross-tier search's signal weights on labelled dev data, with conversation-level cross-validation.

Usage (from the repository root)::

    python bench/fit_ranking.py                  # LoCoMo dev + MemoryBank dev zh/en, held-out table
    python bench/fit_ranking.py --write          # also write the full-dev weights the ``default`` preset ships
    python bench/fit_ranking.py --grid graph --write   # what ships: the graph weight by grid search, every corpus
    python bench/fit_ranking.py --smoke          # CI: 1 conversation, 2 users per language, few questions

Each conversation (LoCoMo: one per fold; MemoryBank: folds of users, per language) is built once as
``bench/locomo.py``'s ``hierarchy`` system (turns, then offline consolidation). Every question is searched
once with the ``unfitted`` preset and no relevance floor, keeping the first ``--pool`` memories with their
``explanation``: the signal columns (``ranking.settings.WEIGHTED_SIGNALS``) and what the rest of the score
is (tier evidence, content-free, redundancy, covers). A weighting of the columns re-ranks that pool; it is
learnt by pairwise logistic regression (scikit-learn): for every question of the training folds, each memory
that counts for an evidence turn against each that does not (``locomo_data.reproduces`` counting). With
``--grid`` the named weights are chosen instead by a coordinate search over :data:`GRID` that maximises
recall@5 + recall@1 / 2 of the re-ranked pools, averaged over the corpora, on every other fold of every corpus
(one weighting for all languages, as ships). The figures are recall@1/5/10 on the **held-out** folds only,
beside the episodic tier (``episodic.retrieve``), the unfitted hierarchy and the weights fitted on all folds
(their gap to the held-out figures is the estimate of what fitting costs on unseen data). The relevance
floor's false-negative cost is the same searches with the floor on (``default`` settings) against off.

Nothing here reads a question's answer or category for ranking; categories only split the table.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from embed_cache import CachedEmbedder  # noqa: E402
from locomo import DEFAULT_DATA as LOCOMO_DATA  # noqa: E402
from locomo import WholeHierarchySystem, sample_questions, share_library_model  # noqa: E402
from locomo_data import Slot, load_locomo, slot_ids  # noqa: E402
from memorybank import DEFAULT_DATA as MEMORYBANK_DATA  # noqa: E402
from memorybank_data import load_memorybank  # noqa: E402

from llama_index_memory_hierarchy.ranking.settings import (  # noqa: E402
    FITTED_WEIGHTS,
    WEIGHTED_SIGNALS,
    RankingSettings,
)

logger = logging.getLogger("bench.fit_ranking")

KS = (1, 5, 10)
UNFITTED = RankingSettings(name="unfitted", relevance_floor=False)


@dataclass
class Question:
    """One question's search pool: signal columns, the rest of each score, and what each memory counts for."""

    dataset: str
    fold: str
    category: int
    groups: tuple[tuple[str, ...], ...]  # evidence groups (LoCoMo: one id each)
    columns: np.ndarray  # (pool, signals)
    rest: np.ndarray  # (pool,): score less the weighted columns
    slots: list[Slot]
    episodic: list[Slot]  # the episodic tier's ranking
    floored: list[Slot] = field(default_factory=list)  # the default search, relevance floor on
    switched_off: list[Slot] = field(default_factory=list)  # unfitted, without the ``--on`` switches


def recall(slots: Sequence[Slot], groups: Sequence[Sequence[str]], k: int, by_sources: bool = False) -> float:
    top = {d for slot in slots[:k] for d in slot_ids(slot, by_sources)}
    return sum(1 for g in groups if any(e in top for e in g)) / len(groups)


def ranked(question: Question, weights: np.ndarray) -> list[Slot]:
    scores = question.columns @ weights + question.rest
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [question.slots[i] for i in order]


def collect(
    system: WholeHierarchySystem,
    dataset: str,
    fold: str,
    qas: Sequence[Any],
    pool: int,
    floor: bool,
    switches: Sequence[str] = (),
) -> list[Question]:
    """Search every question of one built conversation: its pool with columns, the tier's and floored rankings."""
    memory = system._memory
    on = {name: True for name in switches}
    unfitted, default = UNFITTED.but(**on), RankingSettings.preset("default").but(**on)
    out = []
    for qa, groups in qas:
        if not groups:
            continue
        items = memory.search(qa.question, limit=pool, ranking=unfitted)
        columns = np.array([[i.explanation.get(s, 0.0) for s in WEIGHTED_SIGNALS] for i in items]).reshape(-1, 8)
        rest = np.array([(i.score or 0.0) - sum(i.explanation.get(s, 0.0) for s in WEIGHTED_SIGNALS) for i in items])
        slots = [system.slot(i.metadata, i.content) for i in items]
        tier = memory.episodic.retrieve(qa.question, limit=max(KS), ranking=UNFITTED)
        episodic = [system.slot(i.metadata, i.content) for i in tier]  # its session summaries counted as shown
        question = Question(dataset, fold, qa.category, groups, columns, rest, slots, episodic)
        if switches:  # the same search without them, for a comparison in the same process
            off = memory.search(qa.question, limit=max(KS), ranking=UNFITTED)
            question.switched_off = [system.slot(i.metadata, i.content) for i in off]
        if floor:
            question.floored = [
                system.slot(i.metadata, i.content) for i in memory.search(qa.question, limit=max(KS), ranking=default)
            ]
        out.append(question)
    return out


def fit(questions: Sequence[Question], c: float = 1.0) -> np.ndarray:
    """Pairwise logistic regression: each counting memory against each other one of the same question."""
    from sklearn.linear_model import LogisticRegression

    diffs = []
    for q in questions:
        wanted = {e for g in q.groups for e in g}
        positive = [i for i, slot in enumerate(q.slots) if wanted & set(slot_ids(slot))]
        negative = [i for i in range(len(q.slots)) if i not in positive]
        for i in positive:
            for j in negative:
                diffs.append(q.columns[i] - q.columns[j])
    if not diffs:
        return np.ones(len(WEIGHTED_SIGNALS))
    x = np.array(diffs)
    model = LogisticRegression(fit_intercept=False, C=c, max_iter=2000)
    model.fit(np.vstack([x, -x]), np.r_[np.ones(len(x)), np.zeros(len(x))])
    weights = np.maximum(model.coef_[0], 0.0)
    # on the scale of the unfitted weights: the columns' mean total is kept, so the rest of a score keeps its weight
    scale = np.abs(np.vstack([q.columns for q in questions])).mean(axis=0)
    used = float(weights @ scale)
    return weights * (float(scale.sum()) / used) if used > 0 else np.ones(len(WEIGHTED_SIGNALS))


#: The values a weight takes in the grid search (``--grid``).
GRID = (0.0, 0.5, 1.0, 2.0)


def objective(questions: Sequence[Question], weights: np.ndarray) -> float:
    """What the grid search maximises: recall@5 + recall@1 / 2 of the pool re-ranked, averaged over datasets (each
    corpus counts alike, however many questions it has)."""
    out = []
    for dataset in sorted({q.dataset for q in questions}):
        data = [q for q in questions if q.dataset == dataset]
        rankings = [ranked(q, weights) for q in data]
        out.append(
            float(
                np.mean(
                    [recall(r, q.groups, 5) + recall(r, q.groups, 1) / 2 for q, r in zip(data, rankings, strict=True)]
                )
            )
        )
    return float(np.mean(out))


def fit_grid(questions: Sequence[Question], signals: Sequence[str], rounds: int = 2) -> np.ndarray:
    """Coordinate search: each weight of ``signals`` in turn set to the :data:`GRID` value that raises
    :func:`objective` most (the rest stay 1), ``rounds`` times over; ties keep the weight it has."""
    weights = np.ones(len(WEIGHTED_SIGNALS))
    best = objective(questions, weights)
    for _ in range(rounds):
        for signal in signals:
            j = WEIGHTED_SIGNALS.index(signal)
            for value in GRID:
                trial = weights.copy()
                trial[j] = value
                score = objective(questions, trial)
                if score > best + 1e-9:
                    best, weights = score, trial
    return weights


def scores(questions: Sequence[Question], rankings: Sequence[Sequence[Slot]]) -> dict[str, float]:
    out = {
        f"R@{k}": float(np.mean([recall(r, q.groups, k) for q, r in zip(questions, rankings, strict=True)])) for k in KS
    }
    out["n"] = float(len(questions))
    return out


def evaluate(questions: list[Question], grid: Sequence[str] = ()) -> dict[str, Any]:
    """Held-out figures per dataset: the fold's weights are fitted on the other folds of the same dataset
    (pairwise), or with ``grid`` (the signals a grid search sets) on every other fold of every dataset."""

    def fitted(train: Sequence[Question]) -> np.ndarray:
        return fit_grid(train, grid) if grid else fit(train)

    result: dict[str, Any] = {}
    weights_by_fold: dict[str, list[float]] = {}
    datasets = sorted({q.dataset for q in questions})
    for dataset in datasets:
        data = [q for q in questions if q.dataset == dataset]
        folds = sorted({q.fold for q in data})
        held: dict[int, list[Slot]] = {}
        for fold in folds:
            if grid:  # one weighting for every corpus: the other folds of all of them
                train = [q for q in questions if (q.dataset, q.fold) != (dataset, fold)]
            else:
                train = [q for q in data if q.fold != fold]
            w = fitted(train)
            weights_by_fold[f"{dataset}:{fold}"] = [round(float(v), 4) for v in w]
            for i, q in enumerate(data):
                if q.fold == fold:
                    held[i] = ranked(q, w)
        full = fitted(questions if grid else data)
        ones = np.ones(len(WEIGHTED_SIGNALS))
        rows = {
            "episodic tier": [q.episodic for q in data],
            "hierarchy, unfitted": [ranked(q, ones) for q in data],
            "hierarchy, fitted (held-out folds)": [held[i] for i in range(len(data))],
            "hierarchy, fitted on all folds": [ranked(q, full) for q in data],
        }
        table = {name: scores(data, r) for name, r in rows.items()}
        table["hierarchy, unfitted, derived by every source id"] = {
            f"R@{k}": float(np.mean([recall(ranked(q, ones), q.groups, k, by_sources=True) for q in data])) for k in KS
        }
        if all(q.switched_off for q in data):
            table["hierarchy, unfitted, switches off"] = scores(data, [q.switched_off for q in data])
        if all(q.floored for q in data):
            table["hierarchy, default, relevance floor on"] = scores(data, [q.floored for q in data])
            table["hierarchy, default, relevance floor on"]["empty"] = float(np.mean([not q.floored for q in data]))
        categories = sorted({q.category for q in data if q.category})
        by_category = {}
        for category in categories:
            subset = [i for i, q in enumerate(data) if q.category == category]
            by_category[str(category)] = {
                name: float(np.mean([recall(r[i], data[i].groups, 5) for i in subset])) for name, r in rows.items()
            }
        result[dataset] = {"table": table, "by_category_R@5": by_category, "full_fit_weights": list(map(float, full))}
    result["fold_weights"] = weights_by_fold
    return result


def print_result(result: dict[str, Any]) -> None:
    for dataset, body in result.items():
        if dataset == "fold_weights":
            continue
        print(f"\n{dataset}: recall@1 / @5 / @10")
        for name, row in body["table"].items():
            extra = f"  (no result for {row['empty']:.3f} of the questions)" if "empty" in row else ""
            print(f"  {name:52s} " + " / ".join(f"{row[f'R@{k}']:.3f}" for k in KS) + extra)
        for category, row in body["by_category_R@5"].items():
            print(f"  category {category} R@5: " + ", ".join(f"{n} {v:.3f}" for n, v in row.items()))
        print(
            "  full-fit weights: "
            + ", ".join(f"{s} {w:.3f}" for s, w in zip(WEIGHTED_SIGNALS, body["full_fit_weights"], strict=True))
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO_DATA, help="LoCoMo dev JSON (default: %(default)s)")
    parser.add_argument("--memorybank", type=Path, default=MEMORYBANK_DATA, help="MemoryBank dev folder")
    parser.add_argument("--datasets", default="locomo,memorybank-zh,memorybank-en", help="comma-separated")
    parser.add_argument("--pool", type=int, default=30, help="memories per question the weights re-rank")
    parser.add_argument("--user-folds", type=int, default=4, help="MemoryBank folds of users per language")
    parser.add_argument("--no-floor", action="store_true", help="skip the relevance floor's cost")
    parser.add_argument("--smoke", action="store_true", help="1 conversation, 2 users per language, few questions")
    parser.add_argument("--on", default="", help="comma-separated boolean RankingSettings fields to switch on")
    parser.add_argument(
        "--grid",
        default="",
        help="comma-separated signals to fit by grid search on every corpus at once (default: pairwise regression "
        "of all eight per corpus)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this JSON file")
    parser.add_argument("--write", action="store_true", help=f"write the full-dev weights to {FITTED_WEIGHTS.name}")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    switches = [s.strip() for s in args.on.split(",") if s.strip()]
    grid = [s.strip() for s in args.grid.split(",") if s.strip()]
    if unknown := sorted(set(grid) - set(WEIGHTED_SIGNALS)):
        parser.error(f"--grid: unknown signal(s) {unknown}; choose from {', '.join(WEIGHTED_SIGNALS)}")
    embedder = CachedEmbedder(use_cache=True, library_model="default")
    share_library_model("default")
    questions: list[Question] = []
    per_conv = 6 if args.smoke else None
    with tempfile.TemporaryDirectory(prefix="lmh-fit-") as workdir:
        if "locomo" in names:
            system = WholeHierarchySystem(Path(workdir) / "locomo", embedder)  # a new user per conversation
            for conv in load_locomo(args.locomo, 2 if args.smoke else None):
                system.index(conv.turns)
                qas = [(qa, tuple((e,) for e in qa.evidence)) for qa in sample_questions(conv.qa, per_conv)]
                qas = [(qa, g) for qa, g in qas if qa.category in (1, 2, 3, 4)]
                questions += collect(system, "locomo", conv.sample_id, qas, args.pool, not args.no_floor, switches)
            system.close()
        for lang in ("zh", "en"):
            if f"memorybank-{lang}" not in names:
                continue
            users = load_memorybank(args.memorybank, lang, 4 if args.smoke else None)
            folds = 2 if args.smoke else args.user_folds
            system = WholeHierarchySystem(Path(workdir) / f"mb-{lang}", embedder)
            for index, conv in enumerate(users):
                system.index(conv.turns)
                groups = dict(zip((id(q) for q in conv.qa), conv.groups, strict=True))
                qas = [(qa, groups[id(qa)]) for qa in sample_questions(conv.qa, per_conv)]
                fold = f"users-{index % folds}"
                questions += collect(system, f"memorybank-{lang}", fold, qas, args.pool, not args.no_floor, switches)
            system.close()
    result = evaluate(questions, grid)
    print_result(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    if args.write:
        # one weighting for every language: fitted on the questions of all datasets together
        weights = fit_grid(questions, grid) if grid else fit(questions)
        payload = {
            "signal_weights": {s: round(float(w), 4) for s, w in zip(WEIGHTED_SIGNALS, weights, strict=True)},
            "made_by": "python bench/fit_ranking.py --write" + (f" --grid {','.join(grid)}" if grid else ""),
            "datasets": names,
            "questions": len(questions),
            "held_out": {d: body["table"] for d, body in result.items() if d != "fold_weights"},
        }
        FITTED_WEIGHTS.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {FITTED_WEIGHTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
