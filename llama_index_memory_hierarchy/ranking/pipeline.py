"""Retrieval pipeline: pure, dependency-light building blocks for ranking conversational memories.

Each function works on plain values (strings, datetimes, score mappings) so that any
tier can use it whatever its stores are. Together they form the recipe measured on
LoCoMo by ``bench/locomo.py`` (``docs/benchmarks.md``: recall@5/@10 0.715/0.787 against
0.501/0.592 for BM25 + dense RRF), summed up by :class:`PipelineRecipe`:

1. **Index** each turn twice. Keyword index: ``turns.keyword_document``, the turn with its
   date and the two previous turns of the same session (a turn is often only
   understandable with the question before it), stemmed by :func:`stem_text`. Dense
   index: ``turns.format_turn``, the speaker and the turn alone.
2. **Query** the keyword index with :func:`keyword_query` (content words, stemmed:
   question words, auxiliaries and pronouns removed) and the dense index with the question.
3. **Fuse** by score (:func:`~.fusion.score_fuse`: BM25 over its best, cosine as it is), which
   keeps the margin of a sharp keyword hit that :func:`~.fusion.rrf_fuse` throws away.
4. **Re-rank** with priors read from the question alone (:func:`rerank`): the people it
   names (:func:`mentioned_names`, :func:`entity_boost`), the dates it mentions
   (:func:`extract_time_hints`, :func:`time_score`), and whether it asks *when*
   (:func:`has_temporal_intent` with :func:`has_time_expression` on the candidate).

:func:`rank_candidates` does steps 3 and 4 in one call. Nothing here looks at labels of
any benchmark: everything is computed from the query text and the candidates' text,
speaker and event time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from llama_index_memory_hierarchy import language
from llama_index_memory_hierarchy.language import (
    TimeHint,
    extract_time_hints,
    has_temporal_intent,
    has_time_expression,
    mentioned_names,
    named_chat_party,
)
from llama_index_memory_hierarchy.language import keyword_tokens as tokenize
from llama_index_memory_hierarchy.language import stem as light_stem
from llama_index_memory_hierarchy.ranking.fusion import score_fuse
from llama_index_memory_hierarchy.types import as_utc

__all__ = [
    "TimeHint",
    "extract_time_hints",
    "has_temporal_intent",
    "has_time_expression",
    "light_stem",
    "mentioned_names",
    "named_chat_party",
    "tokenize",
]

K = TypeVar("K", bound=Hashable)

# ------------------------------------------------------------------------------ keyword query
# The language functions (tokenize, light_stem, keyword_terms, stem_text, keyword_query, the time
# hints, mentioned_names) live in :mod:`llama_index_memory_hierarchy.language`; the names here
# are kept for the pipeline's callers. ``tokenize`` is the keyword index's tokenizer (jieba for
# Chinese) and ``light_stem`` its Snowball English stemmer.


def __getattr__(name: str) -> Any:
    if name == "QUERY_STOPWORDS":  # loaded on first use (the lists ship with bm25s)
        return language.query_stopwords()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def keyword_terms(
    query: str,
    *,
    stopwords: Iterable[str] | None = None,
    tokenizer: Callable[[str], list[str]] = tokenize,
) -> list[str]:
    """Content words of a question for a keyword (BM25) search, unique, in order (:func:`language.query_terms`).

    ``"What did Odile paint?"`` gives ``["odile", "paint"]``. When every
    word is a stopword the query's own tokens are returned, so a search never goes empty.
    ``tokenizer`` must be the one the keyword index uses (the default is).
    """
    return language.query_terms(query, stopwords=stopwords, tokenizer=tokenizer)


def stem_text(text: str, *, tokenizer: Callable[[str], list[str]] = tokenize) -> str:
    """``text`` as stemmed keyword tokens joined by spaces (what a keyword index should store)."""
    return " ".join(light_stem(token) for token in tokenizer(text))


def keyword_query(query: str, *, tokenizer: Callable[[str], list[str]] = tokenize) -> str:
    """The keyword search text for a question: its content words, stemmed (``keyword_terms`` + ``light_stem``)."""
    return " ".join(light_stem(term) for term in keyword_terms(query, tokenizer=tokenizer))


# ------------------------------------------------------------------------------ time
_DAY = 86400.0
_INSTANT = timedelta(microseconds=1)


def time_score(event_time: datetime, hints: Sequence[TimeHint], *, late_factor: float = 0.5) -> float:
    """How well an event time matches the query's time hints, in [0, 1] (0 when no hint).

    1 inside a hint's interval, decaying exponentially with the distance outside it, one e-fold per
    width of the hint: a hint is as precise as its own span, so a day off "on 29 April" keeps a third of
    the boost while a day off "in April" keeps nearly all. Events told *after* the period (a conversation
    on 2 June about "last month") decay ``late_factor`` times slower, since people talk about the past
    more than the future. Distances count whole days, since a hint (a day or longer) holds no time of day:
    an event on 28 April, at noon or just before midnight, is a day off "on 29 April". A hint that named
    no year (``TimeHint.yearless``) is that day or month of the event's year (or a neighbouring one).
    """
    if not hints:
        return 0.0
    moment = as_utc(event_time)
    best = 0.0
    for hint in _in_event_years(hints, moment.year):
        if hint.start <= moment < hint.end:
            return 1.0
        width = (hint.end - hint.start).total_seconds()
        # a hint is a day or longer (``TimeHint.granularity``) and holds no time of day: whole days apart
        if moment < hint.start:
            distance = (as_utc(hint.start).date() - moment.date()).days * _DAY
        else:
            distance = (moment.date() - as_utc(hint.end - _INSTANT).date()).days * _DAY * late_factor
        best = max(best, math.exp(-distance / width))
    return best


def _in_event_years(hints: Sequence[TimeHint], year: int) -> list[TimeHint]:
    """The hints, a year-less one as the same day or month of ``year`` and of the years beside it."""
    out: list[TimeHint] = []
    for hint in hints:
        if not hint.yearless:
            out.append(hint)
            continue
        out += [shifted for y in (year - 1, year, year + 1) if (shifted := hint.in_year(y)) is not None]
    return out


# ------------------------------------------------------------------------------ entities
def entity_boost(
    speaker: str | None,
    text: str,
    names: Iterable[str],
    *,
    mention_weight: float = 0.5,
    party: str | None = None,
    named_party: str | None = None,
) -> float:
    """Entity affinity of a candidate for the ``names`` a query mentions, in [0, 1].

    1 when the candidate's speaker is one of them, or when it is the account of the one chat party the query
    names by pronoun (``named_party``, :func:`named_chat_party`; ``party``: the candidate's); ``mention_weight``
    when the text names one of them; 0 otherwise (and always 0 when the query names nobody).
    """
    if named_party is not None and party == named_party:
        return 1.0
    names = [n for n in names if n]
    if not names:
        return 0.0
    if speaker and any(speaker.casefold() == n.casefold() for n in names):
        return 1.0
    return mention_weight if mentioned_names(text, names) else 0.0


# ------------------------------------------------------------------------------ re-ranking
@dataclass(frozen=True)
class Candidate:
    """What :func:`rerank` needs to know about one candidate memory."""

    key: Hashable
    text: str
    speaker: str | None = None
    event_time: datetime | None = None
    party: str | None = None  # "user" or "assistant": whose account it is in a chat (None between people)


@dataclass(frozen=True)
class RerankWeights:
    """Multipliers of the fused score: ``score * (1 + entity*e + time*t + temporal*h)``.

    ``entity``: boost for candidates spoken by (or naming) a person the query names.
    ``time``: boost by :func:`time_score` when the query names a date or period.
    ``temporal``: boost for candidates mentioning a time when the query asks *when*.
    """

    entity: float = 0.3
    time: float = 1.0
    temporal: float = 0.5


def rerank(
    query: str,
    fused: Sequence[tuple[K, float]],
    candidates: Mapping[K, Candidate],
    *,
    now: datetime | None = None,
    names: Iterable[str] | None = None,
    weights: RerankWeights = RerankWeights(),
    time_hints: Sequence[TimeHint] | None = None,
    time_expression: Callable[[str], bool] = has_time_expression,
) -> list[tuple[K, float]]:
    """Re-rank fused ``(key, score)`` pairs with the query's entity and time priors, best first.

    ``names`` defaults to the speakers of the candidates. Keys without a candidate keep
    their fused score. The result is sorted by the boosted score.
    """
    if names is None:
        names = {c.speaker for c in candidates.values() if c.speaker}
    named = mentioned_names(query, names)
    party = named_chat_party(query)
    hints = extract_time_hints(query, now) if time_hints is None else list(time_hints)
    temporal = has_temporal_intent(query)
    out: list[tuple[K, float]] = []
    for key, score in fused:
        cand = candidates.get(key)
        if cand is None:
            out.append((key, score))
            continue
        factor = 1.0
        if (named or party) and weights.entity:
            factor += weights.entity * entity_boost(cand.speaker, cand.text, named, party=cand.party, named_party=party)
        if hints and weights.time and cand.event_time is not None:
            factor += weights.time * time_score(cand.event_time, hints)
        if temporal and weights.temporal and time_expression(cand.text):
            factor += weights.temporal
        out.append((key, score * factor))
    out.sort(key=lambda kv: kv[1], reverse=True)
    return out


# ------------------------------------------------------------------------------ the recipe
@dataclass(frozen=True)
class PipelineRecipe:
    """The measured default: what to index and how to weigh the signals (``docs/benchmarks.md``).

    * keyword index: ``turns.keyword_document`` with ``context_before`` previous turns of the
      same session and the date, stored as :func:`stem_text`; queried with :func:`keyword_query`;
    * dense index: ``turns.format_turn`` (speaker and text) of the turn alone;
    * ``candidates`` best of each, fused by :func:`score_fuse` (keyword ``"max"``-normalised,
      cosine clipped at 0, with these weights), then :func:`rerank` with ``rerank`` weights.
    """

    context_before: int = 2
    context_after: int = 0
    date_in_keyword_text: bool = True
    keyword_weight: float = 1.0
    dense_weight: float = 1.0
    candidates: int = 40
    rerank: RerankWeights = RerankWeights()


DEFAULT_RECIPE = PipelineRecipe()


def rank_candidates(
    query: str,
    keyword_scores: Mapping[K, float],
    dense_scores: Mapping[K, float],
    candidates: Mapping[K, Candidate],
    *,
    now: datetime | None = None,
    names: Iterable[str] | None = None,
    recipe: PipelineRecipe = DEFAULT_RECIPE,
) -> list[tuple[K, float]]:
    """The whole ranking step of the recipe: fuse keyword and dense scores, then apply the priors.

    ``keyword_scores``: BM25-like scores (higher is better) of the keyword hits.
    ``dense_scores``: cosine similarities, ideally of *every* candidate (keyword hits
    included, from their stored vectors), so that no candidate loses a signal only
    because it missed the other index's cut.
    """
    fused = score_fuse(
        [keyword_scores, dense_scores], [recipe.keyword_weight, recipe.dense_weight], normalise=["max", "clip"]
    )
    return rerank(query, fused, candidates, now=now, names=names, weights=recipe.rerank)
