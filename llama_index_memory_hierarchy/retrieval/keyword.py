"""The keyword signal's weighting of the query's terms among the candidates."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def term_weights(terms: Iterable[str], texts: Sequence[frozenset[str]]) -> dict[str, float]:
    """Each query term's inverse document frequency among the candidates' own texts (rare terms weigh more)."""
    n = len(texts)
    return {t: math.log(1.0 + (n + 1) / (sum(1 for text in texts if t in text) + 1)) for t in terms}
