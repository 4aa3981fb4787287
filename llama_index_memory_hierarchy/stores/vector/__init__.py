"""Vector index backends: embedded qdrant-edge, or any LlamaIndex vector store (Qdrant, Chroma, ...).

``open_vector_index(config, space, dim)`` picks the backend from the config;
``as_vector_index`` adapts a store (or a factory's result) you supply;
``record_to_point`` turns a record into the point every backend stores.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.stores.base import Record, VectorIndex, VectorPoint
from llama_index_memory_hierarchy.stores.vector.edge import EdgeVectorIndex
from llama_index_memory_hierarchy.stores.vector.llama import LlamaVectorIndex, qdrant_vector_index
from llama_index_memory_hierarchy.types import MemoryItem

__all__ = [
    "EdgeVectorIndex",
    "LlamaVectorIndex",
    "VectorStoreFactory",
    "aopen_vector_index",
    "as_vector_index",
    "chroma_vector_index",
    "load_factory",
    "memory_payload",
    "open_vector_index",
    "qdrant_vector_index",
    "record_to_point",
]


def memory_payload(item: MemoryItem, namespace: str) -> dict[str, object]:
    """The filterable payload of a memory: the indexed keys of ``PAYLOAD_KEYS``.

    ``timestamp`` is epoch seconds (float) so that time filters are numeric ranges;
    ``session_id`` is left out when None.
    """
    payload: dict[str, object] = {
        "user_id": item.user_id,
        "namespace": namespace,
        "memory_type": item.memory_type.value,
        "timestamp": item.timestamp.timestamp(),
        "importance": float(item.importance),
    }
    if item.session_id is not None:
        payload["session_id"] = item.session_id
    return payload


def record_to_point(record: Record) -> VectorPoint:
    """The vector point of a record (it must carry an embedding)."""
    if record.embedding is None:
        raise MemoryValidationError("embedding", f"record {record.item.id} has no embedding to index")
    return VectorPoint(
        id=record.item.id, vector=record.embedding, payload=memory_payload(record.item, record.namespace)
    )


#: Builds the store of one vector space: ``factory(space, dim)`` -> LlamaIndex vector store or VectorIndex.
VectorStoreFactory = Callable[[str, int], Any]


def chroma_vector_index(space: str, dim: int, **kwargs: Any) -> LlamaVectorIndex:
    """:func:`.chroma.chroma_vector_index` (imported on use: ``chromadb`` is an optional extra)."""
    from llama_index_memory_hierarchy.stores.vector.chroma import chroma_vector_index as build

    return build(space, dim, **kwargs)


def as_vector_index(store: Any, space: str, dim: int) -> VectorIndex:
    """A :class:`VectorIndex` of a supplied store: a VectorIndex as is, a LlamaIndex store adapted."""
    from llama_index.core.vector_stores.types import BasePydanticVectorStore

    if isinstance(store, VectorIndex):
        return store
    if isinstance(store, BasePydanticVectorStore):
        if type(store).__name__ == "ChromaVectorStore":  # fix its add/score/ids semantics (see chroma.py)
            from llama_index_memory_hierarchy.stores.vector.chroma import adapt_chroma_store  # an optional extra

            store = adapt_chroma_store(store)
        return LlamaVectorIndex(store, space, dim)
    raise MemoryValidationError(
        "vector_store", f"expected a LlamaIndex BasePydanticVectorStore or a VectorIndex, got {type(store).__name__}"
    )


def load_factory(path: str) -> VectorStoreFactory:
    """The callable named by ``'module:attribute'`` (``vector_store_factory`` in the config)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise MemoryValidationError("vector_store_factory", f"must be 'module:callable', got {path!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise MemoryValidationError("vector_store_factory", f"cannot import {path!r}: {exc}") from None
    if not callable(target):
        raise MemoryValidationError("vector_store_factory", f"{path!r} is not callable")
    return target


def open_vector_index(config: MemoryConfig, space: str, dim: int) -> VectorIndex:
    """The vector index of one space, as the config selects (first that applies):

    * ``vector_store_factory``: ``factory(space, dim)`` builds any LlamaIndex vector store;
    * ``vector_store_url`` (``chroma://host:port``): a Chroma server (``vector_store_api_key``);
    * ``qdrant_url``: Qdrant server / cloud (``qdrant_api_key``);
    * ``qdrant_path`` set, or ``vector_backend == "qdrant"``: qdrant-client local mode in
      ``qdrant_path`` (default ``<persist_dir>/qdrant``);
    * else: embedded qdrant-edge in ``<persist_dir>/vectors/<space>``.

    Embedded indexes hold a folder lock: open each space once per process and share it.
    """
    backend = config.resolved_vector_backend
    if backend == "factory":
        made = load_factory(config.vector_store_factory or "")(space, dim)
        if made is None:
            raise StoreError(f"vector_store_factory {config.vector_store_factory!r} returned None for {space!r}")
        return as_vector_index(made, space, dim)
    if backend == "chroma":
        return chroma_vector_index(
            space,
            dim,
            url=config.vector_store_url,
            api_key=config.vector_store_api_key,
            collection_prefix=config.collection_prefix,
        )
    if backend == "qdrant":
        return qdrant_vector_index(
            space, dim, url=config.qdrant_url, api_key=config.qdrant_api_key, collection_prefix=config.collection_prefix
        )
    if backend == "qdrant-local":
        path = config.qdrant_path or str(Path(config.persist_dir).expanduser() / "qdrant")
        return qdrant_vector_index(space, dim, path=path, collection_prefix=config.collection_prefix)
    return EdgeVectorIndex(config.persist_dir, space, dim)


async def aopen_vector_index(config: MemoryConfig, space: str, dim: int) -> VectorIndex:
    """:func:`open_vector_index` in a worker thread (opening does blocking file or network I/O)."""
    return await asyncio.to_thread(open_vector_index, config, space, dim)
