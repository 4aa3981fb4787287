"""Interfaces of the stores, apart from their backends.

* :class:`RecordStore`: the authoritative record of every memory (SQLite embedded,
  PostgreSQL at scale). Holds content, metadata, the embedding and a keyword index.
  Everything else can be rebuilt from it.
* :class:`VectorIndex`: a derived index of embeddings with payload filters
  (qdrant-edge embedded, or any LlamaIndex vector store such as Qdrant server).

All methods are coroutines; they run on the package :class:`~.runtime.Runtime` loop.
Every read, write and delete takes the ``user_id`` it is scoped to.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from llama_index_memory_hierarchy.types import MemoryFilter, MemoryItem, MemoryType

T = TypeVar("T")

#: Namespace of memory-tier records; knowledge bases use ``kb:<name>``.
MEMORY_NAMESPACE = "memory"
#: Namespace of the satellite records that carry a perception's non-text vectors (other encoders'
#: spaces): the stores tell them apart from text records when they compare embedding models.
VECTOR_NAMESPACE = "perceptual:vectors"


def batches(values: Sequence[T], size: int) -> list[Sequence[T]]:
    """Consecutive slices of at most ``size`` values: one bounded statement or backend call each."""
    return [values[i : i + size] for i in range(0, len(values), size)]


@dataclass
class Record:
    """A memory as the record store keeps it: the item plus storage-only fields."""

    item: MemoryItem
    namespace: str = MEMORY_NAMESPACE
    embedding: np.ndarray | None = None  # float32, shape (dim,)
    space: str | None = None  # vector space (embedding model + dim) the embedding belongs to
    #: Written: the text to keyword-index instead of the content (e.g. with context). Read back
    #: (``RecordStore.get(..., with_keywords=True)``): the analysed terms the index holds, space-separated.
    keyword: str | None = None


@dataclass
class OutboxOp:
    """A pending change to apply to derived indexes (written in the record's transaction)."""

    seq: int
    op: Literal["upsert", "delete"]
    memory_id: str
    user_id: str
    space: str | None


class RecordStore(ABC):
    """Authoritative, transactional store of memory records, scoped by user."""

    def changes(self, user_id: str, memory_type: MemoryType) -> int:
        """How many writes this object has committed to the user's records of ``memory_type`` (deletes count for
        every type).

        Why: a cache of what is derived from those records (the profile) keys on it instead of reading the
        store, where this object sees every write (``StoreContext.sees_all_writes``: the only writer, or an
        embedded store whose change log it follows and counts other processes' writes from).
        """
        counts = self.__dict__.get("_change_counts", {})
        return counts.get((user_id, memory_type), 0) + counts.get((user_id, None), 0)

    def note_change(self, user_id: str, memory_type: MemoryType | None) -> None:
        """Count a committed write (``memory_type=None``: a delete, which may touch any type)."""
        counts = self.__dict__.setdefault("_change_counts", {})
        counts[user_id, memory_type] = counts.get((user_id, memory_type), 0) + 1

    def note_written(self, ids: Iterable[str]) -> None:
        """Remember memories this object changed, until :meth:`take_written` meets them in the change log.

        Why: a process following the change log (``StoreContext.afollow``) tells its own writes, which its
        caches already reflect, from other processes' writes, which invalidate them.
        """
        self.__dict__.setdefault("_written", set()).update(ids)

    def take_written(self, memory_id: str) -> bool:
        """Whether this object changed ``memory_id`` (forgotten once asked)."""
        written = self.__dict__.get("_written")
        if not written or memory_id not in written:
            return False
        written.discard(memory_id)
        return True

    def change_token(self) -> Hashable | None:
        """A value that differs once anything was committed to the store since it was taken, by this process or
        another; None where the store has no such cheap check (then a cache must read again).

        Why: every ``get()`` reads the session's history, its start and the standing instructions, which other
        objects and processes may have changed; with this one check it reads them again only when something did.
        """
        return None

    @abstractmethod
    async def start(self) -> None:
        """Create or migrate the schema; raise :class:`StoreError` naming a corrupt file."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections."""

    @abstractmethod
    async def insert(self, records: Sequence[Record], *, dedupe: bool = False) -> list[str]:
        """Insert in one transaction (with keyword index and outbox rows); return ids in order.

        With ``dedupe``, a record whose (user, session, namespace, type, content) already
        exists returns the existing id instead of a new row.
        """

    @abstractmethod
    async def get(
        self, user_id: str, ids: Sequence[str], *, with_embeddings: bool = False, with_keywords: bool = False
    ) -> list[Record]:
        """Records of this user with these ids (others' ids are simply absent), in the given order.

        ``with_keywords``: each record's ``keyword`` is the terms its keyword index holds (its context included).
        """

    @abstractmethod
    async def update(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        pinned: bool | None = None,
        embedding: np.ndarray | None = None,
        space: str | None = None,
    ) -> Record | None:
        """Change fields of one record (re-indexing keyword text; outbox upsert); None if absent."""

    @abstractmethod
    async def set_keywords(self, user_id: str, texts: Mapping[str, str]) -> int:
        """Replace the text the keyword index holds for these records (as ``Record.keyword``); how many were found."""

    @abstractmethod
    async def delete(self, user_id: str, ids: Sequence[str]) -> list[str]:
        """Delete this user's records with these ids; return the ids actually deleted."""

    @abstractmethod
    async def query(
        self,
        user_id: str,
        *,
        namespace: str = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
        order_by: Literal[
            "timestamp", "-timestamp", "importance", "-importance", "created_at", "-created_at"
        ] = "timestamp",
        limit: int | None = None,
        offset: int = 0,
        with_embeddings: bool = False,
    ) -> list[Record]:
        """Records matching the filters, ordered, paginated."""

    @abstractmethod
    async def count(
        self,
        user_id: str | None,
        *,
        namespace: str | None = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
    ) -> int:
        """Number of matching records (``user_id=None`` counts all users: admin/tests only)."""

    @abstractmethod
    async def keyword_search(
        self,
        user_id: str,
        text: str,
        *,
        namespace: str = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
        limit: int = 20,
    ) -> list[tuple[str, float]]:
        """Full-text (BM25-like) search: ``(memory_id, score)``, best first, higher is better.

        The text is user data, never query syntax: operators in it are neutralised.
        """

    @abstractmethod
    async def touch(self, user_id: str, ids: Sequence[str], *, times: int = 1) -> None:
        """Record ``times`` accesses of each of ``ids``: ``access_count += times``, ``last_accessed`` = now."""

    @abstractmethod
    async def delete_where(
        self,
        user_id: str,
        *,
        namespace: str | None = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
    ) -> list[str]:
        """Delete every matching record of this user (``namespace=None``: all namespaces)."""

    @abstractmethod
    async def users(self) -> list[str]:
        """Every user id with at least one record."""

    @abstractmethod
    async def outbox_pending(self, limit: int = 1000) -> list[OutboxOp]:
        """Oldest unapplied index operations."""

    @abstractmethod
    async def outbox_ack(self, seqs: Sequence[int]) -> None:
        """Mark index operations as applied."""

    @contextlib.asynccontextmanager
    async def outbox_claim(self, limit: int = 1000) -> AsyncIterator[list[OutboxOp]]:
        """Claim pending operations to apply; they are acknowledged when the block exits cleanly.

        ``async with store.outbox_claim(n) as ops: apply(ops)``. An exception inside the block
        leaves them pending. This default (read, then acknowledge) suits a store that one
        process drains; a store shared by processes overrides it so that concurrent drainers
        never hold the same operation, nor a memory's later operation before its earlier one.
        """
        ops = await self.outbox_pending(limit)
        yield ops
        if ops:
            await self.outbox_ack([op.seq for op in ops])

    @abstractmethod
    async def iter_embedded(
        self, space: str, *, batch_size: int = 1000, after_seq: int = 0, user_id: str | None = None
    ) -> list[tuple[int, Record]]:
        """Records (of ``user_id``, or all) with an embedding in ``space`` after ``after_seq`` (to rebuild an index)."""


@dataclass
class VectorPoint:
    """One vector with the payload used for filtering."""

    id: str
    vector: np.ndarray
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class VectorFilter:
    """Payload filter: equality (a list means any-of) and inclusive numeric ranges.

    ``user_id`` is mandatory so that no search can cross users.
    """

    user_id: str
    equals: dict[str, str | int | bool | list[str]] = field(default_factory=dict)
    ranges: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    ids: list[str] | None = None


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


#: Payload keys every memory point carries (indexed for filtering).
PAYLOAD_KEYS = ("user_id", "namespace", "memory_type", "session_id", "timestamp", "importance")


class VectorIndex(ABC):
    """A derived, rebuildable index of one vector space (one embedding model and dimension)."""

    dim: int
    space: str

    @abstractmethod
    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (idempotent)."""

    @abstractmethod
    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id (absent ids are ignored)."""

    @abstractmethod
    async def delete_user(self, user_id: str) -> None:
        """Delete every point of a user."""

    @abstractmethod
    async def search(self, vector: np.ndarray, flt: VectorFilter, limit: int) -> list[tuple[str, float]]:
        """``(id, similarity)`` best first; cosine similarity, higher is better."""

    @abstractmethod
    async def count(self, user_id: str | None = None) -> int:
        """Points in the index (of one user, or all)."""

    @abstractmethod
    async def ids(self, user_id: str | None = None) -> set[str]:
        """All point ids (of one user, or all): consistency checks and repair."""

    @abstractmethod
    async def close(self) -> None:
        """Flush and release the index."""
