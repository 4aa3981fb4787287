"""``MemoryTier``: the one interface every tier implements.

The async methods are the implementation, run on the package runtime (:class:`RuntimeBound`);
the sync twins here only wait for them, so no tier repeats logic between them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar

from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.runtime import Runtime, RuntimeBound
from llama_index_memory_hierarchy.types import (
    MAX_BATCH_ITEMS,
    MemoryItem,
    MemoryType,
    as_utc,
    validate_identifier,
    validate_importance,
    validate_memory_id,
    validate_metadata,
)

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.tiers.retriever import TierRetriever

#: Forgetting strategies every tier accepts (a tier may raise for one it cannot apply).
FORGET_STRATEGIES = ("importance_based", "time_based", "capacity_based", "decay")
#: The cross-tier search restricted to one tier: ``(query, limit, **filters)`` -> the ranked memories
#: (``retrieval.search.CrossTierSearch``; the tier set wires it, see :meth:`MemoryTier.search_through`).
TierSearch = Callable[..., Awaitable[list[MemoryItem]]]
#: The memory's forgetting restricted to one tier: ``(strategy, dry_run, **params)`` -> how many (would) go
#: (``lifecycle.forgetting.Forgetter``; the tier set wires it, see :meth:`MemoryTier.forget_through`).
TierForget = Callable[..., Awaitable[int]]


class MemoryTier(RuntimeBound, ABC):
    """A tier of the hierarchy, scoped to one user (and a current session).

    Its public coroutine methods (``a*``, its subclasses' too) run on the store runtime
    (:class:`RuntimeBound`): stores bind connections to the runtime loop, and callers may
    await from any loop (an agent's, a notebook's) without knowing.
    """

    memory_type: ClassVar[MemoryType]

    def __init__(self, *, user_id: str, session_id: str | None, runtime: Runtime) -> None:
        self.user_id = validate_identifier(user_id, "user_id")
        self.session_id = None if session_id is None else validate_identifier(session_id, "session_id")
        self._runtime = runtime
        self._search: TierSearch | None = None
        self._forget: TierForget | None = None

    def search_through(self, search: TierSearch) -> None:
        """Retrieve through ``search``: the memory's cross-tier search restricted to this tier.

        Why: one scorer ranks every read path, so a tier's ``retrieve`` and the hierarchy's ``search`` give
        the same scores for the same memories; the search lives above the tiers and is handed down.
        """
        self._search = search

    def forget_through(self, forget: TierForget) -> None:
        """Forget through ``forget``: the memory's forgetting restricted to this tier (one implementation, with
        its defaults, validation, report and log, whichever door is used)."""
        self._forget = forget

    @property
    def runtime(self) -> Runtime:
        """The store runtime this tier's coroutines run on."""
        return self._runtime

    # ----------------------------------------------------------------- async core
    @abstractmethod
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
        """Store one memory; return its id."""

    @abstractmethod
    async def aadd_many(self, items: Sequence[MemoryItem | str], *, dedupe: bool = False) -> list[str]:
        """Store many memories with one batched embedding call; return their ids in order."""

    async def aretrieve(self, query: str, limit: int = 5, **filters: Any) -> list[MemoryItem]:
        """Best memories for ``query`` of this tier (``score`` and ``explanation`` set), honouring ``MemoryFilter``
        keys and the search's own (``include_history``, ``ranking``, ``min_score``): the cross-tier search
        restricted to this tier."""
        if self._search is None:
            raise MemoryHierarchyError(
                f"this {self.memory_type.value} tier has no search: retrieve through a tier of a HierarchicalMemory "
                f"(memory.{self.memory_type.value}.retrieve) or memory.search(..., memory_types=[...])"
            )
        return await self._search(query, limit, **filters)

    @abstractmethod
    async def aget(self, memory_id: str) -> MemoryItem | None:
        """The memory with this id, or None (another user's id is absent too)."""

    @abstractmethod
    async def aupdate(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Change a memory; False when absent."""

    @abstractmethod
    async def aremove(self, memory_id: str) -> bool:
        """Delete a memory; False when absent."""

    async def ahas_memory(self, memory_id: str) -> bool:
        """Whether this user has a memory with this id in this tier."""
        return await self.aget(memory_id) is not None

    @abstractmethod
    async def aclear(self) -> int:
        """Delete every memory of this user in this tier; return how many."""

    @abstractmethod
    async def apin(self, memory_id: str, pinned: bool = True) -> bool:
        """Pin (or unpin) a memory so forgetting and eviction never remove it; False when absent."""

    @abstractmethod
    async def aget_stats(self) -> dict[str, Any]:
        """At least ``count`` (this user only)."""

    async def aforget(self, strategy: str = "importance_based", *, dry_run: bool = False, **kwargs: Any) -> int:
        """Forget memories of this tier by ``strategy`` (never pinned ones); return how many (would) go: the
        memory's forgetting (``HierarchicalMemory.forget``, its strategies and parameters) restricted to this tier."""
        if self._forget is None:
            raise MemoryHierarchyError(
                f"this {self.memory_type.value} tier has no forgetting: forget through a tier of a HierarchicalMemory "
                f"(memory.{self.memory_type.value}.forget) or memory.manager.forget(..., memory_types=[...])"
            )
        return await self._forget(strategy, dry_run, **kwargs)

    # ----------------------------------------------------------------- sync twins
    def add(self, item_or_text: MemoryItem | str, **kwargs: Any) -> str:
        """Sync twin of :meth:`aadd`."""
        return self.blocking(self.aadd(item_or_text, **kwargs))

    def add_many(self, items: Sequence[MemoryItem | str], *, dedupe: bool = False) -> list[str]:
        """Sync twin of :meth:`aadd_many`."""
        return self.blocking(self.aadd_many(items, dedupe=dedupe))

    def retrieve(self, query: str, limit: int = 5, **filters: Any) -> list[MemoryItem]:
        """Sync twin of :meth:`aretrieve`."""
        return self.blocking(self.aretrieve(query, limit, **filters))

    def get(self, memory_id: str) -> MemoryItem | None:
        """Sync twin of :meth:`aget`."""
        return self.blocking(self.aget(memory_id))

    def update(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Sync twin of :meth:`aupdate`."""
        return self.blocking(self.aupdate(memory_id, content=content, importance=importance, metadata=metadata))

    def remove(self, memory_id: str) -> bool:
        """Sync twin of :meth:`aremove`."""
        return self.blocking(self.aremove(memory_id))

    def has_memory(self, memory_id: str) -> bool:
        """Sync twin of :meth:`ahas_memory`."""
        return self.blocking(self.ahas_memory(memory_id))

    def pin(self, memory_id: str, pinned: bool = True) -> bool:
        """Sync twin of :meth:`apin`."""
        return self.blocking(self.apin(memory_id, pinned))

    def clear(self) -> int:
        """Sync twin of :meth:`aclear`."""
        return self.blocking(self.aclear())

    def get_stats(self) -> dict[str, Any]:
        """Sync twin of :meth:`aget_stats`."""
        return self.blocking(self.aget_stats())

    def forget(self, strategy: str = "importance_based", *, dry_run: bool = False, **kwargs: Any) -> int:
        """Sync twin of :meth:`aforget`."""
        return self.blocking(self.aforget(strategy, dry_run=dry_run, **kwargs))

    def as_retriever(self, similarity_top_k: int = 5, **filters: Any) -> TierRetriever:
        """This tier as a LlamaIndex ``BaseRetriever`` returning ``NodeWithScore``."""
        from llama_index_memory_hierarchy.tiers.retriever import TierRetriever  # llama_index.core: on first use

        return TierRetriever(tier=self, similarity_top_k=similarity_top_k, filters=filters)

    # ----------------------------------------------------------------- helpers for tiers
    def make_item(
        self,
        item_or_text: MemoryItem | str,
        *,
        timestamp: datetime | str | float | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> MemoryItem:
        """Normalise input to a validated item of this tier, user and session."""
        if isinstance(item_or_text, MemoryItem):
            item = item_or_text
            if item.user_id not in (self.user_id, "default") and item.user_id != self.user_id:
                raise MemoryValidationError("user_id", f"item belongs to {item.user_id!r}, not {self.user_id!r}")
            updates: dict[str, Any] = {"user_id": self.user_id, "memory_type": self.memory_type}
            if item.session_id is None and (session_id or self.session_id):
                updates["session_id"] = session_id or self.session_id
            if timestamp is not None:
                updates["timestamp"] = as_utc(timestamp)
            if importance is not None:
                updates["importance"] = validate_importance(importance)
            if metadata is not None:
                updates["metadata"] = {**item.metadata, **validate_metadata(metadata)}
            return item.model_copy(update=updates)
        if not isinstance(item_or_text, str):
            raise MemoryValidationError(
                "item_or_text", f"expected a MemoryItem or str, got {type(item_or_text).__name__}"
            )
        data: dict[str, Any] = {
            "content": item_or_text,
            "memory_type": self.memory_type,
            "user_id": self.user_id,
            "session_id": session_id if session_id is not None else self.session_id,
            "metadata": metadata or {},
        }
        if timestamp is not None:
            data["timestamp"] = timestamp
        if importance is not None:
            data["importance"] = importance
        return MemoryItem.create(**data)

    def make_items(self, items: Iterable[MemoryItem | str]) -> list[MemoryItem]:
        """Validate a whole batch before anything is written (all or nothing)."""
        if isinstance(items, (str, MemoryItem)):
            raise MemoryValidationError("items", "expected a sequence of items, got a single item")
        if isinstance(items, (bytes, dict)) or not isinstance(items, Iterable):
            raise MemoryValidationError("items", f"expected a sequence of items, got {type(items).__name__}")
        items = list(islice(items, MAX_BATCH_ITEMS + 1))
        if len(items) > MAX_BATCH_ITEMS:
            raise MemoryValidationError("items", f"at most {MAX_BATCH_ITEMS} items per call; add them in batches")
        return [self.make_item(item) for item in items]

    @staticmethod
    def check_id(memory_id: Any) -> str:
        """Validate a memory id argument."""
        return validate_memory_id(memory_id)
