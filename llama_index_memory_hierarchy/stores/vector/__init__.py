"""Vector index backends: embedded qdrant-edge, or any LlamaIndex vector store (Qdrant).

``open_vector_index(config, space, dim)`` picks the backend from the config;
``record_to_point`` turns a record into the point every backend stores.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.base import Record, VectorIndex, VectorPoint
from llama_index_memory_hierarchy.stores.vector.edge import EdgeVectorIndex
from llama_index_memory_hierarchy.stores.vector.llama import LlamaVectorIndex, qdrant_vector_index
from llama_index_memory_hierarchy.types import MemoryItem

__all__ = [
    "EdgeVectorIndex",
    "LlamaVectorIndex",
    "aopen_vector_index",
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


def open_vector_index(config: MemoryConfig, space: str, dim: int) -> VectorIndex:
    """The vector index of one space, as the config selects.

    * ``qdrant_url`` set: Qdrant server / cloud (``qdrant_api_key``);
    * else ``qdrant_path`` set, or ``vector_backend == "qdrant"``: qdrant-client local mode in
      ``qdrant_path`` (default ``<persist_dir>/qdrant``);
    * else: embedded qdrant-edge in ``<persist_dir>/vectors/<space>``.

    Embedded indexes hold a folder lock: open each space once per process and share it.
    """
    if config.qdrant_url:
        return qdrant_vector_index(
            space, dim, url=config.qdrant_url, api_key=config.qdrant_api_key, collection_prefix=config.collection_prefix
        )
    if config.qdrant_path or config.vector_backend == "qdrant":
        path = config.qdrant_path or str(Path(config.persist_dir).expanduser() / "qdrant")
        return qdrant_vector_index(space, dim, path=path, collection_prefix=config.collection_prefix)
    return EdgeVectorIndex(config.persist_dir, space, dim)


async def aopen_vector_index(config: MemoryConfig, space: str, dim: int) -> VectorIndex:
    """:func:`open_vector_index` in a worker thread (opening does blocking file or network I/O)."""
    return await asyncio.to_thread(open_vector_index, config, space, dim)
