"""Episodic memory: every turn and event, time-ordered, durable, per user and session.

The record store is the source of truth; the vector index and the keyword index are
derived from it. Retrieval is hybrid: dense and keyword rankings fused by reciprocal
rank, then mixed with recency and importance (Generative Agents). Retrieval counts as
an access: ``access_count`` and ``last_accessed`` are bumped in the background.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from llama_index_memory_hierarchy.extraction import noun_words
from llama_index_memory_hierarchy.language import HAN_CHAR, content_word
from llama_index_memory_hierarchy.ranking.pipeline import DEFAULT_RECIPE
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.text import keyword_tokens
from llama_index_memory_hierarchy.tiers.stored import StoredTier
from llama_index_memory_hierarchy.turns import format_turn, in_conversation, keyword_document, speaker_of
from llama_index_memory_hierarchy.types import INDEXED_CHARS, MemoryItem, MemoryType, validate_identifier

#: Previous turns of the same session indexed with each turn's keyword text.
_CONTEXT_TURNS = DEFAULT_RECIPE.context_before
#: The resolution of event times (``datetime``'s): a bound this far from a time is strictly before or after it.
_TICK = timedelta(microseconds=1)


def keyword_documents(items: Sequence[MemoryItem], previous: Sequence[str] = ()) -> list[str]:
    """The keyword-index text of each memory of one session, oldest first, as the tier writes it.

    Turns are indexed the way ``docs/benchmarks.md`` measured best: the date, the two previous
    turns of the session (``previous``: those stored before ``items``, formatted), then the turn, so
    that pronouns and follow-ups find their topic. A derived memory (a session summary) is no turn:
    it gets no context and is no turn's context. Without a session a turn has no neighbours.
    """
    before = list(previous)
    documents = []
    for item in items:
        turn = bool(item.session_id) and in_conversation(item)
        speaker = speaker_of(item)
        context = before[-_CONTEXT_TURNS:] if turn else []
        text = item.content[:INDEXED_CHARS]  # a long chat turn is indexed by its head
        documents.append(keyword_document(text, speaker=speaker, when=item.timestamp, previous=context))
        if turn:
            before.append(format_turn(item.content, speaker))
    return documents


def embedded_turn(item: MemoryItem) -> str:
    """What an episodic memory is embedded as: ``"speaker: text"`` (``docs/benchmarks.md``: the speaker
    disambiguates), of the first :data:`INDEXED_CHARS` of a long turn. Writes, edits and ``lmh reindex`` (moving a
    store to another model) all embed this."""
    return format_turn(item.content[:INDEXED_CHARS], speaker_of(item))


#: Texts of each candidate topic the part-of-speech tagger reads (``find_patterns``).
_POS_EXAMPLES = 3


class EpisodicMemory(StoredTier):
    """What happened, when: turns and events, time-ordered, per user and session."""

    memory_type = MemoryType.EPISODIC

    def embedded_text(self, item: MemoryItem) -> str:
        """See :func:`embedded_turn`."""
        return embedded_turn(item)

    async def abuild_records(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[np.ndarray] | None = None
    ) -> list[Record]:
        """Records ready to write: embedded, with their keyword-index text (:func:`keyword_documents`)."""
        if not items:
            return []
        if embeddings is None:
            embeddings = list(await self.context.embeddings.aembed_texts([self.embedded_text(i) for i in items]))
        space = await self.context.aspace()
        history = await self._arecent_turns({item.session_id for item in items if item.session_id})
        by_session: dict[str | None, list[int]] = {}
        for n, item in enumerate(items):
            by_session.setdefault(item.session_id, []).append(n)
        documents: dict[int, str] = {}
        for session, batch in by_session.items():
            texts = keyword_documents([items[n] for n in batch], previous=history.get(session, ()))
            documents.update(zip(batch, texts, strict=True))
        return [
            Record(item=item, embedding=vector, space=space, keyword=documents[n])
            for n, (item, vector) in enumerate(zip(items, embeddings, strict=True))
        ]

    async def _arecent_turns(self, sessions: set[str | None]) -> dict[str | None, list[str]]:
        """The latest turns of each session already stored (derived memories skipped), oldest first, formatted."""
        recent: dict[str | None, list[str]] = {}
        for session in sessions:
            latest = await self._anearest_turns(session, descending=True)
            recent[session] = [format_turn(i.content, speaker_of(i)) for i in reversed(latest) if in_conversation(i)]
        return recent

    async def _anearest_turns(
        self, session: str | None, *, descending: bool = False, **bounds: Any
    ) -> list[MemoryItem]:
        """The :data:`_CONTEXT_TURNS` turns of ``session`` within ``bounds`` (``start_time``, ``end_time``) nearest to
        their start (or, ``descending``, their end), nearest first, with the derived memories between them."""
        window = _CONTEXT_TURNS
        while True:  # summaries interleave with turns: widen the window until it holds enough turns
            items = await self.aquery(
                order_by="-timestamp" if descending else "timestamp", limit=window, session_id=session, **bounds
            )
            if sum(in_conversation(i) for i in items) >= _CONTEXT_TURNS or len(items) < window:
                break
            window *= 4
        nearest, turns = [], 0
        for item in items:
            if turns == _CONTEXT_TURNS:
                break
            nearest.append(item)
            turns += in_conversation(item)
        return nearest

    async def _aremove_records(self, ids: Sequence[str]) -> list[str]:
        """Delete turns; first, the turns that held them as keyword context are re-indexed without them.

        Why first: once a delete has returned, no word of the deleted turn finds its neighbours.
        """
        doomed = [item for item in await self.aget_many(ids) if in_conversation(item)]
        for session in {item.session_id for item in doomed if item.session_id}:
            changed = [item for item in doomed if item.session_id == session]
            neighbourhood = await self._aneighbourhood(session, changed)
            await self._arewrite_context(neighbourhood, gone=frozenset(item.id for item in changed))
        return await super()._aremove_records(ids)

    async def _aafter_edit(self, item: MemoryItem) -> None:
        """An edited turn is re-indexed with its context, and so are the turns that hold it as theirs."""
        if item.session_id:
            neighbourhood = await self._aneighbourhood(item.session_id, [item])
            await self._arewrite_context(neighbourhood, edited=frozenset({item.id}))

    async def _aneighbourhood(self, session: str, changed: Sequence[MemoryItem]) -> list[MemoryItem]:
        """The memories of ``session`` whose keyword text can hold ``changed`` turns, with the context they are
        indexed with, oldest first: every memory from the first changed turn to the last (ties in time included)
        and the :data:`_CONTEXT_TURNS` turns on either side. Bounded by the change's span, not the session's."""
        first = min(item.timestamp for item in changed)
        last = max(item.timestamp for item in changed)
        middle = await self.aquery(session_id=session, start_time=first, end_time=last)
        before = await self._anearest_turns(session, descending=True, end_time=first - _TICK)
        after = await self._anearest_turns(session, start_time=last + _TICK)
        return [*reversed(before), *middle, *after]

    async def _arewrite_context(
        self, session: list[MemoryItem], *, edited: frozenset[str] = frozenset(), gone: frozenset[str] = frozenset()
    ) -> None:
        """Rewrite the keyword text of the memories in ``session`` (consecutive memories of one session, oldest
        first, as stored now) that are ``edited`` or hold an ``edited`` or ``gone`` turn in their context, as if
        ``gone`` were deleted; the first :data:`_CONTEXT_TURNS` turns are context only."""
        changed = edited | gone
        stale: set[str] = set(edited)
        window: list[str] = []
        for item in session:
            if not in_conversation(item):
                continue
            if changed.intersection(window[-_CONTEXT_TURNS:]):
                stale.add(item.id)
            window.append(item.id)
        kept = [item for item in session if item.id not in gone]
        texts = dict(zip((item.id for item in kept), keyword_documents(kept), strict=True))
        if stale := stale - gone:
            await self.context.records.set_keywords(self.user_id, {memory_id: texts[memory_id] for memory_id in stale})

    async def aget_timeline(
        self,
        start: datetime | str | float | None = None,
        end: datetime | str | float | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        """Events between ``start`` and ``end`` (inclusive), oldest first."""
        return await self.aquery(start_time=start, end_time=end, session_id=session_id, limit=limit)

    def get_timeline(
        self,
        start: datetime | str | float | None = None,
        end: datetime | str | float | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        """Sync twin of :meth:`aget_timeline`."""
        return self.blocking(self.aget_timeline(start, end, session_id, limit))

    async def aget_session(self, session_id: str | None = None) -> list[MemoryItem]:
        """Every event of one session (default: the current one), oldest first."""
        session = validate_identifier(session_id or self.session_id, "session_id")
        return await self.aquery(session_id=session)

    def get_session(self, session_id: str | None = None) -> list[MemoryItem]:
        """Sync twin of :meth:`aget_session`."""
        return self.blocking(self.aget_session(session_id))

    async def afind_patterns(self, top_n: int = 10, min_sessions: int = 2) -> dict[str, Any]:
        """Recurring topics and times, computed from this user's events.

        Topics are keywords used in at least ``min_sessions`` sessions, ranked by how
        many sessions mention them; times are histograms of event hours and weekdays.
        A topic is a noun (spaCy for English, jieba for Chinese; without spaCy, any word) and a content
        word (:func:`~.language.content_word`: no stop word, small talk or time word): "went", "again",
        "then", "today" and "lol" recur in every conversation and say nothing.
        """
        items = await self.aquery()
        sessions_by_term: dict[str, set[str]] = {}
        counts: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}  # a few texts each term is used in, to tell its part of speech
        for item in items:
            for term in {
                t
                for t in keyword_tokens(item.content)
                if (len(t) > 2 or (len(t) > 1 and HAN_CHAR.match(t))) and content_word(t)
            }:
                sessions_by_term.setdefault(term, set()).add(item.session_id or "")
                counts[term] += 1
                if len(shown := examples.setdefault(term, [])) < _POS_EXAMPLES:
                    shown.append(item.content)
        candidates = sorted(
            (t for t, s in sessions_by_term.items() if len(s) >= min_sessions),
            key=lambda t: (len(sessions_by_term[t]), counts[t]),
            reverse=True,
        )
        topics: list[str] = []
        step = 4 * top_n  # the best candidates first: the tagger reads a few texts of each, not every event
        for begin in range(0, len(candidates), step):
            chunk = candidates[begin : begin + step]
            nouns = await asyncio.to_thread(noun_words, sorted({text for t in chunk for text in examples[t]}))
            topics += [t for t in chunk if nouns is None or t in nouns]
            if len(topics) >= top_n:
                break
        topics = topics[:top_n]
        hours = Counter(item.timestamp.hour for item in items)
        weekdays = Counter(item.timestamp.strftime("%A") for item in items)
        return {
            "events": len(items),
            "sessions": len({item.session_id for item in items}),
            "recurring_topics": [
                {"topic": t, "sessions": len(sessions_by_term[t]), "mentions": counts[t]} for t in topics
            ],
            "active_hours": dict(sorted(hours.items())),
            "active_weekdays": dict(weekdays.most_common()),
        }

    def find_patterns(self, top_n: int = 10, min_sessions: int = 2) -> dict[str, Any]:
        """Sync twin of :meth:`afind_patterns`."""
        return self.blocking(self.afind_patterns(top_n, min_sessions))
