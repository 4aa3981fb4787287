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
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.ranking.fusion import score_items
from llama_index_memory_hierarchy.ranking.pipeline import (
    DEFAULT_RECIPE,
    Candidate,
    format_turn,
    keyword_document,
    keyword_terms,
    rank_candidates,
)
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, Record
from llama_index_memory_hierarchy.text import keyword_tokens
from llama_index_memory_hierarchy.tiers.base import MemoryTier
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    MemoryType,
    as_utc,
    matches,
    utcnow,
    validate_content,
    validate_identifier,
)

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.stores.context import StoreContext

#: Previous turns of the same session indexed with each turn's keyword text.
_CONTEXT_TURNS = DEFAULT_RECIPE.context_before


def speaker_of(item: MemoryItem) -> str | None:
    """Who said it: ``speaker`` metadata, else the chat role."""
    speaker = item.metadata.get("speaker") or item.metadata.get("role")
    return speaker if isinstance(speaker, str) else None


class StoredTier(MemoryTier):
    """A tier whose memories live in the shared record store and vector index.

    Holds everything episodic, semantic and perceptual memory share: durable writes,
    hybrid retrieval, updates, removal and forgetting, all scoped to one user.
    """

    def __init__(self, *, user_id: str, session_id: str | None, context: StoreContext) -> None:
        super().__init__(user_id=user_id, session_id=session_id, runtime=context.runtime)
        self.context = context
        self.config = context.config

    # ------------------------------------------------------------------ writes
    async def aadd(
        self,
        item_or_text: MemoryItem | str,
        *,
        timestamp: datetime | str | float | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
        dedupe: bool = False,
    ) -> str:
        item = self.make_item(
            item_or_text, timestamp=timestamp, importance=importance, metadata=metadata, session_id=session_id
        )
        return (await self.aadd_items([item], dedupe=dedupe))[0]

    async def aadd_many(self, items: Sequence[MemoryItem | str], *, dedupe: bool = False) -> list[str]:
        return await self.aadd_items(self.make_items(items), dedupe=dedupe)

    async def aadd_items(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[np.ndarray] | None = None, dedupe: bool = False
    ) -> list[str]:
        """Store validated items (one transaction); reuse ``embeddings`` when the caller has them."""
        return await self.context.awrite(await self.abuild_records(items, embeddings=embeddings), dedupe=dedupe)

    async def abuild_records(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[np.ndarray] | None = None
    ) -> list[Record]:
        """Records ready to write: embedded, with their keyword-index text.

        Episodic turns are indexed the way ``docs/benchmarks.md`` measured best: the dense
        vector embeds ``"speaker: text"``; the keyword text adds the date and the two
        previous turns of the same session (pronouns and follow-ups find their topic).
        """
        if not items:
            return []
        if self.memory_type is not MemoryType.EPISODIC:
            space = await self.context.aspace() if embeddings is not None else None
            return [
                Record(item=item, embedding=None if embeddings is None else embeddings[i], space=space)
                for i, item in enumerate(items)
            ]
        turns = [format_turn(item.content, speaker_of(item)) for item in items]
        if embeddings is None:
            embeddings = list(await self.context.embeddings.aembed_texts(turns))
        space = await self.context.aspace()
        history = await self._arecent_turns({item.session_id for item in items if item.session_id})
        records = []
        for item, turn, vector in zip(items, turns, embeddings, strict=True):
            before = history.setdefault(item.session_id, []) if item.session_id else []
            document = keyword_document(
                item.content, speaker=speaker_of(item), when=item.timestamp, previous=before[-_CONTEXT_TURNS:]
            )
            records.append(Record(item=item, embedding=vector, space=space, keyword=document))
            if item.session_id:
                before.append(turn)
        return records

    async def _arecent_turns(self, sessions: set[str | None]) -> dict[str | None, list[str]]:
        """The latest turns of each session already stored, oldest first, formatted."""
        recent: dict[str | None, list[str]] = {}
        for session in sessions:
            items = await self.aquery(order_by="-timestamp", limit=_CONTEXT_TURNS, session_id=session)
            recent[session] = [format_turn(i.content, speaker_of(i)) for i in reversed(items)]
        return recent

    async def aupdate(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        memory_id = self.check_id(memory_id)
        current = await self.aget(memory_id)
        if current is None:
            return False
        changed = MemoryItem.create(
            **{
                **current.model_dump(),
                **({"content": content} if content is not None else {}),
                **({"importance": importance} if importance is not None else {}),
                **({"metadata": {**current.metadata, **metadata}} if metadata is not None else {}),
            }
        )
        embedding = space = None
        if content is not None:
            embedding = (await self.context.embeddings.aembed_texts([changed.content]))[0]
            space = await self.context.aspace()
        record = await self.context.records.update(
            self.user_id,
            memory_id,
            content=changed.content if content is not None else None,
            importance=changed.importance if importance is not None else None,
            metadata=changed.metadata if metadata is not None else None,
            embedding=embedding,
            space=space,
        )
        await self.context.drain_outbox()
        return record is not None

    async def apin(self, memory_id: str, pinned: bool = True) -> bool:
        """Pin a memory so that forgetting never removes it."""
        record = await self.context.records.update(self.user_id, self.check_id(memory_id), pinned=pinned)
        return record is not None

    async def aremove(self, memory_id: str) -> bool:
        """Delete a memory of this tier through the deletion path (:mod:`..lifecycle.deletion`)."""
        return memory_id in await self._adelete([self.check_id(memory_id)])

    async def aclear(self) -> int:
        return len(await self._adelete([item.id for item in await self.aquery()]))

    async def _adelete(self, ids: Sequence[str]) -> list[str]:
        """Delete memories of this tier, with their copies and what was derived from them; the ids deleted."""
        from llama_index_memory_hierarchy.lifecycle.deletion import adelete_memories

        report = await adelete_memories(self.context, self.user_id, ids, memory_type=self.memory_type, tier=self)
        return list(report.deleted)

    async def _adelete_records(self, ids: Sequence[str]) -> tuple[list[str], int]:
        """This tier's part of a deletion (the deletion path calls it): the records, their vectors and
        keyword entries, and the facts that only they supported; ``(ids deleted, facts deleted)``."""
        deleted = await self.context.adelete(self.user_id, ids)
        return deleted, await self._aforget_sources(deleted)

    async def _aforget_sources(self, ids: Sequence[str]) -> int:
        """Semantic facts cite their sources: drop those that no remaining memory supports."""
        if not ids or self.memory_type is MemoryType.SEMANTIC:
            return 0
        from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory

        semantic = SemanticMemory(user_id=self.user_id, session_id=self.session_id, context=self.context)
        return await semantic.aremove_sources(ids)

    # ------------------------------------------------------------------ reads
    async def aget(self, memory_id: str) -> MemoryItem | None:
        memory_id = self.check_id(memory_id)
        records = await self.context.records.get(self.user_id, [memory_id])
        if not records or records[0].item.memory_type != self.memory_type:
            return None
        return records[0].item

    async def aget_many(self, ids: Sequence[str]) -> list[MemoryItem]:
        """Items of this tier with these ids, in order (absent ids skipped)."""
        records = await self.context.records.get(self.user_id, [self.check_id(i) for i in ids])
        return [r.item for r in records if r.item.memory_type == self.memory_type]

    async def aretrieve(self, query: str, limit: int = 5, **filters: Any) -> list[MemoryItem]:
        query = validate_content(query, "query")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MemoryValidationError("limit", f"must be a positive integer, got {limit!r}")
        flt = MemoryFilter.from_kwargs(**filters)
        relevance, found = await self._arank_records(query, flt, limit)
        ranked = score_items(
            [record.item for record in found.values()],
            relevance,
            now=utcnow(),
            relevance_weight=self.config.relevance_weight,
            recency_weight=self.config.recency_weight,
            importance_weight=self.config.importance_weight,
            half_life_hours=self.config.recency_half_life_hours,
        )[:limit]
        if ranked:
            self.context.spawn(self.context.records.touch(self.user_id, [item.id for item in ranked]))
        return ranked

    async def arank(self, query: str, flt: MemoryFilter, limit: int) -> dict[str, float]:
        """Relevance of candidate ids for ``query`` (see :meth:`_arank_records`)."""
        return (await self._arank_records(query, flt, limit))[0]

    async def _arank_records(
        self, query: str, flt: MemoryFilter, limit: int
    ) -> tuple[dict[str, float], dict[str, Record]]:
        """Hybrid relevance and the candidate records, filtered.

        Dense and keyword candidates are pooled; every candidate gets its exact cosine from
        its stored vector (so none loses a signal for missing one index's cut), scores are
        fused after normalisation, then boosted by the query's named people and times
        (``ranking.pipeline.rank_candidates``).
        """
        candidates = max(limit * self.config.candidate_multiplier, DEFAULT_RECIPE.candidates)
        vector = await self.context.embeddings.aembed_query(query)
        dense, keyword = await asyncio.gather(
            self.context.adense_search(
                self.user_id, vector, memory_type=self.memory_type, filters=flt, limit=candidates
            ),
            self.context.records.keyword_search(
                self.user_id,
                " ".join(keyword_terms(query)),
                memory_type=self.memory_type,
                filters=flt,
                limit=candidates,
            ),
        )
        pool = list(dict.fromkeys([i for i, _ in dense] + [i for i, _ in keyword]))
        records = await self.context.records.get(self.user_id, pool, with_embeddings=True)
        found = {r.item.id: r for r in records if r.item.memory_type == self.memory_type and matches(r.item, flt)}
        cosine = dict(dense)
        for memory_id, record in found.items():
            if memory_id not in cosine and record.embedding is not None and record.embedding.shape == vector.shape:
                cosine[memory_id] = float(np.dot(vector, record.embedding))
        ranked = rank_candidates(
            query,
            {i: s for i, s in keyword if i in found},
            {i: s for i, s in cosine.items() if i in found},
            {i: Candidate(i, r.item.content, speaker_of(r.item), r.item.timestamp) for i, r in found.items()},
            now=utcnow(),
        )
        return dict(ranked), found

    async def aquery(
        self,
        *,
        order_by: str = "timestamp",
        limit: int | None = None,
        **filters: Any,
    ) -> list[MemoryItem]:
        """Items of this tier by filters, ordered (no relevance ranking)."""
        records = await self.context.records.query(
            self.user_id,
            namespace=MEMORY_NAMESPACE,
            memory_type=self.memory_type,
            filters=MemoryFilter.from_kwargs(**filters),
            order_by=order_by,  # type: ignore[arg-type]
            limit=limit,
        )
        return [r.item for r in records]

    async def aget_stats(self) -> dict[str, Any]:
        count = await self.context.records.count(self.user_id, memory_type=self.memory_type)
        first = await self.aquery(limit=1)
        last = await self.aquery(order_by="-timestamp", limit=1)
        return {
            "count": count,
            "first_timestamp": first[0].timestamp.isoformat() if first else None,
            "last_timestamp": last[0].timestamp.isoformat() if last else None,
        }

    # ------------------------------------------------------------------ forgetting
    async def aforget(self, strategy: str = "importance_based", *, dry_run: bool = False, **kwargs: Any) -> int:
        """Forget this user's unpinned memories of this tier.

        ``importance_based``: importance < ``threshold`` (0.3). ``time_based``: event older
        than ``older_than`` seconds (30 days) or ``before`` a datetime. ``capacity_based``:
        keep the ``keep`` (1000) highest by importance then recency. ``decay``: importance
        times recency (half-life ``half_life_hours``) < ``threshold`` (0.05).
        """
        self.check_strategy(strategy)
        items = [i for i in await self.aquery() if not i.pinned]
        now = utcnow()
        if strategy == "importance_based":
            threshold = float(kwargs.get("threshold", 0.3))
            doomed = [i for i in items if i.importance < threshold]
        elif strategy == "time_based":
            before = kwargs.get("before")
            cutoff = as_utc(before, "before") if before is not None else None
            older_than = float(kwargs.get("older_than", 30 * 86400))
            doomed = [
                i
                for i in items
                if (i.timestamp < cutoff if cutoff else (now - i.timestamp).total_seconds() > older_than)
            ]
        elif strategy == "capacity_based":
            keep = int(kwargs.get("keep", 1000))
            pinned = await self.context.records.count(self.user_id, memory_type=self.memory_type) - len(items)
            ranked = sorted(items, key=lambda i: (i.importance, i.timestamp), reverse=True)
            doomed = ranked[max(keep - pinned, 0) :]
        else:
            from llama_index_memory_hierarchy.ranking.fusion import recency

            half_life = float(kwargs.get("half_life_hours", self.config.recency_half_life_hours))
            threshold = float(kwargs.get("threshold", 0.05))
            doomed = [i for i in items if i.importance * recency(i.timestamp, now, half_life) < threshold]
        if not dry_run and doomed:
            await self._adelete([i.id for i in doomed])
        return len(doomed)


class EpisodicMemory(StoredTier):
    """What happened, when: turns and events, time-ordered, per user and session."""

    memory_type = MemoryType.EPISODIC

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
        return self._run(self.aget_timeline(start, end, session_id, limit))

    async def aget_session(self, session_id: str | None = None) -> list[MemoryItem]:
        """Every event of one session (default: the current one), oldest first."""
        session = validate_identifier(session_id or self.session_id, "session_id")
        return await self.aquery(session_id=session)

    def get_session(self, session_id: str | None = None) -> list[MemoryItem]:
        """Sync twin of :meth:`aget_session`."""
        return self._run(self.aget_session(session_id))

    async def afind_patterns(self, top_n: int = 10, min_sessions: int = 2) -> dict[str, Any]:
        """Recurring topics and times, computed from this user's events.

        Topics are keywords used in at least ``min_sessions`` sessions, ranked by how
        many sessions mention them; times are histograms of event hours and weekdays.
        """
        items = await self.aquery()
        sessions_by_term: dict[str, set[str]] = {}
        counts: Counter[str] = Counter()
        for item in items:
            terms = {t for t in keyword_tokens(item.content) if len(t) > 2 and t not in _STOPWORDS}
            for term in terms:
                sessions_by_term.setdefault(term, set()).add(item.session_id or "")
                counts[term] += 1
        topics = sorted(
            (t for t, s in sessions_by_term.items() if len(s) >= min_sessions),
            key=lambda t: (len(sessions_by_term[t]), counts[t]),
            reverse=True,
        )[:top_n]
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
        return self._run(self.afind_patterns(top_n, min_sessions))


_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "any",
        "can",
        "had",
        "her",
        "was",
        "one",
        "our",
        "out",
        "day",
        "get",
        "has",
        "him",
        "his",
        "how",
        "man",
        "new",
        "now",
        "old",
        "see",
        "two",
        "way",
        "who",
        "boy",
        "did",
        "its",
        "let",
        "put",
        "say",
        "she",
        "too",
        "use",
        "that",
        "with",
        "have",
        "this",
        "will",
        "your",
        "from",
        "they",
        "know",
        "want",
        "been",
        "good",
        "much",
        "some",
        "time",
        "very",
        "when",
        "come",
        "here",
        "just",
        "like",
        "long",
        "make",
        "many",
        "over",
        "such",
        "take",
        "than",
        "them",
        "well",
        "were",
        "what",
        "which",
        "would",
        "there",
        "their",
        "about",
        "could",
        "other",
        "into",
        "more",
        "these",
        "also",
        "should",
        "because",
        "does",
        "really",
        "think",
        "yeah",
    ]
)
