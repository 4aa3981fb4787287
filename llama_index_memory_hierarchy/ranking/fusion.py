"""Rank fusion, recency decay and reinforcement by access.

Rankings of one kind of thing (knowledge-base chunks, entities, encoder hits) are fused by reciprocal
rank (:func:`rrf_fuse`) or by normalised score (:func:`score_fuse`), never by raw scores: cosine and
BM25 live on different scales. Memories are scored by the cross-tier search alone
(``retrieval.search``), which reads :func:`recency` here.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from datetime import datetime
from typing import Literal, TypeVar

K = TypeVar("K", bound=Hashable)


def rrf_fuse(
    rankings: Sequence[Sequence[K]], weights: Sequence[float] | None = None, k: float = 60.0
) -> list[tuple[K, float]]:
    """Weighted reciprocal rank fusion: ``score(d) = sum_i w_i / (k + rank_i(d))``, best first.

    ``rankings`` are lists of keys, best first (rank 1 is the first). A key absent from a
    ranking gets nothing from it. Ties keep the order of first appearance.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[K, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if not weight:
            continue
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: kv[1], reverse=True)


Normalisation = Literal["max", "minmax", "clip", "none"]


def normalise_scores(scores: Mapping[K, float], method: Normalisation = "max") -> dict[K, float]:
    """Put one signal's scores on a comparable scale.

    ``"max"``: divide by the best score (negatives become 0), so the best is 1: right
    for BM25, whose scale depends on the query. ``"minmax"``: to [0, 1]. ``"clip"``:
    negatives to 0, else unchanged: right for cosine similarity, already in [-1, 1].
    ``"none"``: unchanged.
    """
    if not scores or method == "none":
        return dict(scores)
    if method == "clip":
        return {key: max(value, 0.0) for key, value in scores.items()}
    if method == "max":
        top = max(scores.values())
        if top <= 0:
            return dict.fromkeys(scores, 0.0)
        return {key: max(value, 0.0) / top for key, value in scores.items()}
    if method == "minmax":
        low, high = min(scores.values()), max(scores.values())
        if high <= low:
            return dict.fromkeys(scores, 1.0 if high > 0 else 0.0)
        return {key: (value - low) / (high - low) for key, value in scores.items()}
    raise ValueError(f"unknown normalisation {method!r}")


def score_fuse(
    signals: Sequence[Mapping[K, float]],
    weights: Sequence[float] | None = None,
    *,
    normalise: Normalisation | Sequence[Normalisation] = "max",
) -> list[tuple[K, float]]:
    """Convex-style fusion: ``score(d) = sum_i w_i * norm_i(s_i(d))``, best first.

    Unlike :func:`rrf_fuse` it keeps *how much* better a candidate is, which matters
    when one signal is sharp (a rare keyword) and the other flat. A candidate missing
    from a signal gets 0 from it, so give every signal the same candidate set when you
    can (for example, compute the cosine of every candidate from its stored vector).
    ``normalise`` is one method for all signals or one per signal (see
    :func:`normalise_scores`).
    """
    if weights is None:
        weights = [1.0] * len(signals)
    if len(weights) != len(signals):
        raise ValueError(f"{len(signals)} signals but {len(weights)} weights")
    methods = [normalise] * len(signals) if isinstance(normalise, str) else list(normalise)
    if len(methods) != len(signals):
        raise ValueError(f"{len(signals)} signals but {len(methods)} normalisations")
    fused: dict[K, float] = {}
    for signal, weight, method in zip(signals, weights, methods, strict=True):
        for key, value in normalise_scores(signal, method).items():
            fused[key] = fused.get(key, 0.0) + weight * value
    return sorted(fused.items(), key=lambda kv: kv[1], reverse=True)


def recency(moment: datetime, now: datetime, half_life_hours: float) -> float:
    """Exponential decay in [0, 1]: 1 now, 0.5 after one half-life."""
    age_hours = max((now - moment).total_seconds() / 3600.0, 0.0)
    return math.pow(0.5, age_hours / half_life_hours)


def reinforcement(access_count: int, *, strength: float = 0.25, saturation: float = 5.0) -> float:
    """Share of the remaining headroom that ``access_count`` recalls add: ``strength * (1 - e^(-n/s))``."""
    if access_count <= 0:
        return 0.0
    return strength * (1.0 - math.exp(-access_count / saturation))
