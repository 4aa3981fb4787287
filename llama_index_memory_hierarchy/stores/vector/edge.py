"""``EdgeVectorIndex``: the embedded vector index, on qdrant-edge (``qdrant-edge-py``).

One shard folder per vector space, ``<persist_dir>/vectors/<space>``; cosine distance;
payload indexes on the filter fields; HNSW built per user (see :class:`EdgeVectorIndex`).
A rebuild is written beside the folder (``folder=``) and switched in by renames (``edge_rebuild``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, StoreError, StoreLockedError
from llama_index_memory_hierarchy.stores.base import VectorFilter, VectorIndex, VectorPoint, batches
from llama_index_memory_hierarchy.stores.vector._common import (
    FLOAT_KEYS,
    KEYWORD_KEYS,
    PreparedFilter,
    PreparedPoint,
    check_limit,
    check_vector,
    prepare_filter,
    prepare_ids,
    prepare_points,
    validate_dim,
    validate_space,
)
from llama_index_memory_hierarchy.stores.vector.edge_rebuild import recover_rebuild
from llama_index_memory_hierarchy.types import validate_identifier

logger = logging.getLogger(__name__)

#: Points per ``update`` call: bounds one WAL record (0.4 MB at 384-d) and the time the
#: binding holds the GIL (about 35 ms).
UPSERT_CHUNK = 256
#: Page size when listing ids.
SCROLL_PAGE = 10_000
_CONFIG_FILE = "edge_config.json"
#: How to recover a damaged folder (it is derived: the record store can rebuild it).
REBUILD_HINT = (
    "the folder is derived from the record store: rebuild it with `lmh reindex` "
    "(llama_index_memory_hierarchy.ops.rebuild.rebuild_indexes), or delete it and it is rebuilt on the next open"
)


class EdgeVectorIndex(VectorIndex):
    """A :class:`VectorIndex` on an embedded qdrant-edge shard.

    Layout and indexes: the shard lives in ``<persist_dir>/vectors/<space>`` with one
    unnamed dense vector (cosine). Keyword payload indexes cover ``user_id`` (marked as the
    tenant key), ``namespace``, ``memory_type`` and ``session_id``; float indexes cover
    ``timestamp`` and ``importance``. HNSW is multi-tenant by default (``hnsw_m=0``,
    ``hnsw_payload_m=16``): a graph per user, because every search is filtered by user.

    Durability: every ``update`` goes to the shard's write-ahead log first, which survives a
    crash or kill of the process even without ``flush`` (the WAL is replayed on load), but
    the WAL is not fsynced. With ``flush_on_write`` (default) each ``upsert``/``delete`` call
    also flushes segments to disk so that an acknowledged write survives an OS crash or power
    loss too (the record store's outbox is acknowledged once ``upsert`` returns). A flush
    costs a roughly constant 0.1-0.4 s per call on an ordinary disk, so write in batches;
    with ``flush_on_write=False`` call :meth:`flush` on your own schedule.

    The GIL: qdrant-edge-py 0.9 holds the GIL inside ``update``, ``flush`` and ``optimize``,
    so while they run every Python thread of the process, the event loop included, waits
    (``asyncio.to_thread`` does not help). Upserts are therefore split into calls of
    ``UPSERT_CHUNK`` points (tens of milliseconds each) so other work runs in between.

    Optimisation: qdrant-edge runs no background optimiser; HNSW graphs are built, segments
    merged and deleted points vacuumed only inside :meth:`optimize` (about 1-3 s per 20k
    384-d points, with the whole process paused, see above). The index calls it after every
    ``optimize_every`` written points (``None``: never; call it from a maintenance job).
    Until then searches are exact over the user's points through the payload index, which
    is fast for per-user subsets (about 0.3 ms at 50k points over 100 users).

    One handle per folder: the shard holds an exclusive lock on its WAL. A second
    ``EdgeShard`` on the same folder, in another process *or in this one*, fails to open
    (the lock is per open file, not per process), which this class reports as
    :class:`StoreLockedError` naming the folder; nothing is corrupted. So within a process
    every user of a space must share one ``EdgeVectorIndex`` object (it is thread-safe:
    writes are serialised, reads run alongside); :meth:`close` releases the lock.
    """

    def __init__(
        self,
        persist_dir: str | Path,
        space: str,
        dim: int,
        *,
        flush_on_write: bool = True,
        optimize_every: int | None = 20_000,
        hnsw_m: int = 0,
        hnsw_payload_m: int = 16,
        hnsw_ef_construct: int = 100,
        full_scan_threshold_kb: int = 10_000,
        search_ef: int | None = None,
        max_search_threads: int | None = None,
        folder: str | Path | None = None,
    ) -> None:
        self.space = validate_space(space)
        self.dim = validate_dim(dim)
        self.path = (Path(persist_dir).expanduser() / "vectors" / self.space).resolve()
        if folder is None:
            recover_rebuild(self.path)  # a rebuild a kill interrupted: finished or undone before the open
        else:  # a rebuild written beside the space's folder (``edge_rebuild``)
            self.path = Path(folder).resolve()
        self.flush_on_write = flush_on_write
        self.optimize_every = optimize_every
        self._hnsw = (hnsw_m, hnsw_ef_construct, full_scan_threshold_kb, hnsw_payload_m)
        self._search_ef = search_ef
        self._max_search_threads = max_search_threads
        self._write_lock = threading.Lock()
        self._since_optimize = 0
        self._closed = False
        self._shard: Any = self._open()

    @classmethod
    async def aopen(cls, persist_dir: str | Path, space: str, dim: int, **options: Any) -> EdgeVectorIndex:
        """Open (or create) in a worker thread: creating a shard and its payload indexes takes about a second."""
        return await asyncio.to_thread(lambda: cls(persist_dir, space, dim, **options))

    # --- opening ------------------------------------------------------------------------

    def _config(self) -> Any:
        import qdrant_edge as qe

        m, ef_construct, full_scan, payload_m = self._hnsw
        return qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine),
            hnsw_config=qe.HnswIndexConfig(
                m=m, ef_construct=ef_construct, full_scan_threshold=full_scan, payload_m=payload_m
            ),
            max_search_threads=self._max_search_threads,
        )

    def _stored_dim(self) -> int | None:
        """Dimension recorded in an existing shard's config, None for a new folder."""
        config_file = self.path / _CONFIG_FILE
        segments = self.path / "segments"
        if not config_file.exists():
            if segments.is_dir() and any(segments.iterdir()):
                raise StoreError(
                    f"vector index folder {self.path} is corrupt: it has segments but no {_CONFIG_FILE}; {REBUILD_HINT}"
                )
            return None
        try:
            stored = json.loads(config_file.read_text(encoding="utf-8"))
            vector = stored["vectors"][""]
            size, distance = int(vector["size"]), vector.get("distance")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"vector index folder {self.path} is corrupt: unreadable {_CONFIG_FILE} ({exc}); {REBUILD_HINT}"
            ) from exc
        if distance != "Cosine":
            raise StoreError(f"vector index folder {self.path} uses {distance} distance, not Cosine")
        return size

    def _open(self) -> Any:
        import qdrant_edge as qe

        stored = self._stored_dim()
        if stored is not None and stored != self.dim:
            raise EmbeddingDimensionError(
                f"vector index folder {self.path} holds {stored}-d vectors but the embedding model gives "
                f"{self.dim}-d vectors; use the model it was built with, or a new space (folder)"
            )
        try:
            if stored is None:
                self.path.mkdir(parents=True, exist_ok=True)
                shard = qe.EdgeShard.create(str(self.path), self._config())
            else:
                shard = qe.EdgeShard.load(str(self.path))
        except Exception as exc:
            raise self._open_error(exc) from exc
        try:
            self._ensure_payload_indexes(shard)
        except Exception as exc:
            shard.close()
            raise StoreError(f"vector index folder {self.path}: could not create payload indexes: {exc}") from exc
        return shard

    def _open_error(self, exc: Exception) -> StoreError:
        text = str(exc)
        if "WouldBlock" in text or "temporarily unavailable" in text:
            return StoreLockedError(
                f"vector index folder {self.path} is already open (in another process, or by another "
                "EdgeVectorIndex in this process); share one index object per folder"
            )
        return StoreError(
            f"vector index folder {self.path} could not be opened (corrupt or unreadable): {text}; {REBUILD_HINT}"
        )

    def _ensure_payload_indexes(self, shard: Any) -> None:
        import qdrant_edge as qe

        existing = set(shard.info().payload_schema)
        for key in KEYWORD_KEYS:
            if key not in existing:
                params = (
                    qe.KeywordIndexParams(is_tenant=True)
                    if key == "user_id"
                    else qe.KeywordIndexParams(enable_hnsw=False)
                )
                shard.update(qe.UpdateOperation.create_field_index(key, params))
        for key in FLOAT_KEYS:
            if key not in existing:
                shard.update(qe.UpdateOperation.create_field_index(key, qe.FloatIndexParams(enable_hnsw=False)))

    def _require(self) -> Any:
        if self._closed:
            raise StoreError(f"vector index {self.path} is closed")
        return self._shard

    # --- filters -------------------------------------------------------------------------

    @staticmethod
    def _user_condition(user_id: str) -> Any:
        import qdrant_edge as qe

        return qe.FieldCondition(key="user_id", match=qe.MatchValue(user_id))

    @classmethod
    def _edge_filter(cls, flt: PreparedFilter) -> Any:
        import qdrant_edge as qe

        must: list[Any] = [cls._user_condition(flt.user_id)]
        for key, value in flt.equals.items():
            match = qe.MatchAny(value) if isinstance(value, list) else qe.MatchValue(value)
            must.append(qe.FieldCondition(key=key, match=match))
        for key, (low, high) in flt.ranges.items():
            must.append(qe.FieldCondition(key=key, range=qe.RangeFloat(gte=low, lte=high)))
        if flt.ids is not None:
            must.append(qe.HasIdCondition(set(flt.ids)))
        return qe.Filter(must=must)

    # --- writes --------------------------------------------------------------------------

    def _after_write(self, shard: Any, written: int) -> None:
        """Flush (durability) and, every ``optimize_every`` points, optimise. Holds the write lock."""
        if self.flush_on_write:
            shard.flush()
        self._since_optimize += written
        if self.optimize_every and self._since_optimize >= self.optimize_every:
            self._since_optimize = 0
            shard.optimize()

    def _upsert_sync(self, points: list[PreparedPoint]) -> None:
        import qdrant_edge as qe

        with self._write_lock:
            shard = self._require()
            try:
                for part in batches(points, UPSERT_CHUNK):
                    batch = [qe.Point(p.id, p.vector, p.payload) for p in part]
                    shard.update(qe.UpdateOperation.upsert_points(batch))
                self._after_write(shard, len(points))
            except Exception as exc:
                raise StoreError(
                    f"vector index {self.path}: upsert failed: {exc}; if it is damaged, {REBUILD_HINT}"
                ) from exc

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (idempotent); flushed before returning."""
        prepared = prepare_points(points, self.dim)
        if prepared:
            await asyncio.to_thread(self._upsert_sync, prepared)

    def _delete_sync(self, operation: Any) -> None:
        with self._write_lock:
            shard = self._require()
            try:
                shard.update(operation)
                self._after_write(shard, 0)
            except Exception as exc:
                raise StoreError(
                    f"vector index {self.path}: delete failed: {exc}; if it is damaged, {REBUILD_HINT}"
                ) from exc

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id (absent ids are ignored)."""
        import qdrant_edge as qe

        wanted = prepare_ids(ids)
        for part in batches(wanted, UPSERT_CHUNK * 16):
            await asyncio.to_thread(self._delete_sync, qe.UpdateOperation.delete_points(list(part)))

    async def delete_user(self, user_id: str) -> None:
        """Delete every point of a user."""
        import qdrant_edge as qe

        user_id = validate_identifier(user_id, "user_id")
        operation = qe.UpdateOperation.delete_points_by_filter(qe.Filter(must=[self._user_condition(user_id)]))
        await asyncio.to_thread(self._delete_sync, operation)

    def _flush_sync(self) -> None:
        with self._write_lock:
            shard = self._require()
            try:
                shard.flush()
            except Exception as exc:
                raise StoreError(f"vector index {self.path}: flush failed: {exc}") from exc

    async def flush(self) -> None:
        """Write every applied change to the segments on disk (see ``flush_on_write``)."""
        await asyncio.to_thread(self._flush_sync)

    def _optimize_sync(self) -> bool:
        with self._write_lock:
            shard = self._require()
            try:
                self._since_optimize = 0
                return bool(shard.optimize())
            except Exception as exc:
                raise StoreError(f"vector index {self.path}: optimize failed: {exc}") from exc

    async def optimize(self) -> bool:
        """Build HNSW graphs and vacuum deleted points now; True if anything changed."""
        return await asyncio.to_thread(self._optimize_sync)

    # --- reads ---------------------------------------------------------------------------

    def _search_sync(self, vector: np.ndarray, flt: PreparedFilter, limit: int) -> list[tuple[str, float]]:
        import qdrant_edge as qe

        shard = self._require()
        params = qe.SearchParams(hnsw_ef=self._search_ef) if self._search_ef else None
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector),
            filter=self._edge_filter(flt),
            with_payload=False,
            with_vector=False,
            params=params,
        )
        try:
            hits = shard.query(request)
        except Exception as exc:
            raise StoreError(
                f"vector index {self.path}: search failed: {exc}; if it is damaged, {REBUILD_HINT}"
            ) from exc
        return [(str(hit.id), float(hit.score)) for hit in hits]

    async def search(self, vector: np.ndarray, flt: VectorFilter, limit: int) -> list[tuple[str, float]]:
        """``(id, cosine similarity)`` best first, always restricted to ``flt.user_id``.

        Runs at once, on the caller's thread: a search takes well under a millisecond and holds the GIL
        (as every call into qdrant-edge-py 0.9 does), so a worker thread would only add the hop and its
        wait for the GIL to it, on the critical path of every ``get()``.
        """
        query = check_vector(vector, self.dim, "vector")
        prepared = prepare_filter(flt)
        limit = check_limit(limit)
        if limit == 0 or prepared.empty:
            return []
        return self._search_sync(query, prepared, limit)

    def _scope(self, user_id: str | None) -> Any:
        import qdrant_edge as qe

        if user_id is None:
            return None
        return qe.Filter(must=[self._user_condition(validate_identifier(user_id, "user_id"))])

    def _count_sync(self, user_id: str | None) -> int:
        import qdrant_edge as qe

        shard = self._require()
        try:
            return int(shard.count(qe.CountRequest(exact=True, filter=self._scope(user_id))))
        except Exception as exc:
            raise StoreError(
                f"vector index {self.path}: count failed: {exc}; if it is damaged, {REBUILD_HINT}"
            ) from exc

    async def count(self, user_id: str | None = None) -> int:
        """Points in the index (of one user, or all)."""
        return await asyncio.to_thread(self._count_sync, user_id)

    def _ids_sync(self, user_id: str | None) -> set[str]:
        import qdrant_edge as qe

        shard = self._require()
        scope = self._scope(user_id)
        found: set[str] = set()
        offset: Any = None
        try:
            while True:
                records, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset, limit=SCROLL_PAGE, filter=scope, with_payload=False, with_vector=False
                    )
                )
                found.update(str(record.id) for record in records)
                if offset is None or not records:
                    return found
        except Exception as exc:
            raise StoreError(
                f"vector index {self.path}: listing ids failed: {exc}; if it is damaged, {REBUILD_HINT}"
            ) from exc

    async def ids(self, user_id: str | None = None) -> set[str]:
        """All point ids (of one user, or all)."""
        return await asyncio.to_thread(self._ids_sync, user_id)

    # --- closing -------------------------------------------------------------------------

    def _close_sync(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._shard.flush()
            finally:
                self._shard.close()

    async def close(self) -> None:
        """Flush and release the shard (and its folder lock). Idempotent."""
        await asyncio.to_thread(self._close_sync)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def __repr__(self) -> str:
        return f"EdgeVectorIndex(path={str(self.path)!r}, dim={self.dim}, closed={self._closed})"
