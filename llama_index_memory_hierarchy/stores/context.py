"""``StoreContext``: the stores of one deployment, shared by every memory in a process.

Many ``HierarchicalMemory`` objects (users, sessions) over one folder share one context:
one record store connection pool, one vector index per vector space, one embedding
model. The context also keeps the derived indexes in step with the record store:
every write commits rows plus outbox entries in one transaction, then applies the
outbox to the vector index; entries left by a crash are applied on the next open.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from llama_index_memory_hierarchy.config import MemoryConfig, redact_url
from llama_index_memory_hierarchy.errors import StoreLockedError
from llama_index_memory_hierarchy.runtime import Runtime, get_runtime
from llama_index_memory_hierarchy.stores.base import (
    MEMORY_NAMESPACE,
    Record,
    RecordStore,
    VectorFilter,
    VectorIndex,
)
from llama_index_memory_hierarchy.stores.vector import open_vector_index, record_to_point
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryType

logger = logging.getLogger(__name__)
T = TypeVar("T")

_OUTBOX_BATCH = 2000


class _FolderLock:
    """An exclusive advisory lock on the persist folder: embedded stores serve one process."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / ".lock"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StoreLockedError(
                f"{folder}: held by another process; embedded stores serve one process "
                "(share one HierarchicalMemory per process, or use a server deployment)"
            ) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, str(os.getpid()).encode())

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def vector_filter(
    user_id: str,
    *,
    namespace: str = MEMORY_NAMESPACE,
    memory_type: MemoryType | None = None,
    filters: MemoryFilter | None = None,
) -> VectorFilter:
    """Translate a :class:`MemoryFilter` to the payload filter of a vector index."""
    equals: dict[str, Any] = {"namespace": namespace}
    ranges: dict[str, tuple[float | None, float | None]] = {}
    if memory_type is not None:
        equals["memory_type"] = memory_type.value
    ids = None
    if filters is not None:
        if filters.session_id is not None:
            equals["session_id"] = filters.session_id
        if filters.start_time is not None or filters.end_time is not None:
            ranges["timestamp"] = (
                filters.start_time.timestamp() if filters.start_time else None,
                filters.end_time.timestamp() if filters.end_time else None,
            )
        if filters.min_importance is not None:
            ranges["importance"] = (filters.min_importance, None)
        ids = filters.memory_ids
    return VectorFilter(user_id=user_id, equals=equals, ranges=ranges, ids=ids)


class StoreContext:
    """Record store, vector indexes, embeddings and the runtime of one deployment."""

    _registry: ClassVar[dict[tuple[Any, ...], StoreContext]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, config: MemoryConfig, embed_model: Any, runtime: Runtime, key: tuple[Any, ...]) -> None:
        from llama_index_memory_hierarchy.embeddings import EmbeddingService
        from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

        self.config = config
        self.runtime = runtime
        self.persist_dir = Path(config.persist_dir).expanduser().resolve()
        self._key = key
        self._refs = 0
        self._lock = _FolderLock(self.persist_dir) if self._is_embedded() else None
        self.records: RecordStore = SQLRecordStore(
            config.resolved_record_store_url, sqlite_synchronous=config.sqlite_synchronous
        )
        self.embeddings = EmbeddingService.from_config(config, embed_model)
        self._vectors: dict[str, VectorIndex] = {}
        self._vector_lock = asyncio.Lock()
        self._outbox_lock = asyncio.Lock()
        self._resources: dict[str, Any] = {}
        self._background: set[asyncio.Task[Any]] = set()
        try:
            runtime.run(self._astart())
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise

    def _is_embedded(self) -> bool:
        return self.config.resolved_record_store_url.startswith("sqlite") or self.config.vector_backend == "edge"

    def __repr__(self) -> str:
        return (
            f"StoreContext(persist_dir={self.persist_dir}, records={redact_url(self.config.resolved_record_store_url)})"
        )

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def acquire(cls, config: MemoryConfig, *, embed_model: Any = None, runtime: Runtime | None = None) -> StoreContext:
        """The shared context for this configuration (created on first use)."""
        key = (
            str(Path(config.persist_dir).expanduser().resolve()),
            config.resolved_record_store_url,
            config.vector_backend,
            config.qdrant_url,
            config.qdrant_path,
            config.graph_store_url,
            id(embed_model) if embed_model is not None and not isinstance(embed_model, str) else embed_model,
            config.embed_model,
        )
        with cls._registry_lock:
            context = cls._registry.get(key)
            if context is None:
                context = cls(config, embed_model, runtime or get_runtime(), key)
                cls._registry[key] = context
            context._refs += 1
            return context

    def release(self) -> None:
        """Drop one reference; the last one closes the stores."""
        with self._registry_lock:
            self._refs -= 1
            if self._refs > 0:
                return
            self._registry.pop(self._key, None)
        self.runtime.run(self._aclose())
        if self._lock is not None:
            self._lock.release()

    @classmethod
    def close_all(cls) -> None:
        """Close every open context (tests, interpreter shutdown)."""
        with cls._registry_lock:
            contexts = list(cls._registry.values())
        for context in contexts:
            context._refs = 1
            context.release()

    async def _astart(self) -> None:
        await self.records.start()
        await self.drain_outbox()

    async def _aclose(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for resource in self._resources.values():
            close = getattr(resource, "aclose", None)
            if close is not None:
                await close()
        for index in self._vectors.values():
            await index.close()
        await self.records.close()

    def resource(self, name: str, factory: Callable[[StoreContext], T]) -> T:
        """A lazily created resource shared by every user of this context (graph store, file store)."""
        with self._registry_lock:
            if name not in self._resources:
                self._resources[name] = factory(self)
            return self._resources[name]

    def spawn(self, coro: Any) -> None:
        """Run a coroutine in the background on the runtime loop; awaited on close."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)

    # ------------------------------------------------------------------ vectors
    async def avector_index(self, space: str | None = None, dim: int | None = None) -> VectorIndex:
        """The vector index of ``space`` (default: the text embedding space)."""
        if space is None:
            space = await self.aspace()
            dim = self.embeddings.dim
        index = self._vectors.get(space)
        if index is not None:
            return index
        async with self._vector_lock:
            if space not in self._vectors:
                if dim is None:
                    raise ValueError(f"dimension of vector space {space!r} is unknown")
                self._vectors[space] = await self.runtime.to_thread(open_vector_index, self.config, space, dim)
            return self._vectors[space]

    async def aspace(self) -> str:
        """The text embedding space (loads the model on first use, off the loop)."""
        await self.embeddings.aprobe()
        return self.embeddings.space

    # ------------------------------------------------------------------ writes
    async def awrite(self, records: Sequence[Record], *, dedupe: bool = False, embed: bool = True) -> list[str]:
        """Durably store records, embedding those without a vector, then index them.

        The ids returned are committed: a crash after this point loses nothing (the
        vector index is repaired from the outbox on the next open).
        """
        if embed:
            missing = [r for r in records if r.embedding is None]
            if missing:
                vectors = await self.embeddings.aembed_texts([r.item.content for r in missing])
                space = await self.aspace()
                for record, vector in zip(missing, vectors, strict=True):
                    record.embedding = vector
                    record.space = space
        ids = await self.records.insert(records, dedupe=dedupe)
        await self.drain_outbox({r.item.id: r for r in records})
        return ids

    async def adelete(self, user_id: str, ids: Sequence[str]) -> list[str]:
        """Delete records of a user and their vectors; return the ids deleted."""
        deleted = await self.records.delete(user_id, ids)
        if deleted:
            await self.drain_outbox()
        return deleted

    async def drain_outbox(self, known: dict[str, Record] | None = None) -> int:
        """Apply pending index operations to the vector indexes; return how many."""
        applied = 0
        async with self._outbox_lock:
            while True:
                ops = await self.records.outbox_pending(_OUTBOX_BATCH)
                if not ops:
                    return applied
                await self._apply(ops, known or {})
                await self.records.outbox_ack([op.seq for op in ops])
                applied += len(ops)

    async def _apply(self, ops: Sequence[Any], known: dict[str, Record]) -> None:
        upserts: dict[str, dict[str, Record]] = {}
        fetch: dict[str, list[str]] = {}
        deletes: list[str] = []
        for op in ops:
            if op.op == "delete":
                deletes.append(op.memory_id)
                for bucket in upserts.values():
                    bucket.pop(op.memory_id, None)
            elif op.memory_id in known and known[op.memory_id].embedding is not None:
                record = known[op.memory_id]
                upserts.setdefault(record.space or "", {})[op.memory_id] = record
            else:
                fetch.setdefault(op.user_id, []).append(op.memory_id)
        for user_id, ids in fetch.items():
            for record in await self.records.get(user_id, ids, with_embeddings=True):
                if record.embedding is not None and record.space:
                    upserts.setdefault(record.space, {})[record.item.id] = record
        for space, bucket in upserts.items():
            if bucket:
                first = next(iter(bucket.values()))
                index = await self.avector_index(space, int(np.asarray(first.embedding).shape[-1]))
                await index.upsert([record_to_point(r) for r in bucket.values()])
        if deletes:
            await self.avector_index()  # the default space may not be open yet
            for index in list(self._vectors.values()):
                await index.delete(deletes)

    # ------------------------------------------------------------------ reads
    async def adense_search(
        self,
        user_id: str,
        vector: np.ndarray,
        *,
        namespace: str = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
        limit: int = 20,
        space: str | None = None,
    ) -> list[tuple[str, float]]:
        """Nearest memories of one user by vector: ``(id, cosine)`` best first."""
        index = await self.avector_index(space, int(vector.shape[-1]) if space else None)
        flt = vector_filter(user_id, namespace=namespace, memory_type=memory_type, filters=filters)
        return await index.search(vector, flt, limit)

    async def aerase_user(self, user_id: str) -> None:
        """Remove a user from the record store and every vector index."""
        await self.records.delete_where(user_id, namespace=None)
        await self.drain_outbox()
        for index in self._vectors.values():
            await index.delete_user(user_id)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("background memory task failed", exc_info=task.exception())
