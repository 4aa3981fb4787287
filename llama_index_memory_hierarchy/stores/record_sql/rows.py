"""Rows of the ``memories`` table: validation, encoding, and conversion to and from :class:`Record`.

Every value a caller gives is validated here before it is bound into SQL; metadata is stored as
canonical JSON (so equal dicts store equal text) and embeddings as little-endian float32 bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import sqlalchemy as sa

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.schema import memories
from llama_index_memory_hierarchy.text import keyword_scope, keyword_text
from llama_index_memory_hierarchy.types import (
    TIME_MAX,
    TIME_MIN,
    MemoryFilter,
    MemoryItem,
    MemoryType,
    validate_identifier,
    validate_memory_id,
)

logger = logging.getLogger(__name__)

#: Stored times (epoch seconds) that read back inside the bounds every time is validated against.
_EPOCH_MIN, _EPOCH_MAX = TIME_MIN.timestamp(), TIME_MAX.timestamp()

#: Content characters in one insert above which keyword tokenizing moves off the event loop.
OFFLOAD_CHARS = 20_000

#: Largest count bound into SQL (SQLite and PostgreSQL BIGINT hold up to 2**63 - 1).
_MAX_SQL_INT = 2**62
#: Ids per ``IN (...)`` list (well under SQLite's and asyncpg's bound-parameter limits).
CHUNK = 500


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: how metadata is stored, so equal dicts store equal text."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _epoch(value: datetime) -> float:
    return value.timestamp()


def stored_time(value: float | None) -> datetime | None:
    """A stored epoch time as an aware UTC datetime; one out of range (a row written before times were bounded,
    e.g. ``datetime.max``, which reads back as year 10000) is clamped with a warning, so that the user's reads, and
    the ``get``/``remove`` of that very row, still work."""
    if value is None:
        return None
    if _EPOCH_MIN <= value <= _EPOCH_MAX:
        return datetime.fromtimestamp(value, tz=timezone.utc)
    clamped = TIME_MIN if value < _EPOCH_MIN else TIME_MAX
    logger.warning("a stored time out of range (%r epoch seconds) reads as %s", value, clamped.isoformat())
    return clamped


def content_hash(content: str) -> str:
    """SHA-256 of the content: what dedupe looks duplicates up by."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def embedding_bytes(value: Any, field: str = "embedding") -> bytes:
    """Validate an embedding (1-D, finite, non-empty) and encode it as little-endian float32."""
    try:
        array = np.asarray(value, dtype="<f4")
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(field, f"must be a 1-D array of numbers: {exc}") from None
    if array.ndim != 1 or array.size == 0:
        raise MemoryValidationError(field, f"must be a non-empty 1-D vector, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise MemoryValidationError(field, "contains NaN or infinite values")
    return array.tobytes()


def _decode_embedding(blob: bytes | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32)


def validate_space(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 255:
        raise MemoryValidationError("space", f"must be a non-empty string of at most 255 characters, got {value!r}")
    return value


def _memory_type(value: Any) -> MemoryType | None:
    if value is None:
        return None
    try:
        return MemoryType(value)
    except ValueError:
        allowed = ", ".join(t.value for t in MemoryType)
        raise MemoryValidationError("memory_type", f"must be one of {allowed}, got {value!r}") from None


def sql_count(value: Any, field: str, minimum: int) -> int:
    """A validated count, clamped to what SQL integers hold (a larger limit or offset means the same)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise MemoryValidationError(field, f"must be an integer >= {minimum}, got {value!r}")
    return min(value, _MAX_SQL_INT)


def validate_ids(ids: Sequence[str] | str, field: str = "ids") -> list[str]:
    """Canonical UUIDs, duplicates removed, first occurrence order kept."""
    if isinstance(ids, str):
        raise MemoryValidationError(field, "must be a sequence of ids, not one string")
    return list(dict.fromkeys(validate_memory_id(i, field) for i in ids))


def row_to_record(row: Any, with_embedding: bool, with_keyword: bool = False) -> Record:
    """A ``memories`` row (mapping) as a :class:`Record` with a UTC-aware :class:`MemoryItem` (and, ``with_keyword``,
    the terms its keyword index holds)."""
    item = MemoryItem.from_stored(
        {
            "id": row["id"],
            "content": row["content"],
            "memory_type": MemoryType(row["memory_type"]),
            "user_id": row["user_id"],
            "session_id": row["session_id"],
            "timestamp": stored_time(row["timestamp"]),
            "created_at": stored_time(row["created_at"]),
            "importance": float(row["importance"]),
            "access_count": int(row["access_count"]),
            "last_accessed": stored_time(row["last_accessed"]),
            "pinned": bool(row["pinned"]),
            "metadata": json.loads(row["metadata"]),
            "score": None,
            "explanation": None,
        }
    )
    embedding = _decode_embedding(row["embedding"]) if with_embedding else None
    return Record(
        item=item,
        namespace=row["namespace"],
        embedding=embedding,
        space=row["space"],
        keyword=row["keyword"] if with_keyword else None,
    )


def filter_conditions(
    user_id: str | None,
    namespace: str | None,
    memory_type: MemoryType | str | None,
    filters: MemoryFilter | None,
    *,
    metadata_equals: Callable[[str, Any], sa.ColumnElement[bool]],
) -> list[Any]:
    """WHERE clauses for the scope and a :class:`MemoryFilter` (all values bound).

    ``metadata_equals`` is the dialect's JSON equality (``DialectStrategy.metadata_equals``).
    """
    m = memories.c
    clauses: list[Any] = []
    if user_id is not None:
        clauses.append(m.user_id == validate_identifier(user_id, "user_id"))
    if namespace is not None:
        clauses.append(m.namespace == validate_identifier(namespace, "namespace"))
    kind = _memory_type(memory_type)
    if kind is not None:
        clauses.append(m.memory_type == kind.value)
    if filters is None:
        return clauses
    if not isinstance(filters, MemoryFilter):
        raise MemoryValidationError("filters", f"must be a MemoryFilter, got {type(filters).__name__}")
    if filters.session_id is not None:
        clauses.append(m.session_id == validate_identifier(filters.session_id, "session_id"))
    if filters.start_time is not None:
        clauses.append(m.timestamp >= _epoch(filters.start_time))
    if filters.end_time is not None:
        clauses.append(m.timestamp <= _epoch(filters.end_time))
    if filters.min_importance is not None:
        clauses.append(m.importance >= float(filters.min_importance))
    if filters.memory_ids is not None:
        ids = validate_ids(filters.memory_ids, "memory_ids")
        clauses.append(m.id.in_(ids) if ids else sa.false())
    for key, value in (filters.metadata or {}).items():
        clauses.append(metadata_equals(key, value))
    return clauses


def record_row(record: Record, keyword: str) -> dict[str, Any]:
    """The ``memories`` row of a record, with its keyword text."""
    item = record.item
    return {
        "id": item.id,
        "user_id": item.user_id,
        "session_id": item.session_id,
        "namespace": record.namespace,
        "memory_type": MemoryType(item.memory_type).value,
        "content": item.content,
        "content_hash": content_hash(item.content),
        "timestamp": _epoch(item.timestamp),
        "created_at": _epoch(item.created_at),
        "last_accessed": None if item.last_accessed is None else _epoch(item.last_accessed),
        "importance": float(item.importance),
        "access_count": int(item.access_count),
        "pinned": bool(item.pinned),
        "metadata": canonical_json(item.metadata),
        "embedding": None if record.embedding is None else embedding_bytes(record.embedding),
        "space": validate_space(record.space),
        "keyword": keyword,
        "keyword_scope": keyword_scope(item.user_id, record.namespace),
    }


async def build_rows(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Validated rows of records; the keyword text is computed off the loop for long contents."""
    if isinstance(records, Record) or not isinstance(records, Sequence):
        raise MemoryValidationError("records", "must be a sequence of Record")
    for index, record in enumerate(records):
        if not isinstance(record, Record) or not isinstance(record.item, MemoryItem):
            raise MemoryValidationError(f"records[{index}]", "must be a Record holding a MemoryItem")
        validate_identifier(record.namespace, "namespace")
    keywords = await akeyword_texts([record.keyword or record.item.content for record in records])
    return [record_row(record, keyword) for record, keyword in zip(records, keywords, strict=True)]


async def akeyword_texts(texts: Sequence[str]) -> list[str]:
    """The keyword-index text of each text, computed off the event loop when they are long."""
    if sum(len(text) for text in texts) > OFFLOAD_CHARS:
        return await asyncio.to_thread(lambda: [keyword_text(text) for text in texts])
    return [keyword_text(text) for text in texts]
