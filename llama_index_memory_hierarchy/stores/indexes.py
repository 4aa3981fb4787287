"""``VectorIndexes``: the open vector index of each vector space of one deployment.

Why its own module: which index a space gets (an in-process mirror of an embedded folder, the
configured backend, or the ``vector_store`` the caller supplied) and how an index is rewritten so
no erased vector stays on disk are one concern, apart from the writes and reads of the context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import StoreError
from llama_index_memory_hierarchy.runtime import Runtime
from llama_index_memory_hierarchy.stores.base import RecordStore, VectorIndex
from llama_index_memory_hierarchy.stores.reconcile import reindex_space
from llama_index_memory_hierarchy.stores.vector import as_vector_index, open_vector_index
from llama_index_memory_hierarchy.stores.vector.edge import EdgeVectorIndex
from llama_index_memory_hierarchy.stores.vector.edge_rebuild import staging_folder, switch_in
from llama_index_memory_hierarchy.stores.vector.mirror import MirrorVectorIndex

#: ``space -> the loader of its points`` where the indexes mirror an embedded folder's change log.
MirrorLoader = Callable[[str], Callable[..., Awaitable[Any]]]


class VectorIndexes:
    """Opens each space's index once (racing opens wait for one) and rewrites one on erasure."""

    def __init__(
        self,
        config: MemoryConfig,
        runtime: Runtime,
        text_space: Callable[[], str],
        *,
        vector_store: Any = None,
        mirror: MirrorLoader | None = None,
    ) -> None:
        self.config = config
        self.runtime = runtime
        self._text_space = text_space
        self._supplied = vector_store
        self._mirror = mirror
        #: The open indexes by space (shared with the outbox and the change log that keep them in step).
        self.by_space: dict[str, VectorIndex] = {}
        self._lock = asyncio.Lock()

    async def aget(self, space: str, dim: int | None) -> VectorIndex:
        """The index of ``space``, opened off the loop on first use (``dim`` is needed then)."""
        index = self.by_space.get(space)
        if index is not None:
            return index
        async with self._lock:
            if space not in self.by_space:
                if dim is None:
                    raise ValueError(f"dimension of vector space {space!r} is unknown")
                self.by_space[space] = await self.runtime.to_thread(self._open, space, dim)
            return self.by_space[space]

    def _open(self, space: str, dim: int) -> VectorIndex:
        """The index of ``space``: a mirror of the folder, else from the supplied ``vector_store``, else as
        configured."""
        supplied = self._supplied
        if self._mirror is not None:
            return MirrorVectorIndex(space, dim, self._mirror(space))
        if supplied is None:
            return open_vector_index(self.config, space, dim)
        if is_store(supplied):
            text_space = self._text_space()
            if space != text_space:
                raise StoreError(
                    f"the vector_store given serves the text embedding space {text_space!r} only; "
                    f"pass a factory (space, dim) -> store to also index space {space!r}"
                )
            return as_vector_index(supplied, space, dim)
        made = supplied(space, dim)
        if made is None:
            raise StoreError(f"the vector_store factory returned None for space {space!r}")
        return as_vector_index(made, space, dim)

    async def arewrite(self, index: VectorIndex, records: RecordStore, persist_dir: Path) -> None:
        """Rebuild an embedded vector folder from the records (a fresh WAL and segments); optimise any other index.

        Erasure calls this so that no deleted vector stays readable in a segment or the WAL.
        """
        if isinstance(index, MirrorVectorIndex):
            return  # held in memory only: nothing of a deleted vector is on disk
        if not isinstance(index, EdgeVectorIndex):
            optimize = getattr(index, "optimize", None)
            if optimize is not None:
                await optimize()
            return
        space, dim, folder = index.space, index.dim, index.path
        async with self._lock:  # held until the new folder is in: a write to the space waits (aget)
            if self.by_space.get(space) is not index:
                return  # already replaced
            del self.by_space[space]
            await index.close()
            try:
                staging = await asyncio.to_thread(staging_folder, folder)
                fresh = await asyncio.to_thread(
                    lambda: EdgeVectorIndex(persist_dir, space, dim, flush_on_write=False, folder=staging)
                )
                try:
                    await reindex_space(records, fresh, space)
                finally:
                    await fresh.close()  # flushed: complete on disk before the switch
                await asyncio.to_thread(switch_in, folder, staging)
            finally:  # switched in, or the old folder as it was
                self.by_space[space] = await asyncio.to_thread(lambda: EdgeVectorIndex(persist_dir, space, dim))


def is_store(value: Any) -> bool:
    """A vector store instance (LlamaIndex store or VectorIndex), as opposed to a factory."""
    from llama_index.core.vector_stores.types import BasePydanticVectorStore

    return isinstance(value, (BasePydanticVectorStore, VectorIndex))
