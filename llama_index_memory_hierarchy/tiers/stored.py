"""``StoredTier``: what episodic, semantic and perceptual memory share.

Their memories live in the shared record store (the source of truth) and the vector and
keyword indexes derived from it: durable writes, updates, removal and forgetting, all scoped
to one user (retrieval is the cross-tier search restricted to the tier, :meth:`MemoryTier.aretrieve`).
A subclass changes what differs through hooks
(:meth:`StoredTier.prepare_item`, :meth:`StoredTier.abuild_records`, :meth:`StoredTier.embedded_text`,
:meth:`StoredTier._aremove_records`, :meth:`StoredTier._aafter_edit`), never through a check of its own
type here; what is derived from a deleted memory in *another* tier (facts citing it) is removed
by the cascades the tier set registers (:meth:`StoredTier.on_delete`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, Record
from llama_index_memory_hierarchy.tiers.base import MemoryTier
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
)

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.stores.context import StoreContext

#: Called with the ids of this tier's deleted records; deletes what another tier derived only from
#: them and returns how many it deleted (the semantic tier's facts citing them, see ``TierSet``).
DeleteCascade = Callable[[Sequence[str]], Awaitable[int]]
#: What a changed memory's content changes elsewhere (facts extracted from it): called with the changed memory.
EditCascade = Callable[[MemoryItem], Awaitable[Any]]
#: Deletes memories of a tier by id through the hierarchy's deletion path; returns the ids deleted.
DeletionPath = Callable[["StoredTier", Sequence[str]], Awaitable[list[str]]]


class StoredTier(MemoryTier):
    """A tier whose memories live in the shared record store and vector index (see the module docstring)."""

    def __init__(self, *, user_id: str, session_id: str | None, context: StoreContext) -> None:
        super().__init__(user_id=user_id, session_id=session_id, runtime=context.runtime)
        self.context = context
        self.config = context.config
        self._cascades: list[DeleteCascade] = []
        self._edit_cascades: list[EditCascade] = []
        self._deletion_path: DeletionPath | None = None

    # ------------------------------------------------------------------ wiring (done by the tier set)
    def on_delete(self, cascade: DeleteCascade) -> None:
        """Run ``cascade`` with the ids of every deletion of this tier's records (see :data:`DeleteCascade`)."""
        self._cascades.append(cascade)

    def on_edit(self, cascade: EditCascade) -> None:
        """Run ``cascade`` with every memory of this tier whose content :meth:`aupdate` changed."""
        self._edit_cascades.append(cascade)

    def delete_through(self, path: DeletionPath) -> None:
        """Route ``remove``, ``clear`` and forgetting through ``path``.

        Why: the hierarchy's deletion path also updates live memories, tombstones and derived
        memories; a tier built alone deletes its records and runs its cascades only.
        """
        self._deletion_path = path

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
        return (await self.aadd_items([self.prepare_item(item)], dedupe=dedupe))[0]

    async def aadd_many(self, items: Sequence[MemoryItem | str], *, dedupe: bool = False) -> list[str]:
        return await self.aadd_items([self.prepare_item(item) for item in self.make_items(items)], dedupe=dedupe)

    def prepare_item(self, item: MemoryItem) -> MemoryItem:
        """Hook: check or complete an item given to :meth:`aadd` or :meth:`aadd_many` before it is stored.

        Why: a tier's public adds take plain items that its own writers (which call
        :meth:`aadd_items` directly) build complete; here, the item as it is.
        """
        return item

    async def aadd_items(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[np.ndarray] | None = None, dedupe: bool = False
    ) -> list[str]:
        """Store validated items (one transaction); reuse ``embeddings`` when the caller has them."""
        return await self.context.awrite(await self.abuild_records(items, embeddings=embeddings), dedupe=dedupe)

    async def abuild_records(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[np.ndarray] | None = None
    ) -> list[Record]:
        """Records ready to write (hook: a tier indexes its items its own way).

        Here: embedded on write (by the store context) unless ``embeddings`` are given, keyword
        text from the content.
        """
        if not items:
            return []
        space = await self.context.aspace() if embeddings is not None else None
        return [
            Record(item=item, embedding=None if embeddings is None else embeddings[i], space=space)
            for i, item in enumerate(items)
        ]

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
            embedding = (await self.context.embeddings.aembed_texts([self.embedded_text(changed)]))[0]
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
        if record is not None and content is not None:
            await self._aafter_edit(changed)
            for cascade in self._edit_cascades:
                await cascade(changed)
        return record is not None

    def embedded_text(self, item: MemoryItem) -> str:
        """Hook: the text a memory of this tier is embedded as (here its content)."""
        return item.content

    async def _aafter_edit(self, item: MemoryItem) -> None:
        """Hook: called when a memory's content was changed by :meth:`aupdate` (here nothing more to do)."""

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
        if self._deletion_path is not None:
            return await self._deletion_path(self, ids)
        return (await self.adelete_records(ids))[0]

    async def adelete_records(self, ids: Sequence[str]) -> tuple[list[str], int]:
        """This tier's part of a deletion (the deletion path calls it): the records with what the tier
        owns of them, then the cascades; ``(ids deleted, derived memories deleted)``."""
        deleted = await self._aremove_records(ids)
        cascaded = 0
        if deleted:
            for cascade in self._cascades:
                cascaded += await cascade(deleted)
        return deleted, cascaded

    async def _aremove_records(self, ids: Sequence[str]) -> list[str]:
        """Hook: delete these records, their vectors and keyword entries; the ids deleted."""
        return await self.context.adelete(self.user_id, ids)

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
