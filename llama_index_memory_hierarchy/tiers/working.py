"""Working memory: a small, short-lived, in-process context of what matters right now.

Bounded three ways, like human working memory: a capacity in items, a budget in
tokens (counted with a real tokenizer) and a time to live. When full, the item with
the lowest priority (importance decayed by age, boosted by use; pinned items last)
is evicted and handed to ``on_evict`` so the hierarchy can consolidate it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.text import count_tokens, keyword_tokens
from llama_index_memory_hierarchy.tiers.base import MemoryTier
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryItem, MemoryType, matches, utcnow, validate_metadata

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.embeddings import EmbeddingService
    from llama_index_memory_hierarchy.runtime import Runtime

EvictionHandler = Callable[[list[MemoryItem]], Awaitable[None]]
RemovalHandler = Callable[[str], Awaitable[bool]]


@dataclass
class _Slot:
    item: MemoryItem
    tokens: int
    terms: frozenset[str]
    vector: np.ndarray | None


class WorkingMemory(MemoryTier):
    """Short-lived context with capacity, token budget, TTL and priority eviction."""

    memory_type = MemoryType.WORKING

    def __init__(
        self,
        *,
        user_id: str,
        session_id: str | None,
        runtime: Runtime,
        config: MemoryConfig | None = None,
        embeddings: EmbeddingService | None = None,
        on_evict: EvictionHandler | None = None,
        on_remove: RemovalHandler | None = None,
    ) -> None:
        super().__init__(user_id=user_id, session_id=session_id, runtime=runtime)
        self.config = config or MemoryConfig()
        self._embeddings = embeddings
        self._on_evict = on_evict
        self._on_remove = on_remove
        self._slots: dict[str, _Slot] = {}
        self._tokens = 0
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ priority and bounds
    def priority(self, item: MemoryItem, now: datetime | None = None) -> float:
        """Importance decayed by age, boosted by accesses; pinned items rank above all."""
        if item.pinned:
            return math.inf
        now = now or utcnow()
        moment = max(item.timestamp, item.last_accessed) if item.last_accessed else item.timestamp
        age = max((now - moment).total_seconds(), 0.0)
        decay = math.pow(0.5, age / self.config.working_decay_half_life_seconds)
        return item.importance * decay + 0.05 * math.log1p(item.access_count)

    def _expired(self, item: MemoryItem, now: datetime) -> bool:
        return not item.pinned and now - item.created_at > timedelta(seconds=self.config.working_ttl_seconds)

    def _drop(self, memory_id: str) -> _Slot | None:
        slot = self._slots.pop(memory_id, None)
        if slot is not None:
            self._tokens -= slot.tokens
        return slot

    def _purge_expired(self) -> None:
        now = utcnow()
        for memory_id in [i for i, s in self._slots.items() if self._expired(s.item, now)]:
            self._drop(memory_id)

    def _evict_overflow(self, keep: set[str]) -> list[MemoryItem]:
        """Evict lowest-priority items until within capacity and token budget."""
        evicted: list[MemoryItem] = []
        now = utcnow()
        while len(self._slots) > self.config.working_capacity or self._tokens > self.config.working_token_budget:
            candidates = [s for i, s in self._slots.items() if i not in keep]
            if not candidates:
                break
            victim = min(candidates, key=lambda s: (self.priority(s.item, now), s.item.created_at))
            self._drop(victim.item.id)
            evicted.append(victim.item)
        return evicted

    # ------------------------------------------------------------------ writes
    async def aadd(
        self,
        item_or_text: MemoryItem | str,
        *,
        timestamp: Any = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
        dedupe: bool = False,
        embedding: np.ndarray | None = None,
    ) -> str:
        """Hold one item; ``embedding`` reuses a vector the caller already computed."""
        item = self.make_item(
            item_or_text, timestamp=timestamp, importance=importance, metadata=metadata, session_id=session_id
        )
        vectors = None if embedding is None else [embedding]
        return (await self._aadd_items([item], dedupe=dedupe, vectors=vectors))[0]

    async def aadd_many(self, items: Sequence[MemoryItem | str], *, dedupe: bool = False) -> list[str]:
        return await self._aadd_items(self.make_items(items), dedupe=dedupe)

    async def _aadd_items(
        self, items: list[MemoryItem], *, dedupe: bool, vectors: Sequence[np.ndarray] | None = None
    ) -> list[str]:
        tokens = [count_tokens(item.content) for item in items]
        for count in tokens:
            if count > self.config.working_token_budget:
                raise MemoryValidationError(
                    "content", f"{count} tokens exceed the working memory budget of {self.config.working_token_budget}"
                )
        if vectors is None and self._embeddings is not None:
            vectors = list(await self._embeddings.aembed_texts([item.content for item in items]))
        ids: list[str] = []
        with self._lock:
            self._purge_expired()
            for position, (item, count) in enumerate(zip(items, tokens, strict=True)):
                existing = self._find_duplicate(item) if dedupe else None
                if existing is not None:
                    ids.append(existing)
                    continue
                self._drop(item.id)
                vector = None if vectors is None else np.asarray(vectors[position], dtype=np.float32)
                self._slots[item.id] = _Slot(item, count, frozenset(keyword_tokens(item.content)), vector)
                self._tokens += count
                ids.append(item.id)
            evicted = self._evict_overflow(keep={ids[-1]} if ids else set())
        if evicted and self._on_evict is not None:
            await self._on_evict(evicted)
        return ids

    def _find_duplicate(self, item: MemoryItem) -> str | None:
        for slot in self._slots.values():
            if slot.item.content == item.content and slot.item.session_id == item.session_id:
                return slot.item.id
        return None

    async def aupdate(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        memory_id = self.check_id(memory_id)
        with self._lock:
            slot = self._slots.get(memory_id)
            if slot is None:
                return False
            changes: dict[str, Any] = {}
            if content is not None:
                changes["content"] = content
            if importance is not None:
                changes["importance"] = importance
            if metadata is not None:
                changes["metadata"] = {**slot.item.metadata, **validate_metadata(metadata)}
            updated = MemoryItem.create(**{**slot.item.model_dump(), **changes})
        vector = slot.vector
        if content is not None and self._embeddings is not None:
            vector = (await self._embeddings.aembed_texts([updated.content]))[0]
        with self._lock:
            if self._drop(memory_id) is None:
                return False
            count = count_tokens(updated.content)
            self._slots[memory_id] = _Slot(updated, count, frozenset(keyword_tokens(updated.content)), vector)
            self._tokens += count
            evicted = self._evict_overflow(keep={memory_id})
        if evicted and self._on_evict is not None:
            await self._on_evict(evicted)
        return True

    async def aremove(self, memory_id: str) -> bool:
        """Delete an item. In a hierarchy (``on_remove``) this is the deletion path: the memory goes
        from every tier (a put turn's episodic copy shares its id) and from what was derived from it."""
        memory_id = self.check_id(memory_id)
        if self._on_remove is not None:
            return await self._on_remove(memory_id)
        return bool(self.discard([memory_id]))

    def held(self, ids: Iterable[str]) -> list[str]:
        """Which of these ids this working memory holds."""
        with self._lock:
            return [i for i in ids if i in self._slots]

    def discard(self, ids: Iterable[str]) -> list[str]:
        """Drop these items from working memory only (the deletion path and forgetting use it); the ids dropped."""
        with self._lock:
            return [i for i in ids if self._drop(i) is not None]

    async def aclear(self) -> int:
        with self._lock:
            count = len(self._slots)
            self._slots.clear()
            self._tokens = 0
            return count

    async def apin(self, memory_id: str, pinned: bool = True) -> bool:
        """Pin an item so that it is never evicted, expired or forgotten."""
        memory_id = self.check_id(memory_id)
        with self._lock:
            slot = self._slots.get(memory_id)
            if slot is None:
                return False
            slot.item = slot.item.model_copy(update={"pinned": pinned})
            return True

    # ------------------------------------------------------------------ reads
    async def aget(self, memory_id: str) -> MemoryItem | None:
        memory_id = self.check_id(memory_id)
        with self._lock:
            self._purge_expired()
            slot = self._slots.get(memory_id)
            return None if slot is None else slot.item

    def entries(self, flt: MemoryFilter | None = None) -> list[tuple[MemoryItem, np.ndarray | None]]:
        """Live items passing ``flt`` with their vectors (what the cross-tier search scores)."""
        with self._lock:
            self._purge_expired()
            return [(s.item, s.vector) for s in self._slots.values() if flt is None or matches(s.item, flt)]

    def touch(self, ids: Sequence[str]) -> None:
        """Count a recall of these items (the search calls it): what was recalled lately stays (:meth:`priority`)."""
        now = utcnow()
        with self._lock:
            for memory_id in ids:
                slot = self._slots.get(memory_id)
                if slot is not None:
                    slot.item = slot.item.model_copy(
                        update={"access_count": slot.item.access_count + 1, "last_accessed": now}
                    )

    def get_recent(self, n: int = 5) -> list[MemoryItem]:
        """The ``n`` most recent items, newest first."""
        with self._lock:
            self._purge_expired()
            return sorted((s.item for s in self._slots.values()), key=lambda i: i.timestamp, reverse=True)[:n]

    def get_important(self, n: int = 5) -> list[MemoryItem]:
        """The ``n`` items of highest priority."""
        with self._lock:
            self._purge_expired()
            now = utcnow()
            return sorted((s.item for s in self._slots.values()), key=lambda i: self.priority(i, now), reverse=True)[:n]

    def get_context_summary(self, max_chars: int = 1000) -> str:
        """A compact text of the highest-priority items, within ``max_chars``."""
        lines: list[str] = []
        used = 0
        for item in self.get_important(len(self._slots)):
            line = f"- {item.content}"
            if used + len(line) + 1 > max_chars:
                if not lines:
                    lines.append(line[: max(max_chars - 1, 0)] + "…")
                break
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines)

    @property
    def token_count(self) -> int:
        """Tokens currently held."""
        return self._tokens

    async def aget_stats(self) -> dict[str, Any]:
        with self._lock:
            self._purge_expired()
            return {
                "count": len(self._slots),
                "tokens": self._tokens,
                "capacity": self.config.working_capacity,
                "token_budget": self.config.working_token_budget,
                "pinned": sum(1 for s in self._slots.values() if s.item.pinned),
            }
