"""The relevance floor (``RankingSettings.relevance_floor``): what shows no evidence of relevance is never shown."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llama_index_memory_hierarchy.language import ACKNOWLEDGEMENTS, TimeHint
from llama_index_memory_hierarchy.ranking.pipeline import time_score
from llama_index_memory_hierarchy.retrieval.candidate import Candidate
from llama_index_memory_hierarchy.turns import speaker_of
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType


def relevant(
    hints: Sequence[TimeHint],
    candidates: Sequence[Candidate],
    above_unrelated: np.ndarray,
    named: set[str],
    entity: np.ndarray,
) -> np.ndarray:
    """Which candidates show evidence of relevance (``RankingSettings.relevance_floor``): a content word of the
    query in what they state themselves, a person the query names by name, a date it names, a graph link from
    an entity it names, or a cosine above that of every unrelated pair of the model's calibration set and above
    the query's own to the calibration set's sentences written as the memory is (``calibration.unrelated_to``).
    A short text (two content words at most) sits near any query in these models: its cosine alone is no evidence.
    """
    out = above_unrelated.copy()
    for i, cand in enumerate(candidates):
        words = cand.text.words
        if words <= ACKNOWLEDGEMENTS:  # an acknowledgement is relevant to nothing
            out[i] = False
            continue
        if out[i] and len(words) > 2:
            continue
        dated = bool(hints) and time_score(cand.item.timestamp, hints) > 0
        out[i] = cand.own > 0 or cand.graph > 0 or dated or bool(named and entity[i] > 0)
    return out


#: The most speakers a search measures the neutral sentences for (a new speaker costs two dozen embeddings once).
MAX_FORMS = 8


def form_of(item: MemoryItem) -> str:
    """How a memory's vector text is written around its content (``tiers.episodic.embedded_turn``): a turn with
    its speaker's name, anything else as it is (``""``)."""
    if item.memory_type is MemoryType.EPISODIC:
        return speaker_of(item) or ""
    return ""
