"""Retrieval pipeline: pure, dependency-light building blocks for ranking conversational memories.

Each function works on plain values (strings, datetimes, score mappings) so that any
tier can use it whatever its stores are. Together they form the recipe measured on
LoCoMo by ``bench/locomo.py`` (``docs/benchmarks.md``: recall@5/@10 0.715/0.787 against
0.501/0.592 for BM25 + dense RRF), summed up by :class:`PipelineRecipe`:

1. **Index** each turn twice. Keyword index: :func:`keyword_document`, the turn with its
   date and the two previous turns of the same session (a turn is often only
   understandable with the question before it), stemmed by :func:`stem_text`. Dense
   index: :func:`format_turn`, the speaker and the turn alone.
2. **Query** the keyword index with :func:`keyword_query` (content words, stemmed:
   question words, auxiliaries and pronouns removed) and the dense index with the question.
3. **Fuse** by score (:func:`score_fuse`: BM25 over its best, cosine as it is), which
   keeps the margin of a sharp keyword hit that :func:`rrf_fuse` throws away.
4. **Re-rank** with priors read from the question alone (:func:`rerank`): the people it
   names (:func:`mentioned_names`, :func:`entity_boost`), the dates it mentions
   (:func:`extract_time_hints`, :func:`time_score`), and whether it asks *when*
   (:func:`has_temporal_intent` with :func:`has_time_expression` on the candidate).

:func:`rank_candidates` does steps 3 and 4 in one call. Nothing here looks at labels of
any benchmark: everything is computed from the query text and the candidates' text,
speaker and event time.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

K = TypeVar("K", bound=Hashable)

# ------------------------------------------------------------------------------ keyword query
#: Words that carry no content in a question: question words, auxiliaries, pronouns,
#: determiners and common prepositions. Removed from keyword queries only (never from
#: stored text), so the keyword index ranks on what the question is about.
_QUERY_STOPWORD_TEXT = """
a an the and or but nor if then else so than that this these those there here
what when where which who whom whose why how whatever whichever
is are was were be been being am do does did done doing has have had having
will would shall should can could may might must ought
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
of in on at to for from by with without about into onto over under up down out off as per via
some any all both each every either neither more most other another such own same
very just also too only really ever even still yet not no
kind type sort thing things something anything
"""
QUERY_STOPWORDS: frozenset[str] = frozenset(_QUERY_STOPWORD_TEXT.split())

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens (letters and digits), punctuation dropped."""
    return _WORD.findall(text.casefold())


_VOWELS = frozenset("aeiouy")
_DOUBLES = frozenset("bdfgmnprt")


def light_stem(token: str) -> str:
    """A small, conservative English stemmer: plurals, ``-ing``, ``-ed`` and a final ``e``.

    ``camping``/``camped``/``camps`` -> ``camp``; ``making``/``make`` -> ``mak``;
    ``parties``/``party`` -> ``parti``... the point is only that a word and its
    inflections meet on the same key, in the index and in the query alike (apply it
    to both). Tokens of three letters or fewer, or with digits, are kept as they are.
    """
    word = token
    if len(word) <= 3 or not word.isalpha() or not word.isascii():
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "i"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and not word.endswith("eed"):
            stem = word[: -len(suffix)]
            if len(stem) >= 3 and any(ch in _VOWELS for ch in stem):
                word = stem
                if len(word) >= 4 and word[-1] == word[-2] and word[-1] in _DOUBLES:
                    word = word[:-1]
            break
    if word.endswith("y") and len(word) > 3 and word[-2] not in _VOWELS:
        word = word[:-1] + "i"
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def keyword_terms(
    query: str,
    *,
    stopwords: Iterable[str] = QUERY_STOPWORDS,
    tokenizer: Callable[[str], list[str]] = tokenize,
) -> list[str]:
    """Content words of a question for a keyword (BM25) search, unique, in order.

    ``"What did Caroline research?"`` gives ``["caroline", "research"]``. When every
    word is a stopword the query's own tokens are returned, so a search never goes empty.
    ``tokenizer`` must be the one the keyword index uses (for example the library's
    ``text.keyword_tokens``, which also segments Chinese and Japanese).
    """
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else frozenset(stopwords)
    tokens = tokenizer(query)
    seen: dict[str, None] = {}
    for token in tokens:
        if token not in stop:
            seen.setdefault(token, None)
    return list(seen) or list(dict.fromkeys(tokens))


def stem_text(text: str, *, tokenizer: Callable[[str], list[str]] = tokenize) -> str:
    """``text`` as stemmed keyword tokens joined by spaces (what a keyword index should store)."""
    return " ".join(light_stem(token) for token in tokenizer(text))


def keyword_query(query: str, *, tokenizer: Callable[[str], list[str]] = tokenize) -> str:
    """The keyword search text for a question: its content words, stemmed (``keyword_terms`` + ``light_stem``)."""
    return " ".join(light_stem(term) for term in keyword_terms(query, tokenizer=tokenizer))


# ------------------------------------------------------------------------------ fusion
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


# ------------------------------------------------------------------------------ indexed text
def format_turn(text: str, speaker: str | None = None, when: datetime | str | None = None) -> str:
    """One turn as indexed: ``"[8 May 2023] Caroline: text"`` (date and speaker when known)."""
    line = f"{speaker}: {text}" if speaker else text
    if when is None:
        return line
    stamp = when if isinstance(when, str) else f"{when.day} {when:%B %Y}"
    return f"[{stamp}] {line}"


def contextual_text(
    turns: Sequence[str],
    index: int,
    *,
    before: int = 1,
    after: int = 1,
    groups: Sequence[Hashable] | None = None,
    separator: str = "\n",
) -> str:
    """Turn ``index`` with up to ``before`` previous and ``after`` next turns, joined in order.

    ``turns`` are already formatted lines (see :func:`format_turn`). With ``groups``
    (for example session ids), only neighbours of the same group are included: a new
    session does not explain the last turn of the previous one.
    """
    if not 0 <= index < len(turns):
        raise IndexError(f"turn index {index} out of range for {len(turns)} turns")
    if before < 0 or after < 0:
        raise ValueError("before and after must be >= 0")
    group = groups[index] if groups is not None else None
    lines = []
    for j in range(max(0, index - before), min(len(turns), index + after + 1)):
        if groups is not None and groups[j] != group:
            continue
        lines.append(turns[j])
    return separator.join(lines)


def keyword_document(
    text: str,
    *,
    speaker: str | None = None,
    when: datetime | str | None = None,
    previous: Sequence[str] = (),
    following: Sequence[str] = (),
) -> str:
    """The text a keyword index should hold for one turn: its date, the turns around it, and the turn.

    ``previous`` and ``following`` are neighbouring turns of the same session, already
    formatted with :func:`format_turn`, oldest first; the recipe uses the two previous
    turns and none after, so a turn's document is final when it is written.
    """
    lines = [*previous, format_turn(text, speaker), *following]
    return format_turn("\n".join(lines), None, when)


# ------------------------------------------------------------------------------ time
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "few": 3,
    "couple of": 2,
    "several": 4,
}
_NUM = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|a few|couple of|a couple of|several)"

_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH_RE})\.?,?\s*{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}}){_ORD},?\s*{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
_SEASON_YEAR = re.compile(r"\b(spring|summer|autumn|fall|winter)\s+(?:of\s+)?((?:19|20)\d\d)\b", re.I)
_ISO_DATE = re.compile(r"\b((?:19|20)\d\d)-(\d{1,2})-(\d{1,2})\b")
_YEAR_ONLY = re.compile(rf"\b{_YEAR}\b")
_MONTH_ALONE = re.compile(rf"\b(?:in|during|on|of|since|until|by|early|mid|late|last|this)\s+({_MONTH_RE})\b", re.I)
_RELATIVE_DAY = re.compile(r"\b(today|tonight|this morning|this afternoon|this evening|yesterday|tomorrow)\b", re.I)
_RELATIVE_UNIT = re.compile(r"\b(last|this|next|past)\s+(week|weekend|month|year)\b", re.I)
_AGO = re.compile(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b", re.I)


@dataclass(frozen=True)
class TimeHint:
    """A time the query refers to: the interval ``[start, end)`` and how precise it is."""

    start: datetime
    end: datetime
    granularity: Literal["day", "week", "month", "season", "year"]
    text: str = field(default="", compare=False)


def _utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


def _month_span(year: int, month: int, count: int = 1) -> tuple[datetime, datetime]:
    start = _utc(year, month, 1)
    end_month = month + count
    end = _utc(year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1)
    return start, end


def _safe_day(year: int, month: int, day: int) -> datetime | None:
    try:
        return _utc(year, month, day)
    except ValueError:
        return None


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def extract_time_hints(query: str, now: datetime | None = None) -> list[TimeHint]:
    """Dates and periods named in ``query``, as UTC intervals.

    Understands absolute dates (``"8 May, 2023"``, ``"October 13, 2023"``,
    ``"2023-05-08"``), months (``"May 2023"``; ``"in May"`` = the latest May not after
    ``now``), seasons (``"summer 2022"``), years (``"in 2022"``) and, relative to ``now``,
    ``today``/``yesterday``, ``last week``/``this month``/``next year`` and ``N days ago``.
    Relative expressions are ignored when ``now`` is None. Overlapping matches are
    reported once (the most precise wins).
    """
    hints: list[TimeHint] = []
    taken: list[tuple[int, int]] = []
    now = _as_utc(now) if now is not None else None

    def free(match: re.Match[str]) -> bool:
        a, b = match.span()
        return all(b <= s or a >= e for s, e in taken)

    def add(match: re.Match[str], start: datetime | None, end: datetime | None, granularity: Any) -> None:
        taken.append(match.span())  # an impossible date (30 February) is still not a year
        if start is None or end is None:
            return
        hints.append(TimeHint(start, end, granularity, match.group(0)))

    for m in _ISO_DATE.finditer(query):
        day = _safe_day(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in _DAY_MONTH_YEAR.finditer(query):
        if free(m):
            day = _safe_day(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))
            add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in _MONTH_DAY_YEAR.finditer(query):
        if free(m):
            day = _safe_day(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)))
            add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in _MONTH_YEAR.finditer(query):
        if free(m):
            add(m, *_month_span(int(m.group(2)), _MONTHS[m.group(1).lower()]), "month")
    for m in _SEASON_YEAR.finditer(query):
        if free(m):
            first, count = _SEASONS[m.group(1).lower()]
            add(m, *_month_span(int(m.group(2)), first, count), "season")
    for m in _YEAR_ONLY.finditer(query):
        if free(m):
            year = int(m.group(1))
            add(m, _utc(year, 1, 1), _utc(year + 1, 1, 1), "year")
    if now is not None:
        for m in _MONTH_ALONE.finditer(query):
            if free(m) and not (m.group(1).lower() == "may" and not m.group(0)[0].isalpha()):
                month = _MONTHS[m.group(1).lower()]
                year = now.year if month <= now.month else now.year - 1
                add(m, *_month_span(year, month), "month")
        today = _utc(now.year, now.month, now.day)
        for m in _RELATIVE_DAY.finditer(query):
            if free(m):
                word = m.group(1).lower()
                offset = -1 if word == "yesterday" else 1 if word == "tomorrow" else 0
                day = today + timedelta(days=offset)
                add(m, day, day + timedelta(days=1), "day")
        for m in _RELATIVE_UNIT.finditer(query):
            if not free(m):
                continue
            which, unit = m.group(1).lower(), m.group(2).lower()
            step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
            if unit in ("week", "weekend"):
                monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
                if unit == "weekend":
                    add(m, monday + timedelta(days=5), monday + timedelta(days=7), "day")
                else:
                    add(m, monday, monday + timedelta(days=7), "week")
            elif unit == "month":
                index = now.year * 12 + now.month - 1 + step
                add(m, *_month_span(index // 12, index % 12 + 1), "month")
            else:
                year = now.year + step
                add(m, _utc(year, 1, 1), _utc(year + 1, 1, 1), "year")
        for m in _AGO.finditer(query):
            if not free(m):
                continue
            amount = _NUMBER_WORDS.get(m.group(1).lower().removeprefix("a ").strip())
            if amount is None:
                amount = int(m.group(1)) if m.group(1).isdigit() else 1
            unit = m.group(2).lower()
            days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * amount
            centre = today - timedelta(days=days)
            spread = timedelta(days=max(1, days // 7))
            granularity = {"day": "day", "week": "week", "month": "month", "year": "year"}[unit]
            add(m, centre - spread, centre + spread, granularity)
    hints.sort(key=lambda h: h.start)
    return hints


#: How fast :func:`time_score` falls off outside a hint, in days, by the hint's precision.
TIME_SCALES_DAYS: dict[str, float] = {"day": 3.0, "week": 5.0, "month": 10.0, "season": 20.0, "year": 45.0}


def time_score(
    event_time: datetime,
    hints: Sequence[TimeHint],
    *,
    scales: Mapping[str, float] = TIME_SCALES_DAYS,
    late_factor: float = 0.5,
) -> float:
    """How well an event time matches the query's time hints, in [0, 1] (0 when no hint).

    1 inside a hint's interval, decaying exponentially with the distance outside it
    (scale by precision, :data:`TIME_SCALES_DAYS`). Events told *after* the period
    (a conversation on 2 June about "last month") decay ``late_factor`` times slower,
    since people talk about the past more than the future.
    """
    if not hints:
        return 0.0
    moment = _as_utc(event_time)
    best = 0.0
    for hint in hints:
        if hint.start <= moment < hint.end:
            return 1.0
        scale = scales.get(hint.granularity, 10.0)
        if moment < hint.start:
            distance = (hint.start - moment).total_seconds() / 86400.0
        else:
            distance = (moment - hint.end).total_seconds() / 86400.0 * late_factor
        best = max(best, math.exp(-distance / scale))
    return best


_TEMPORAL_INTENT = re.compile(
    r"^\s*when\b|\bwhen (?:did|does|do|is|was|were|will|has|have|had)\b|\bwhat (?:year|month|date|day|time|week)\b"
    r"|\bwhich (?:year|month|date|day|week)\b|\bhow long\b|\bhow many (?:days|weeks|months|years)\b"
    r"|\bsince when\b|\bhow (?:soon|recently|often)\b",
    re.I,
)
_TIME_EXPRESSION = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|recently|lately|ago|last|next|this (?:morning|afternoon|evening|"
    rf"week|weekend|month|year|summer|winter|spring|fall|autumn)|weekend|(?:mon|tues|wednes|thurs|fri|satur|sun)day"
    rf"|{_MONTH_RE}|(?:19|20)\d\d|since|until|soon|earlier|(?:a )?(?:few|couple of) (?:days|weeks|months|years)"
    rf"|\d+ (?:days|weeks|months|years)|(?:day|week|month|year)s? (?:ago|before|after))\b",
    re.I,
)


def has_temporal_intent(query: str) -> bool:
    """Whether the question asks for a time (``When ...?``, ``How long ...?``, ``What year ...?``)."""
    return bool(_TEMPORAL_INTENT.search(query))


def has_time_expression(text: str) -> bool:
    """Whether ``text`` mentions a time (``yesterday``, ``last week``, ``in May``, ``2022``, ``3 days ago``)."""
    return bool(_TIME_EXPRESSION.search(text))


# ------------------------------------------------------------------------------ entities
def mentioned_names(query: str, names: Iterable[str]) -> set[str]:
    """The ``names`` (speakers, people) that ``query`` mentions as whole words, case-insensitive.

    A possessive (``"Caroline's"``) counts; a name inside another word does not.
    """
    words = set(tokenize(query))
    found = set()
    for name in names:
        if not name:
            continue
        parts = tokenize(name)
        if parts and all(p in words for p in parts):
            found.add(name)
    return found


def entity_boost(speaker: str | None, text: str, names: Iterable[str], *, mention_weight: float = 0.5) -> float:
    """Entity affinity of a candidate for the ``names`` a query mentions, in [0, 1].

    1 when the candidate's speaker is one of them; ``mention_weight`` when the text
    names one of them; 0 otherwise (and always 0 when the query names nobody).
    """
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
    hints = extract_time_hints(query, now) if time_hints is None else list(time_hints)
    temporal = has_temporal_intent(query)
    out: list[tuple[K, float]] = []
    for key, score in fused:
        cand = candidates.get(key)
        if cand is None:
            out.append((key, score))
            continue
        factor = 1.0
        if named and weights.entity:
            factor += weights.entity * entity_boost(cand.speaker, cand.text, named)
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

    * keyword index: :func:`keyword_document` with ``context_before`` previous turns of the
      same session and the date, stored as :func:`stem_text`; queried with :func:`keyword_query`;
    * dense index: :func:`format_turn` (speaker and text) of the turn alone;
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
