"""The relevance floor (``RankingSettings.relevance_floor``): what shows no evidence of relevance is never shown.

A memory's *standing* (:func:`standing_of`) is how far its cosine to the query sits above those of unrelated
texts, in standard deviations of unrelated pairs (``SimilarityCalibration.relevance``, measured per model,
language pair and speaker form on the background statements; 0 = as near as unrelated texts are). Its cosine is
evidence when the standing is one that unrelated memories reach with probability
``RankingSettings.floor_false_positive_rate`` (0.2%: 2.9); a shared content word when the standing is above 1.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from llama_index_memory_hierarchy.calibration import SimilarityCalibration, abackground
from llama_index_memory_hierarchy.language import CONTENT_FREE_WORDS, TimeHint, evidence_terms
from llama_index_memory_hierarchy.ranking.pipeline import time_score
from llama_index_memory_hierarchy.ranking.selection import is_content_free
from llama_index_memory_hierarchy.retrieval.candidate import Candidate
from llama_index_memory_hierarchy.turns import format_turn, speaker_of
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.embeddings import EmbeddingService


def relevant(
    query: str,
    hints: Sequence[TimeHint],
    candidates: Sequence[Candidate],
    standing: np.ndarray,
    false_positive_rate: float,
    named: set[str],
    entity: np.ndarray,
    *,
    recall: bool = False,
) -> np.ndarray:
    """Which candidates show evidence of relevance (``RankingSettings.relevance_floor``).

    ``standing`` is each candidate's relevance in standard deviations of unrelated pairs (:func:`standing_of`,
    NaN unmeasured). Evidence is a cosine that stands out (a standing only ``false_positive_rate`` of unrelated
    memories reach, or :data:`CLEAR_LENIENCY` times that for the one candidate that stands :data:`CLEAR_MARGIN`
    above every other: a clear best match, as Lowe's ratio test accepts a match far better than the next), or a
    content word of the query (``language.evidence_terms``: not 里, 上, 一个) in what it states itself with a
    meaning nearer than most unrelated texts (:data:`LEXICAL_FALSE_POSITIVE_RATE`: "work" in "how does a jet
    engine work" and "I work at a bakery" is not), or two such words, or every one the query has, whatever
    the meaning, or a person the query names by name, a date it names, a graph
    link from an entity it names. A short text (two content words at most) sits near any query in these models:
    its cosine alone is no evidence; an acknowledgement or talk about talk is never relevant. A request to recall
    in general (``recall``: ``language.asks_to_recall``, "what did I tell you earlier?") asks for the user's past
    itself: every informative memory is relevant to it (the ranking orders them), a content-free one still not.
    """
    dense_bar = NormalDist().inv_cdf(1.0 - false_positive_rate)
    lexical_bar = NormalDist().inv_cdf(1.0 - LEXICAL_FALSE_POSITIVE_RATE)
    clear_bar = NormalDist().inv_cdf(1.0 - min(0.5, CLEAR_LENIENCY * false_positive_rate))
    known = np.nan_to_num(standing, nan=-np.inf)
    top, runner_up = [*np.sort(known)[::-1].tolist(), -np.inf, -np.inf][:2]
    out = np.zeros(len(candidates), dtype=bool)
    content = evidence_terms(query)
    for i, cand in enumerate(candidates):
        words = cand.text.words
        if words <= CONTENT_FREE_WORDS:  # an acknowledgement, talk about talk: relevant to nothing
            continue
        if recall and not is_content_free(words, matched_query=False):
            out[i] = True
            continue
        others = runner_up if known[i] == top else top
        clear = known[i] > clear_bar and known[i] - max(others, 0.0) > CLEAR_MARGIN
        if (known[i] > dense_bar or clear) and len(words) > 2:
            out[i] = True
            continue
        shared = cand.matched & content
        # one shared word may be another sense of it ("work" in a jet engine and at a bakery): its meaning must
        # agree; two or more of the query's content words in what it states, or all of them, are evidence alone
        worded = len(shared) > 1 or (bool(shared) and (shared == content or not standing[i] <= lexical_bar))
        dated = bool(hints) and time_score(cand.item.timestamp, hints) > 0
        out[i] = worded or cand.graph > 0 or dated or bool(named and entity[i] > 0)
    return out


#: How many times more unrelated memories a clear best candidate may be drawn from, and by how many standard
#: deviations of unrelated pairs it must stand above the next candidate (and above 0) to be clear.
CLEAR_LENIENCY = 5.0
CLEAR_MARGIN = 1.0
#: The share of unrelated memories whose meaning still lets a shared content word count as evidence: a standing
#: above one standard deviation of unrelated pairs (the nearest sixth of them).
LEXICAL_FALSE_POSITIVE_RATE = 1.0 - NormalDist().cdf(1.0)
#: The most speakers a search measures the background for (a new speaker costs some fifty embeddings once).
MAX_FORMS = 8


async def aprepare(
    embeddings: EmbeddingService, calibration: SimilarityCalibration, candidates: Sequence[Candidate]
) -> None:
    """Measure the background for the candidates' forms (the plain one, and up to :data:`MAX_FORMS` speakers)."""
    await abackground(embeddings, calibration, "", str)
    for speaker in sorted({form_of(c.item) for c in candidates} - {""})[:MAX_FORMS]:
        await abackground(embeddings, calibration, speaker, functools.partial(format_turn, speaker=speaker))


def standing_of(
    calibration: SimilarityCalibration,
    query_vector: np.ndarray | None,
    query_group: str,
    candidates: Sequence[Candidate],
) -> np.ndarray:
    """Each candidate's relevance to the query (``SimilarityCalibration.relevance``) in standard deviations above
    the mean of unrelated pairs (``floor_nulls``): about standard normal for unrelated memories. NaN without a
    vector or a measured background."""
    out = np.full(len(candidates), np.nan)
    if query_vector is None:
        return out
    rows: dict[tuple[str, str], list[int]] = {}
    for i, cand in enumerate(candidates):
        if cand.vector is not None and cand.vector.shape == query_vector.shape:
            rows.setdefault((cand.text.group, form_of(cand.item)), []).append(i)
    for (group, form), index in rows.items():
        vectors = np.stack([candidates[i].vector for i in index])
        relevance = calibration.relevance(query_vector, query_group, vectors, group, form)
        null = calibration.floor_nulls.get((query_group, group))
        if relevance is not None and null is not None:
            out[index] = (relevance - null[0]) / max(null[1], 1e-6)
    return out


def form_of(item: MemoryItem) -> str:
    """How a memory's vector text is written around its content (``tiers.episodic.embedded_turn``): a turn with
    its speaker's name, anything else as it is (``""``)."""
    if item.memory_type is MemoryType.EPISODIC:
        return speaker_of(item) or ""
    return ""
