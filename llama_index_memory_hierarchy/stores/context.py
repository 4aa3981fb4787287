"""``StoreContext``: the stores of one deployment, shared by every memory in a process.

Many ``HierarchicalMemory`` objects (users, sessions) over one folder share one context:
one record store connection pool, one vector index per vector space, one embedding
model. The context also keeps the derived indexes in step with the record store:
every write commits rows plus outbox entries in one transaction, then applies the
outbox to the vector index; entries left by a crash are applied on the next open.

Its jobs live in their own modules: the process registry of contexts (:mod:`.registry`), the
vector index of each space (:mod:`.indexes`), the outbox drained into them (:mod:`.outbox`), the
change log an embedded folder's processes follow (:mod:`.changelog`), the folder lock
(:mod:`.lock`), the work locks of the layers above (:mod:`.worklock`) and their per-deployment
state (:mod:`.shared`).

Many processes may share one server deployment (records on PostgreSQL, vectors on a server):
their contexts drain the one outbox concurrently (:class:`~.outbox.Outbox`).

Many processes may share one embedded folder too (the default: SQLite records, vectors mirrored
in memory by :class:`MirrorVectorIndex`): there the outbox is a change log that every process
follows (:meth:`StoreContext.afollow`, before each search) instead of draining it, so each sees
every other's writes and deletes; nothing shared and mutable lives outside SQLite. An open
holds the folder lock shared; jobs that must be alone with it (``lmh reindex``, the explicit
qdrant-edge backend) hold it exclusive (:mod:`.lock`).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import logging
import os
import shutil
import threading
from collections.abc import Callable, Coroutine, Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from llama_index_memory_hierarchy.config import MemoryConfig, redact_url
from llama_index_memory_hierarchy.embeddings import EmbeddingService
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.language import ANALYZER_VERSION
from llama_index_memory_hierarchy.runtime import Runtime, get_runtime
from llama_index_memory_hierarchy.stores.access import AccessLog
from llama_index_memory_hierarchy.stores.base import (
    MEMORY_NAMESPACE,
    Record,
    RecordStore,
    VectorIndex,
    vector_filter,
)
from llama_index_memory_hierarchy.stores.changelog import ChangeLog
from llama_index_memory_hierarchy.stores.graph import UserGraph, open_graph_store
from llama_index_memory_hierarchy.stores.indexes import VectorIndexes, is_store
from llama_index_memory_hierarchy.stores.lock import FolderLock
from llama_index_memory_hierarchy.stores.outbox import Outbox
from llama_index_memory_hierarchy.stores.reconcile import (
    analyzer_version,
    areconcile_vectors,
    foreign_text_spaces,
)
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.stores.registry import ContextRegistry
from llama_index_memory_hierarchy.stores.shared import SharedState
from llama_index_memory_hierarchy.stores.vector._common import check_vector
from llama_index_memory_hierarchy.stores.vector.edge_rebuild import recover_rebuilds
from llama_index_memory_hierarchy.stores.worklock import WorkLock, WorkLocks
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryType

logger = logging.getLogger(__name__)

#: Records in one write from which the freed heap is handed back to the OS afterwards.
_TRIM_AFTER_RECORDS = 1000


class StoreContext:
    """Record store, vector indexes, embeddings and the runtime of one deployment."""

    _registry: ClassVar[ContextRegistry[StoreContext]] = ContextRegistry()

    def __init__(
        self,
        config: MemoryConfig,
        embed_model: Any,
        runtime: Runtime,
        key: tuple[Any, ...],
        vector_store: Any = None,
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.persist_dir = Path(config.persist_dir).expanduser().resolve()
        self._key = key
        #: Memory objects holding this context (counted by the registry).
        self.refs = 0
        self._vector_store = vector_store
        #: Whether the vector indexes are in-process mirrors that follow the record store's change log.
        self.follows_log = (
            vector_store is None
            and config.resolved_vector_backend == "sqlite"
            and config.resolved_record_store_url.startswith("sqlite")
        )
        self._lock = (
            FolderLock(self.persist_dir, "shared" if self.follows_log or config.vectors_on_server else "exclusive")
            if self._is_embedded()
            else None
        )
        records = SQLRecordStore(config.resolved_record_store_url, sqlite_synchronous=config.sqlite_synchronous)
        self.records: RecordStore = records
        self.embeddings = EmbeddingService.from_config(config, embed_model)
        #: The open vector index of each space (mirrors of the change log on an embedded folder).
        self.indexes = VectorIndexes(
            config,
            runtime,
            lambda: self.embeddings.space,
            vector_store=vector_store,
            mirror=(lambda space: functools.partial(self.changes.aload_points, space)) if self.follows_log else None,  # type: ignore[union-attr]
        )
        self._guard = threading.Lock()
        #: What the layers above keep once per deployment (typed fields).
        self.shared = SharedState()
        #: The work locks of the layers above, across processes: advisory locks of PostgreSQL records, else a
        #: lock file in the folder.
        self.work_locks = WorkLocks(
            self.persist_dir if self._lock is not None else None,
            (lambda: records.engine) if records.dialect == "postgresql" else None,
        )
        self._graph: UserGraph | None = None
        self._background: set[asyncio.Task[Any]] = set()
        #: Access bumps of reads, written in the background (one write per burst of reads).
        self.accesses = AccessLog(self.records, self.spawn)
        self.outbox = Outbox(self.records, self.indexes.by_space, self.avector_index, repr(self))
        #: Where the vectors are mirrored: the record store's change log as this process follows it.
        self.changes = ChangeLog(self.records, self.indexes.by_space) if self.follows_log else None
        #: ``space -> records`` embedded by another text model (counted when the space is first resolved).
        self.foreign_spaces: dict[str, int] | None = None
        try:
            runtime.run(self._astart())
        except BaseException:
            self.work_locks.close()
            if self._lock is not None:
                self._lock.release()
            raise

    def _is_embedded(self) -> bool:
        """Whether a store lives in the persist folder (then one process owns the folder)."""
        vectors_on_server = self._vector_store is not None or self.config.vectors_on_server
        return not (self.config.records_on_server and vectors_on_server)

    @property
    def forked(self) -> bool:
        """True in a forked child of the process that opened this context (its runtime stayed behind)."""
        return self.runtime.forked

    @property
    def locked(self) -> bool:
        """True when this process holds the persist folder lock, shared or alone (an embedded deployment)."""
        return self._lock is not None

    @property
    def sees_all_writes(self) -> bool:
        """True when this context learns of every write to its stores: it holds the folder alone, or it follows
        the change log (other processes' writes are counted in the record store's :meth:`RecordStore.changes`
        once :meth:`afollow` has read them)."""
        return self.follows_log or (self._lock is not None and self._lock.mode == "exclusive")

    @property
    def erasure_tombstones(self) -> bool | str:
        """What an erasure leaves in the outbox for the vector indexes (``SQLRecordStore.delete_user``): one
        ``reset`` row naming nobody where every process mirrors the log, else a delete per vector."""
        return "reset" if self.follows_log else True

    def __repr__(self) -> str:
        return (
            f"StoreContext(persist_dir={self.persist_dir}, records={redact_url(self.config.resolved_record_store_url)})"
        )

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def acquire(
        cls,
        config: MemoryConfig,
        *,
        embed_model: Any = None,
        runtime: Runtime | None = None,
        vector_store: Any = None,
        on_open: Callable[[StoreContext], Coroutine[Any, Any, Any]] | None = None,
    ) -> StoreContext:
        """The shared context for this configuration (created on first use).

        ``on_open`` runs once, on the runtime, when this call creates the context: the layers
        above pass what must happen before the stores serve anyone (the lifecycle finishes a user
        erasure a killed process left, ``lifecycle.erasure.aresume_erasures``); the stores know
        nothing of it. A failure there is logged and the stores still open.

        ``vector_store`` replaces the configured vector backend: a LlamaIndex
        ``BasePydanticVectorStore`` (or a ``VectorIndex``) serving the text embedding space, or a
        factory ``(space, dim) -> store`` serving every space (perceptual encoders need their own).
        """
        if vector_store is not None and not callable(vector_store) and not is_store(vector_store):
            raise MemoryValidationError(
                "vector_store",
                "expected a LlamaIndex BasePydanticVectorStore, a VectorIndex or a factory (space, dim) -> store, "
                f"got {type(vector_store).__name__}",
            )
        key = (
            str(Path(config.persist_dir).expanduser().resolve()),
            config.resolved_record_store_url,
            config.vector_backend,
            config.qdrant_url,
            config.qdrant_path,
            config.vector_store_url,
            config.vector_store_factory,
            config.collection_prefix,
            None if vector_store is None else id(vector_store),
            config.graph_store_url,
            id(embed_model) if embed_model is not None and not isinstance(embed_model, str) else embed_model,
            config.embed_model,
        )
        context, made = cls._registry.acquire(
            key, lambda: cls(config, embed_model, runtime or get_runtime(), key, vector_store)
        )
        if made and on_open is not None:
            try:  # outside the registry lock: the hook uses the context's resources
                context.runtime.run(on_open(context))
            except (StoreError, OSError) as exc:  # the stores still open; verify_indexes reports what is left
                logger.error("%r: the work due on opening could not be finished now: %s", context, exc)
        return context

    def release(self) -> None:
        """Drop one reference; the last one closes the stores."""
        self._registry.release(self._key, self, self._close)

    def _close(self) -> None:
        try:
            self.runtime.run(self._aclose())
        finally:
            self.work_locks.close()
            if self._lock is not None:
                self._lock.release()

    @classmethod
    def close_all(cls) -> None:
        """Close every open context (tests, interpreter shutdown)."""
        for context in cls._registry.contexts():
            context.refs = 1
            context.release()

    def _check_record_file(self) -> None:
        """Refuse a missing or empty ``memory.db`` beside the indexes it is the source of truth for.

        Why: opened as a new store, it would look empty and the vector reconciliation would then wipe
        the vector index, turning a recoverable accident (a lost or truncated file) into data loss.
        """
        path = self.persist_dir / "memory.db"
        if self.config.record_store_url is not None or self.config.allow_fresh_store:
            return
        if path.is_file() and path.stat().st_size > 0:
            return
        candidates = [self.persist_dir / name for name in ("vectors", "graph.db", "files", "memory.db-wal")]
        present = [
            str(p) for p in candidates if (p.is_dir() and any(p.iterdir())) or (p.is_file() and p.stat().st_size > 0)
        ]
        if present:
            state = "is empty (0 bytes)" if path.exists() else "is missing"
            raise StoreError(
                f"record store {path} {state} but this folder holds data it indexes: {', '.join(present)}. "
                "Restore memory.db from a backup (the indexes are reconciled with it on open). To start a new, "
                "empty store here instead, discarding that data (e.g. before re-importing an export: "
                f"LMH_ALLOW_FRESH_STORE=1 lmh import FILE --dir {self.persist_dir}), open with allow_fresh_store=True"
            )

    async def _astart(self) -> None:
        self._check_record_file()
        await self.records.start()
        await self._acheck_analyzer()
        if self.follows_log:  # vectors come from the records: only changes from now on matter
            await self.changes.astart()  # type: ignore[union-attr]
            await self.runtime.to_thread(_retire_vector_folder, self.persist_dir)
            return
        if self._lock is not None and self.config.resolved_vector_backend == "edge":
            # before any index opens or lists its folders: a rebuild a kill interrupted is finished or undone
            await self.runtime.to_thread(recover_rebuilds, self.persist_dir / "vectors")
        await self._adrain_or_retry()
        if self._lock is not None and not self.config.vectors_on_server:
            # Vector indexes held by this process alone: repair any that lost acknowledged points.
            await areconcile_vectors(self)

    async def _acheck_analyzer(self) -> None:
        """Warn when the keyword text was written by another keyword analysis (``lmh reindex`` recomputes it)."""
        found = await analyzer_version(self.records)
        if found != ANALYZER_VERSION:
            logger.warning(
                "the keyword index of %s was written by keyword analysis v%s (this release uses v%d): keyword "
                "search may miss inflected or Chinese words; run `lmh reindex` to recompute it",
                self.records.where,
                found,
                ANALYZER_VERSION,
            )

    async def _aclose(self) -> None:
        self.outbox.cancel_retry()
        self.accesses.flush_soon()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._graph is not None:
            await self._graph.aclose()
        for index in self.indexes.by_space.values():
            await index.close()
        await self.records.close()

    @property
    def graph(self) -> UserGraph:
        """The knowledge graph of this deployment (every user's facts), opened on first use."""
        with self._guard:
            if self._graph is None:
                self._graph = UserGraph(open_graph_store(self.config))
            return self._graph

    def lock(self, owner: type, *key: Hashable) -> WorkLock:
        """The lock of ``owner`` (the class whose work it serialises) for ``key``: ``async with`` it.

        Every memory object over these stores gets the same lock, and on an embedded folder so does every other
        process of the deployment (:mod:`.worklock`), so their read-modify-writes for one user never interleave.
        """
        return self.work_locks.get(owner, *key)

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
        return await self.indexes.aget(space, dim)

    async def aspace(self) -> str:
        """The text embedding space (loads the model on first use, off the loop).

        The first time, records embedded by another model are counted (:attr:`foreign_spaces`)
        and a warning names ``lmh reindex``, which moves them to this model's space.
        """
        await self.embeddings.aprobe()
        space = self.embeddings.space
        if self.foreign_spaces is None:
            self.foreign_spaces = await foreign_text_spaces(self.records, space)
            if self.foreign_spaces:
                logger.warning(
                    "%d memories of %s were embedded by another model (%s), not by the configured %s: dense "
                    "search misses them (keywords still find them); run `lmh reindex` to re-embed them",
                    sum(self.foreign_spaces.values()),
                    self.records.where,
                    ", ".join(self.foreign_spaces),
                    space,
                )
        return space

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
        await self._acheck_vectors(records)
        ids = await self.records.insert(records, dedupe=dedupe)
        await self._adrain_or_retry({r.item.id: r for r in records})
        if len(records) >= _TRIM_AFTER_RECORDS:
            await asyncio.to_thread(_release_free_heap)
        return ids

    async def _acheck_vectors(self, records: Sequence[Record]) -> None:
        """Refuse, before anything is committed, a vector its index could never take (NaN, all-zero, or
        another dimension than its space): committed, it would sit in the outbox unindexable."""
        if isinstance(records, Record) or not isinstance(records, Sequence):
            raise MemoryValidationError("records", "must be a sequence of Record")
        for position, record in enumerate(records):
            if not isinstance(record, Record) or record.embedding is None:
                continue
            if not record.space:
                raise MemoryValidationError(f"records[{position}].space", "a record with an embedding needs its space")
            vector = np.asarray(record.embedding)
            if vector.ndim != 1 or vector.size == 0:
                raise MemoryValidationError(
                    f"records[{position}].embedding", f"must be a non-empty 1-D vector, got shape {vector.shape}"
                )
            index = await self.avector_index(record.space, int(vector.shape[0]))
            check_vector(vector, index.dim, f"records[{position}].embedding")

    async def adelete(self, user_id: str, ids: Sequence[str]) -> list[str]:
        """Delete records of a user and their vectors; return the ids deleted."""
        deleted = await self.records.delete(user_id, ids)
        if deleted:
            await self._adrain_or_retry()
        return deleted

    async def _adrain_or_retry(self, known: dict[str, Record] | None = None) -> None:
        """Drain after a committed write; an index failure is logged and retried in the background.

        The write is durable once the record store committed it, so its caller must not see
        an error (a retry would write it twice): the index catches up from the outbox.
        """
        try:
            await self.drain_outbox(known)
        except (StoreError, OSError, asyncio.TimeoutError) as exc:
            logger.warning("%r: vector index update deferred (kept in the outbox, retried): %s", self, exc)
            self.outbox.retry_soon(self.drain_outbox)

    async def drain_outbox(self, known: dict[str, Record] | None = None) -> int:
        """Apply pending index operations to the vector indexes; return how many (:meth:`Outbox.adrain`; on an
        embedded folder the change log is followed instead)."""
        if self.follows_log:
            return await self.afollow(known)
        return await self.outbox.adrain(known)

    # ------------------------------------------------------------------ the change log (embedded folder)
    async def afollow(self, known: dict[str, Record] | None = None) -> int:
        """Apply every change any process committed since this one last looked to the mirrors (:class:`ChangeLog`)."""
        return await self.changes.afollow(known) if self.changes is not None else 0

    def foreign_revision(self, user_id: str) -> tuple[int, int]:
        """Changes other processes made to ``user_id``'s records as this process has seen them (a cache of them
        built at another revision is stale); always ``(0, 0)`` where no change log is followed."""
        return self.changes.foreign_revision(user_id) if self.changes is not None else (0, 0)

    # ------------------------------------------------------------------ reads
    async def arewrite_index(self, index: VectorIndex) -> None:
        """Leave no deleted vector of ``index`` on disk (:meth:`VectorIndexes.arewrite`; erasure calls this)."""
        await self.indexes.arewrite(index, self.records, self.persist_dir)

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
        await self.afollow()
        flt = vector_filter(user_id, namespace=namespace, memory_type=memory_type, filters=filters)
        return await index.search(vector, flt, limit)

    async def aerase_user(self, user_id: str) -> None:
        """Remove a user's memories from the record store and every vector index."""
        await self.records.delete_where(user_id, namespace=None)
        await self.drain_outbox()
        for index in self.indexes.by_space.values():
            await index.delete_user(user_id)


def _retire_vector_folder(persist_dir: Path) -> None:
    """Remove the qdrant-edge folder of an earlier release (its vectors are in the records too), so no copy of a
    later-erased user stays in it: renamed first (one atomic step), then deleted; a kill in between leaves a
    renamed folder that the next open deletes."""
    legacy = persist_dir / "vectors"
    if legacy.is_dir():
        try:
            legacy.rename(persist_dir / f".vectors-retired-{os.getpid()}-{threading.get_ident()}")
            logger.info("%s: the vectors are read from memory.db now; the qdrant-edge folder was removed", persist_dir)
        except OSError:  # another process retired it first
            pass
    for retired in persist_dir.glob(".vectors-retired-*"):
        shutil.rmtree(retired, ignore_errors=True)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, when the C library has it (Linux with glibc)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _release_free_heap() -> None:
    """Give memory freed by a large write back to the OS.

    A batch of thousands of records allocates transient buffers in several threads (embedding,
    SQL parameters, vector points); glibc keeps what they free in per-thread arenas, so a flood
    of batched adds grew the process by several KB per record that was no longer used.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("background memory task failed", exc_info=task.exception())
