"""``LlamaVectorIndex``: a :class:`VectorIndex` over any LlamaIndex vector store.

Points become ``TextNode``s (empty text: the record store keeps the content) whose
metadata is the payload; filters become ``MetadataFilters`` (EQ, IN, GTE, LTE) and id
filters ``VectorStoreQuery.node_ids``. The store must compare vectors by cosine similarity.

:func:`qdrant_vector_index` builds one on ``QdrantVectorStore`` (server, Qdrant Cloud, or
qdrant-client local mode), creating the collection and its payload indexes; for Qdrant,
``count``/``ids``/``delete_user`` go straight to the client (exact, paginated, filtered).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from llama_index_memory_hierarchy.config import redact_url
from llama_index_memory_hierarchy.errors import (
    EmbeddingDimensionError,
    MemoryValidationError,
    StoreError,
    StoreLockedError,
)
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
from llama_index_memory_hierarchy.types import validate_identifier

logger = logging.getLogger(__name__)

#: Nodes per ``add`` call.
ADD_CHUNK = 256
#: Tries of a search the store fails (a server racing concurrent writes: Chroma answers "Error finding id"), with
#: a short backoff between them. A search has no effect, so trying it again is safe; writes are not retried here.
READ_ATTEMPTS = 3
READ_BACKOFF_S = 0.05
#: Page size when listing ids through the Qdrant client.
SCROLL_PAGE = 2_000
#: Name of the dense vector in collections this package creates (LlamaIndex's default).
DENSE_VECTOR_NAME = "text-dense"
_PREFIX = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


def _overrides(store: Any, name: str) -> bool:
    """Whether the store's class implements ``name`` itself (not the base's sync fallback)."""
    return getattr(type(store), name, None) is not getattr(BasePydanticVectorStore, name, None)


def _user_filter(user_id: str) -> MetadataFilter:
    return MetadataFilter(key="user_id", value=user_id, operator=FilterOperator.EQ)


def _metadata_filters(flt: PreparedFilter) -> MetadataFilters:
    filters: list[MetadataFilter] = [_user_filter(flt.user_id)]
    for key, value in flt.equals.items():
        if isinstance(value, list):
            filters.append(MetadataFilter(key=key, value=value, operator=FilterOperator.IN))
        else:
            filters.append(MetadataFilter(key=key, value=value, operator=FilterOperator.EQ))
    for key, (low, high) in flt.ranges.items():
        if low is not None:
            filters.append(MetadataFilter(key=key, value=low, operator=FilterOperator.GTE))
        if high is not None:
            filters.append(MetadataFilter(key=key, value=high, operator=FilterOperator.LTE))
    return MetadataFilters(filters=filters, condition=FilterCondition.AND)


class LlamaVectorIndex(VectorIndex):
    """Adapts a LlamaIndex ``BasePydanticVectorStore`` to :class:`VectorIndex`.

    Async methods of the store (``async_add``, ``aquery``, ``adelete_nodes``) are used when
    its class implements them (and, for Qdrant, when it has an async client); otherwise the
    sync methods run in a worker thread, one call at a time (many stores, such as
    qdrant-client local mode, are not thread-safe).

    Requirements on the store: cosine similarity, ``add`` replacing a node with an existing id,
    metadata filters with EQ/IN/GTE/LTE, ``delete_nodes(node_ids=...)`` and
    ``delete_nodes(filters=...)``; ``count``/``ids`` use ``get_nodes`` unless the store is a
    ``QdrantVectorStore`` (then the client is used) or offers ``point_ids(filters)`` /
    ``point_count(filters)``. A plain ``ChromaVectorStore`` is adapted on the way in, by
    ``as_vector_index`` (see ``chroma.py``); a store whose class sets ``lmh_thread_safe = True`` is called from several
    threads at once, any other one call at a time.
    Search results are re-checked against ``user_id`` (and the id filter) when the store
    returns nodes, so a store that ignores a filter cannot leak another user's points.
    """

    def __init__(
        self,
        vector_store: BasePydanticVectorStore,
        space: str,
        dim: int,
        *,
        use_async: bool | None = None,
        on_close: Callable[[], Any] | None = None,
    ) -> None:
        if not isinstance(vector_store, BasePydanticVectorStore):
            raise MemoryValidationError(
                "vector_store", f"expected a LlamaIndex BasePydanticVectorStore, got {type(vector_store).__name__}"
            )
        self.store = vector_store
        self.space = validate_space(space)
        self.dim = validate_dim(dim)
        self._qdrant = _qdrant_parts(vector_store)
        if use_async is None:
            use_async = not (self._qdrant is not None and self._qdrant[1] is None)
        self._use_async = use_async
        self._on_close = on_close
        self._sync_lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"LlamaVectorIndex(store={type(self.store).__name__}, space={self.space!r}, dim={self.dim})"

    # --- plumbing -------------------------------------------------------------------------

    def _require(self) -> None:
        if self._closed:
            raise StoreError(f"vector index {self!r} is closed")

    def _locked(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if getattr(self.store, "lmh_thread_safe", False):
            return func(*args, **kwargs)
        with self._sync_lock:
            return func(*args, **kwargs)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``await store.a<name>`` when implemented, else the sync twin in a thread."""
        self._require()
        async_name = {
            "add": "async_add",
            "query": "aquery",
            "delete_nodes": "adelete_nodes",
            "get_nodes": "aget_nodes",
        }[name]
        try:
            if self._use_async and _overrides(self.store, async_name):
                return await getattr(self.store, async_name)(*args, **kwargs)
            return await asyncio.to_thread(self._locked, getattr(self.store, name), *args, **kwargs)
        except NotImplementedError as exc:
            raise StoreError(f"{type(self.store).__name__} does not implement {name}, which {self!r} needs") from exc
        except (MemoryValidationError, StoreError):
            raise
        except Exception as exc:
            raise StoreError(f"vector store {type(self.store).__name__}: {name} failed: {exc}") from exc

    async def _read(self, name: str, *args: Any) -> Any:
        """:meth:`_call` of a read, tried again (:data:`READ_ATTEMPTS`) when the store itself failed."""
        for attempt in range(1, READ_ATTEMPTS + 1):
            try:
                return await self._call(name, *args)
            except StoreError as exc:
                cause = exc.__cause__
                if attempt == READ_ATTEMPTS or cause is None or isinstance(cause, NotImplementedError):
                    raise  # the last try, a closed index, or a store that cannot do it
                logger.warning("%r: %s failed (%s); trying again", self, name, cause)
                await asyncio.sleep(READ_BACKOFF_S * 4 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _qdrant_call(self, method: str, **kwargs: Any) -> Any:
        """Call the Qdrant client directly (async client if present, else sync in a thread)."""
        self._require()
        client, aclient, collection = self._qdrant  # type: ignore[misc]
        try:
            if self._use_async and aclient is not None:
                return await getattr(aclient, method)(collection_name=collection, **kwargs)
            return await asyncio.to_thread(self._locked, getattr(client, method), collection_name=collection, **kwargs)
        except Exception as exc:
            raise StoreError(f"Qdrant collection {collection!r}: {method} failed: {exc}") from exc

    # --- writes ---------------------------------------------------------------------------

    @staticmethod
    def _node(point: PreparedPoint) -> TextNode:
        return TextNode(id_=point.id, text="", embedding=point.vector.tolist(), metadata=point.payload)

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (the store must treat an existing node id as a replace)."""
        prepared = prepare_points(points, self.dim)
        for part in batches(prepared, ADD_CHUNK):
            await self._call("add", [self._node(p) for p in part])

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id (absent ids are ignored)."""
        wanted = prepare_ids(ids)
        for part in batches(wanted, ADD_CHUNK * 8):
            await self._call("delete_nodes", node_ids=list(part))

    async def delete_user(self, user_id: str) -> None:
        """Delete every point of a user."""
        user_id = validate_identifier(user_id, "user_id")
        if self._qdrant is not None:
            from qdrant_client import models

            await self._qdrant_call("delete", points_selector=models.FilterSelector(filter=_qdrant_user(user_id)))
            return
        await self._call("delete_nodes", filters=MetadataFilters(filters=[_user_filter(user_id)]))

    # --- reads ----------------------------------------------------------------------------

    async def search(self, vector: np.ndarray, flt: VectorFilter, limit: int) -> list[tuple[str, float]]:
        """``(id, cosine similarity)`` best first, always restricted to ``flt.user_id``."""
        query_vector = check_vector(vector, self.dim, "vector")
        prepared = prepare_filter(flt)
        limit = check_limit(limit)
        if limit == 0 or prepared.empty:
            return []
        query = VectorStoreQuery(
            query_embedding=query_vector.tolist(),
            similarity_top_k=limit,
            filters=_metadata_filters(prepared),
            node_ids=prepared.ids,
        )
        result = await self._read("query", query)
        ids = list(result.ids or [])
        scores = list(result.similarities or [])
        if len(scores) != len(ids):
            raise StoreError(
                f"vector store {type(self.store).__name__} returned {len(ids)} ids but {len(scores)} scores"
            )
        allowed = set(prepared.ids) if prepared.ids is not None else None
        nodes = list(result.nodes or [])
        hits: list[tuple[str, float]] = []
        for i, (node_id, score) in enumerate(zip(ids, scores, strict=True)):
            owner = nodes[i].metadata.get("user_id", prepared.user_id) if i < len(nodes) else prepared.user_id
            if owner != prepared.user_id:
                logger.warning("%s returned a point of another user; the store ignored a filter", self)
                continue
            if allowed is not None and str(node_id) not in allowed:
                continue
            hits.append((str(node_id), float(score)))
        return hits

    async def count(self, user_id: str | None = None) -> int:
        """Points in the index (of one user, or all)."""
        if self._qdrant is not None:
            result = await self._qdrant_call("count", count_filter=_qdrant_scope(user_id), exact=True)
            return int(result.count)
        if callable(getattr(self.store, "point_count", None)):
            return int(await self._listing("point_count", user_id))
        return len(await self.ids(user_id))

    async def _listing(self, method: str, user_id: str | None) -> Any:
        """``store.point_ids``/``store.point_count`` (stores that list without fetching nodes)."""
        self._require()
        filters = (
            None
            if user_id is None
            else MetadataFilters(filters=[_user_filter(validate_identifier(user_id, "user_id"))])
        )
        try:
            return await asyncio.to_thread(self._locked, getattr(self.store, method), filters)
        except Exception as exc:
            raise StoreError(f"vector store {type(self.store).__name__}: {method} failed: {exc}") from exc

    async def ids(self, user_id: str | None = None) -> set[str]:
        """All point ids (of one user, or all)."""
        if self._qdrant is None and callable(getattr(self.store, "point_ids", None)):
            return {str(i) for i in await self._listing("point_ids", user_id)}
        if self._qdrant is None:
            filters = (
                None
                if user_id is None
                else MetadataFilters(filters=[_user_filter(validate_identifier(user_id, "user_id"))])
            )
            nodes = await self._call("get_nodes", filters=filters)
            return {str(node.node_id) for node in nodes}
        scope = _qdrant_scope(user_id)
        found: set[str] = set()
        offset: Any = None
        while True:
            records, offset = await self._qdrant_call(
                "scroll", scroll_filter=scope, limit=SCROLL_PAGE, offset=offset, with_payload=False, with_vectors=False
            )
            found.update(str(record.id) for record in records)
            if offset is None or not records:
                return found

    async def close(self) -> None:
        """Release the store (closes clients this package created). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            result = self._on_close()
            if asyncio.iscoroutine(result):
                await result


# --------------------------------------------------------------------------------------
# Qdrant
# --------------------------------------------------------------------------------------


def _qdrant_parts(store: Any) -> tuple[Any, Any, str] | None:
    """``(client, aclient, collection)`` when the store is a ``QdrantVectorStore``."""
    if type(store).__name__ != "QdrantVectorStore" or not hasattr(store, "collection_name"):
        return None
    return getattr(store, "_client", None), getattr(store, "_aclient", None), store.collection_name


def _qdrant_user(user_id: str) -> Any:
    from qdrant_client import models

    return models.Filter(must=[models.FieldCondition(key="user_id", match=models.MatchValue(value=user_id))])


def _qdrant_scope(user_id: str | None) -> Any:
    return None if user_id is None else _qdrant_user(validate_identifier(user_id, "user_id"))


def _is_local(client: Any) -> bool:
    return type(getattr(client, "_client", None)).__name__ == "QdrantLocal"


class _LocalClients:
    """One qdrant-client local-mode client per folder in this process, shared and ref-counted.

    Local mode locks its folder; opening a second client on it (for a second vector space,
    or a second index object) would fail, so indexes on one folder share one client.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, list[Any]] = {}

    def acquire(self, path: str | Path) -> tuple[Any, Callable[[], None]]:
        from qdrant_client import QdrantClient

        key = str(Path(path).expanduser().resolve())
        with self._lock:
            entry = self._clients.get(key)
            if entry is None:
                Path(key).mkdir(parents=True, exist_ok=True)
                try:
                    client = QdrantClient(path=key)
                except RuntimeError as exc:
                    if "already accessed" in str(exc):
                        raise StoreLockedError(
                            f"Qdrant local folder {key} is used by another process; local mode serves one process"
                        ) from exc
                    raise StoreError(f"Qdrant local folder {key} could not be opened: {exc}") from exc
                except Exception as exc:
                    raise StoreError(f"Qdrant local folder {key} could not be opened (corrupt?): {exc}") from exc
                entry = self._clients[key] = [client, 0]
            entry[1] += 1
        released = threading.Event()

        def release() -> None:
            if released.is_set():
                return
            released.set()
            with self._lock:
                entry[1] -= 1
                if entry[1] <= 0 and self._clients.get(key) is entry:
                    del self._clients[key]
                    entry[0].close()

        return entry[0], release


_LOCAL_CLIENTS = _LocalClients()


def _collection_dim(info: Any) -> int | None:
    vectors = info.config.params.vectors
    if isinstance(vectors, dict):
        params = (
            vectors.get(DENSE_VECTOR_NAME) or vectors.get("") or (next(iter(vectors.values())) if vectors else None)
        )
    else:
        params = vectors
    return None if params is None else int(params.size)


def _ensure_collection(client: Any, name: str, dim: int, hnsw_m: int, hnsw_payload_m: int) -> None:
    """Create the collection (and payload indexes) or check an existing one's dimension."""
    from qdrant_client import models

    if client.collection_exists(name):
        stored = _collection_dim(client.get_collection(name))
        if stored is not None and stored != dim:
            raise EmbeddingDimensionError(
                f"Qdrant collection {name!r} holds {stored}-d vectors but the embedding model gives {dim}-d "
                "vectors; use the model it was built with, or another space / collection_prefix"
            )
        return
    client.create_collection(
        collection_name=name,
        vectors_config={DENSE_VECTOR_NAME: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
        hnsw_config=models.HnswConfigDiff(m=hnsw_m, payload_m=hnsw_payload_m),
    )
    if _is_local(client):
        return  # local mode ignores payload indexes (and warns)
    schemas: dict[str, Any] = {key: models.PayloadSchemaType.KEYWORD for key in KEYWORD_KEYS}
    schemas["user_id"] = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
    schemas.update({key: models.PayloadSchemaType.FLOAT for key in FLOAT_KEYS})
    for key, schema in schemas.items():
        try:
            client.create_payload_index(collection_name=name, field_name=key, field_schema=schema, wait=True)
        except Exception as exc:  # older servers may reject newer index options: filtering still works
            logger.warning("Qdrant collection %r: could not create payload index on %r: %s", name, key, exc)


def qdrant_vector_index(
    space: str,
    dim: int,
    url: str | None = None,
    api_key: str | None = None,
    path: str | Path | None = None,
    client: Any = None,
    collection_prefix: str = "lmh",
    *,
    aclient: Any = None,
    hnsw_m: int = 0,
    hnsw_payload_m: int = 16,
) -> LlamaVectorIndex:
    """A :class:`LlamaVectorIndex` on ``QdrantVectorStore``, collection ``<prefix>_<space>``.

    Give exactly one of ``url`` (server or Qdrant Cloud, with ``api_key``), ``path``
    (qdrant-client local mode: one folder, one process, brute-force search; for tests and
    small data) or ``client`` (an existing ``QdrantClient``; pass ``aclient`` too to use the
    async API). The collection is created with cosine distance, multi-tenant HNSW and
    payload indexes; an existing one with another dimension raises
    :class:`EmbeddingDimensionError`.
    """
    space = validate_space(space)
    dim = validate_dim(dim)
    if not isinstance(collection_prefix, str) or not _PREFIX.fullmatch(collection_prefix):
        raise MemoryValidationError(
            "collection_prefix", f"must be 1-64 letters, digits, _ or -, got {collection_prefix!r}"
        )
    given = [name for name, value in (("url", url), ("path", path), ("client", client)) if value is not None]
    if len(given) != 1:
        raise MemoryValidationError(
            "qdrant_url", f"give exactly one of url, path or client for a Qdrant vector index (got {given or 'none'})"
        )
    try:
        from llama_index.vector_stores.qdrant import QdrantVectorStore
    except ImportError as exc:
        raise StoreError(
            f"a Qdrant vector store needs the 'qdrant' extra ({exc.name or exc} is missing): "
            "pip install 'llama-index-memory-hierarchy[qdrant]'"
        ) from exc

    name = f"{collection_prefix}_{space}"
    on_close: Callable[[], Any] | None = None
    release_on_error: Callable[[], Any] | None = None
    where = f"Qdrant collection {name!r}"
    if path is not None:
        client, on_close = _LOCAL_CLIENTS.acquire(path)
        release_on_error = on_close
        aclient = None
        where = f"{where} in local folder {Path(path).expanduser().resolve()}"
    elif url is not None:
        from qdrant_client import AsyncQdrantClient, QdrantClient

        sync_client = QdrantClient(url=url, api_key=api_key)
        async_client = AsyncQdrantClient(url=url, api_key=api_key)
        client, aclient = sync_client, async_client
        where = f"{where} at {redact_url(url)}"
        release_on_error = sync_client.close  # the async client has opened no connection yet

        async def close_clients() -> None:
            sync_client.close()
            await async_client.close()

        on_close = close_clients

    try:
        _ensure_collection(client, name, dim, hnsw_m, hnsw_payload_m)
        store = QdrantVectorStore(collection_name=name, client=client, aclient=aclient, index_doc_id=False)
    except (EmbeddingDimensionError, MemoryValidationError):
        if release_on_error is not None:
            release_on_error()
        raise
    except Exception as exc:
        if release_on_error is not None:
            release_on_error()
        raise StoreError(f"{where} could not be opened: {exc}") from exc
    return LlamaVectorIndex(store, space, dim, use_async=aclient is not None, on_close=on_close)
