"""Choosing the final list from scored candidates: one slot per memory, no repeats, some diversity.

Pure functions over plain values (ids, word sets, unit vectors, scores), so the rules can be
tested on their own. :func:`select` is a greedy maximal-marginal-relevance pass: each step takes
the candidate whose score, less its redundancy with what is already chosen, is best, and

* collapses identical or near-identical contents (the better scored one is kept);
* shows a derived memory (a fact, a summary) and one of its sources only when each adds words
  the other lacks; when the later one says all the earlier one did and more, it takes its slot,
  and so does a source that says as much as its derived memory (the verbatim record wins);
* with ``source_first``, shows a source turn in the place of a derived memory that reproduces less than half
  of that turn's words (the derived memory competes for the next slot), so a fact does not cost its turn;
* puts content-free candidates ("ok", "got it", "好的") after every informative one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_memory_hierarchy.calibration import IDENTITY, SimilarityCalibration
from llama_index_memory_hierarchy.language import CONTENT_FREE_WORDS

#: Calibrated similarity (:mod:`~llama_index_memory_hierarchy.calibration`) at or above which two
#: memories say the same thing (collapsed to one).
NEAR_DUPLICATE_SIMILARITY = 0.95
#: Share of a memory's words that must be new for it to add something to a related memory.
MIN_NOVELTY = 0.5
#: Weight of redundancy (squared calibrated similarity to the closest chosen memory, times the best score) in the
#: maximal-marginal-relevance step; 0 turns diversity off.
DIVERSITY = 0.15


@dataclass
class Choice:
    """One scored candidate as :func:`select` sees it."""

    key: str
    score: float
    words: frozenset[str]
    identity: str = ""  # normalised text: equal identities are one memory
    vector: np.ndarray | None = None
    related: frozenset[str] = frozenset()  # ids it derives from, or that derive from it
    content_free: bool = False
    group: str = "en"  # calibration group of its text (``calibration.group_of``)
    tiebreak: tuple[float, ...] = ()  # larger first when scores are equal (importance, time, ...)
    penalty: float = 0.0
    covers: Choice | None = None  # the chosen memory whose slot it took (it says all that one did)
    stands_for: Choice | None = None  # the derived memory whose place it took (``source_first``)
    held: float | None = None  # the score of the slot it holds, fixed when it was chosen


def normalised_text(text: str) -> str:
    """Text as compared for identity: NFKC, case-folded, letters and digits only."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def novelty(words: frozenset[str], other: frozenset[str]) -> float:
    """Share of ``words`` that ``other`` lacks (0 for no words: nothing new)."""
    return len(words - other) / len(words) if words else 0.0


def information_words(tokens: Sequence[str], stopwords: Iterable[str]) -> frozenset[str]:
    """The content words of a memory: tokens that are not stopwords.

    The maintained stop-word lists hold the Chinese particles and pronouns (了, 我, 的); a single
    Han character outside them carries content (辣 "spicy", 住 "live"), so it counts.
    """
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else frozenset(stopwords)
    return frozenset(t for t in tokens if t not in stop)


def is_content_free(words: frozenset[str], matched_query: bool) -> bool:
    """Nothing but acknowledgement and talk about the conversation ("ok thanks", "好的，我记住了。", "I told you
    earlier": ``language.CONTENT_FREE_WORDS``) whatever the query, or at most two content words, none shared with
    the query ("got it")."""
    return words <= CONTENT_FREE_WORDS or (not matched_query and len(words) <= 2)


def _order(choice: Choice) -> tuple[bool, float, tuple[float, ...], str]:
    return (not choice.content_free, choice.score - choice.penalty, choice.tiebreak, choice.key)


def slot_score(choice: Choice) -> float:
    """The score a chosen memory ranks by: that of the slot it holds (the memory it covers), else its own less
    its redundancy penalty, as they were when it was chosen (a memory that competes again gets a new penalty,
    not the slot it left)."""
    if choice.held is not None:
        return choice.held
    return slot_score(choice.covers) if choice.covers is not None else choice.score - choice.penalty


def _rank(choice: Choice) -> tuple[bool, float, tuple[float, ...], str]:
    return (not choice.content_free, slot_score(choice), choice.tiebreak, choice.key)


def select(
    choices: Iterable[Choice],
    limit: int,
    *,
    diversity: float = DIVERSITY,
    near_duplicate: float = NEAR_DUPLICATE_SIMILARITY,
    min_novelty: float = MIN_NOVELTY,
    calibration: SimilarityCalibration = IDENTITY,
    source_first: bool = False,
) -> list[Choice]:
    """The best ``limit`` choices, deduplicated and diversified, best first (``penalty`` set on each).

    Similarities between memories are read on ``calibration``'s scale, so near-duplicates and
    redundancy mean the same for every embedding model and language. ``diversity``, ``near_duplicate`` and
    ``min_novelty`` default to the module's constants (``RankingSettings`` passes its own). With ``source_first``,
    when the best candidate is a derived memory and a source of it that it reproduces less than ``min_novelty`` of
    is still a candidate, the best such source takes that place (``stands_for``; once per derived memory).

    ``penalty`` is what redundancy with the choices before it cost a candidate; ``covers`` names the
    choice whose slot a more informative related one took (the list keeps that slot's rank). The list is
    ordered by :func:`slot_score`: a memory that competes again (the one it was passed over for was
    replaced) takes the place its score earns, displacing the weakest choice when the list is full.
    Deterministic: equal values fall back to ``tiebreak``, then ``key``.
    """
    pool = sorted(choices, key=_order, reverse=True)
    if not pool:
        return []
    top = max((c.score for c in pool), default=0.0) or 1.0
    dims = {c.vector.shape for c in pool if c.vector is not None}
    dim = dims.pop() if len(dims) == 1 else None
    # calibrated similarity to the closest chosen memory, per candidate, kept up to date as choices are made
    vectors = np.stack([c.vector if c.vector is not None and dim else np.zeros(dim or 1) for c in pool])
    groups = np.array([c.group for c in pool])
    rows_of_group = {group: groups == group for group in set(groups.tolist())}
    scores = np.array([c.score for c in pool])
    informative = np.array([not c.content_free for c in pool])
    closest = np.zeros(len(pool))
    alive = list(range(len(pool)))
    chosen: list[Choice] = []
    # candidates passed over, or replaced, because a chosen related memory said all they do, by that
    # memory's key: when a later candidate takes that memory's slot, they compete again once (the newcomer
    # says all the replaced memory did, not necessarily what they did)
    passed_for: dict[str, list[int]] = {}
    index_of = {c.key: i for i, c in enumerate(pool)}
    returned: set[int] = set()

    def take(index: int, slot: float | None = None) -> None:
        pool[index].held = None  # chosen now: its slot is scored as things stand now
        pool[index].held = slot_score(pool[index]) if slot is None else slot
        chosen.append(pool[index])
        absorb(pool[index])
        if len(chosen) > limit:  # a memory that came back outranks the weakest chosen one
            chosen.remove(min(chosen, key=_rank))
            reabsorb()

    def reabsorb() -> None:
        closest[:] = 0.0  # what the memories no longer chosen were close to no longer counts
        for kept in chosen:
            absorb(kept)

    def absorb(candidate: Choice) -> None:
        """``closest`` counts ``candidate`` among the chosen."""
        if dim is not None and candidate.vector is not None:
            similarity = vectors @ candidate.vector
            for group, rows in rows_of_group.items():
                similarity[rows] = calibration.calibrate(similarity[rows], group, candidate.group)
            np.maximum(closest, similarity, out=closest)

    def first_alive() -> int:
        """``max(alive, key=_order)``, the numbers compared as arrays (only exact ties compare in Python)."""
        at = np.array(alive)
        at = at[informative[at]] if informative[at].any() else at
        value = scores[at] - np.array([pool[i].penalty for i in at.tolist()])
        tied = at[value == value.max()].tolist()
        return tied[0] if len(tied) == 1 else max(tied, key=lambda i: _order(pool[i]))

    while alive:
        if chosen and diversity:
            penalties = diversity * top * np.maximum(closest[alive], 0.0) ** 2
            for i, penalty in zip(alive, penalties.tolist(), strict=True):
                pool[i].penalty = penalty
        best = first_alive()
        if len(chosen) >= limit and _order(pool[best]) <= min(_rank(c) for c in chosen):
            break  # full, and nothing left outranks a chosen memory (only one that came back can)
        source = (
            _unreproduced_source(pool[best], [pool[i] for i in alive], chosen, min_novelty) if source_first else None
        )
        if source is not None:  # the turn it derives from, which it does not reproduce, shows in its place
            source.stands_for = pool[best]
            alive.remove(index_of[source.key])
            take(index_of[source.key], slot=pool[best].score - pool[best].penalty)
            continue
        alive.remove(best)
        candidate = pool[best]
        related = [c for c in chosen if c.key in candidate.related or candidate.key in c.related]
        # it takes the slot of a related memory it says all of: by saying more, or, saying as much, by
        # being the verbatim source of that derived paraphrase (the record the user knows, by its id)
        covered = [
            r
            for r in related
            if novelty(r.words, candidate.words) < min_novelty
            and (
                novelty(candidate.words, r.words) >= min_novelty
                or (candidate.key in r.related and len(candidate.words) >= len(r.words))
            )
        ]
        if related and not covered and all(novelty(candidate.words, r.words) < min_novelty for r in related):
            for r in related:  # says nothing that its derived memory or source does not
                passed_for.setdefault(r.key, []).append(best)
            continue
        if not covered and closest[best] >= near_duplicate and candidate.vector is not None:
            continue
        if not covered and candidate.identity and any(candidate.identity == c.identity for c in chosen):
            continue
        if covered:  # says all that the chosen one did (and more, or is its source): takes its slot
            candidate.covers = covered[0]
            candidate.held = slot_score(covered[0])
            for r in covered:
                again = [*passed_for.pop(r.key, []), *([index_of[r.covers.key]] if r.covers is not None else [])]
                for i in again:
                    if i not in returned and i != best:
                        pool[i].held = None  # it competes afresh
                        alive.append(i)
                returned.update(again)
            slot = chosen.index(covered[0])
            chosen[:] = [candidate if i == slot else c for i, c in enumerate(chosen) if i == slot or c not in covered]
            reabsorb()
            continue
        fuller = _fuller_derived(candidate, [pool[i] for i in alive], chosen, min_novelty)
        if fuller is None:
            take(best)
            continue
        # a derived memory that says all it does and more (a summary quoting it) holds its slot instead
        alive.remove(index_of[fuller.key])
        fuller.covers = candidate
        passed_for.setdefault(fuller.key, []).append(best)
        take(index_of[fuller.key])
    return sorted(chosen, key=_rank, reverse=True)


def _unreproduced_source(
    derived: Choice, alive: Sequence[Choice], chosen: Sequence[Choice], min_novelty: float
) -> Choice | None:
    """The best informative source of ``derived`` still a candidate that ``derived`` reproduces less than
    ``min_novelty`` of, when no source of it is chosen yet (the source keeps one place, not one per source)."""
    if not derived.related or any(c.key in derived.related for c in chosen):
        return None
    sources = [
        s
        for s in alive
        if s.key in derived.related
        and s is not derived
        and not s.content_free
        and novelty(s.words, derived.words) >= min_novelty
        and not (s.identity and any(s.identity == c.identity for c in chosen))
    ]
    return max(sources, key=_order, default=None)


def _fuller_derived(
    source: Choice, alive: Sequence[Choice], chosen: Sequence[Choice], min_novelty: float
) -> Choice | None:
    """The best memory derived from ``source`` that says all it does and more, and repeats nothing chosen."""
    fuller = [
        d
        for d in alive
        if source.key in d.related
        and novelty(source.words, d.words) < min_novelty <= novelty(d.words, source.words)
        and not any(c.key in d.related or d.key in c.related for c in chosen)
        and not (d.identity and any(d.identity == c.identity for c in chosen))
    ]
    return max(fuller, key=_order, default=None)
