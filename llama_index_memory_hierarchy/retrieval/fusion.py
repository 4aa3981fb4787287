"""Rank fusion and the relevance/recency/importance score (Generative Agents).

Signals (dense, keyword, graph, ...) are fused by reciprocal rank, never by raw
scores: cosine and BM25 live on different scales. The fused relevance is then
normalised to [0, 1] and mixed with recency and importance by configurable weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from llama_index_memory_hierarchy.types import MemoryItem


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], *, k: int = 60, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """RRF: ``sum_i w_i / (k + rank_i(d))`` over the rankings a document appears in."""
    weights = weights or [1.0] * len(rankings)
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    return scores


def recency(moment: datetime, now: datetime, half_life_hours: float) -> float:
    """Exponential decay in [0, 1]: 1 now, 0.5 after one half-life."""
    age_hours = max((now - moment).total_seconds() / 3600.0, 0.0)
    return math.pow(0.5, age_hours / half_life_hours)


def score_items(
    items: Sequence[MemoryItem],
    relevance: dict[str, float],
    *,
    now: datetime,
    relevance_weight: float,
    recency_weight: float,
    importance_weight: float,
    half_life_hours: float,
) -> list[MemoryItem]:
    """Set ``score`` = weighted sum of normalised relevance, recency and importance; sort best first.

    Recency counts from the last access when there is one (what was recalled lately
    stays fresh), else from the event time.
    """
    top = max((relevance.get(item.id, 0.0) for item in items), default=0.0) or 1.0
    total = (relevance_weight + recency_weight + importance_weight) or 1.0
    scored = []
    for item in items:
        moment = max(item.timestamp, item.last_accessed) if item.last_accessed else item.timestamp
        value = (
            relevance_weight * relevance.get(item.id, 0.0) / top
            + recency_weight * recency(moment, now, half_life_hours)
            + importance_weight * item.importance
        ) / total
        scored.append(item.model_copy(update={"score": value}))
    scored.sort(key=lambda item: item.score or 0.0, reverse=True)
    return scored
