"""The SQL of the SQLite property graph: its tables, and how nodes, properties and filters map to rows.

Apart from :mod:`.sqlite` (the store: connections, locks, transactions) so that each reads as one job.
No value is ever formatted into SQL: every function here binds its values as parameters.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.graph_stores.types import ChunkNode, EntityNode, LabelledNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilters

from llama_index_memory_hierarchy.errors import MemoryValidationError

#: Version of the tables below; a newer file is refused, an older one migrated.
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS graph_nodes (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('entity', 'chunk')),
    name TEXT,
    label TEXT NOT NULL,
    text TEXT,
    user_id TEXT,
    properties TEXT NOT NULL DEFAULT '{}',
    embedding BLOB,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS graph_nodes_user ON graph_nodes (user_id);
CREATE INDEX IF NOT EXISTS graph_nodes_name ON graph_nodes (name);
CREATE TABLE IF NOT EXISTS graph_relations (
    source_id TEXT NOT NULL REFERENCES graph_nodes (id) ON DELETE CASCADE,
    label TEXT NOT NULL,
    target_id TEXT NOT NULL REFERENCES graph_nodes (id) ON DELETE CASCADE,
    user_id TEXT,
    properties TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (source_id, label, target_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_relations_target ON graph_relations (target_id, label);
CREATE INDEX IF NOT EXISTS graph_relations_label ON graph_relations (label);
CREATE INDEX IF NOT EXISTS graph_relations_user ON graph_relations (user_id);
"""

NODE_COLUMNS = "n.id, n.kind, n.name, n.label, n.text, n.properties"


def read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection of the file that can only read (autocommit: each statement reads the latest commit)."""
    connection = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA query_only=ON")
    return connection


def dumps(value: dict[str, Any], field: str) -> str:
    """Properties as JSON; rejects what no graph store can hold (NaN, objects)."""
    if not isinstance(value, dict):
        raise MemoryValidationError(field, f"must be a dict, got {type(value).__name__}")
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(field, f"must be JSON-serialisable: {exc}") from exc


def embedding_blob(embedding: Sequence[float] | None) -> bytes | None:
    if embedding is None:
        return None
    vector = np.asarray(embedding, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(vector)):
        raise MemoryValidationError("embedding", "must contain finite numbers only")
    return vector.tobytes()


def json_list(values: Iterable[Any]) -> str:
    """A list bound as one JSON parameter (``IN (SELECT value FROM json_each(?))``): no variable limit."""
    return json.dumps(list(values), ensure_ascii=False)


def property_condition(alias: str, key: str, value: Any) -> tuple[str, list[Any]] | None:
    """SQL for ``alias.properties[key] = value`` with bound key and value; None: filter in Python."""
    if not isinstance(key, str):
        raise MemoryValidationError("properties", f"keys must be strings, got {key!r}")
    if key == "user_id" and isinstance(value, str):
        return f"{alias}.user_id = ?", [value]
    base = f"EXISTS (SELECT 1 FROM json_each({alias}.properties) AS j WHERE j.key = ? AND "
    if isinstance(value, bool):
        return base + "j.type = ?)", [key, "true" if value else "false"]
    if isinstance(value, str):
        return base + "j.type = 'text' AND j.value = ?)", [key, value]
    if isinstance(value, (int, float)) and math.isfinite(value):
        return base + "j.type IN ('integer', 'real') AND j.value = ?)", [key, value]
    return None


def matches(properties: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(key in properties and properties[key] == value for key, value in wanted.items())


def node_from_row(row: Sequence[Any]) -> LabelledNode:
    node_id, kind, name, label, text, properties = row[:6]
    props = json.loads(properties)
    if kind == "chunk":
        return ChunkNode(id_=node_id, text=text or "", label=label, properties=props)
    return EntityNode(name=name if name is not None else node_id, label=label, properties=props)


def node_conditions(
    alias: str,
    *,
    entity_names: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
    properties: dict[str, Any] | None = None,
) -> tuple[list[str], list[Any], dict[str, Any]]:
    """WHERE parts and parameters for node filters; the third value is filtered in Python."""
    where: list[str] = []
    params: list[Any] = []
    leftover: dict[str, Any] = {}
    if entity_names:
        where.append(f"{alias}.kind = 'entity' AND {alias}.name IN (SELECT value FROM json_each(?))")
        params.append(json_list(entity_names))
    if ids:
        where.append(f"{alias}.id IN (SELECT value FROM json_each(?))")
        params.append(json_list(ids))
    for key, value in (properties or {}).items():
        condition = property_condition(alias, key, value)
        if condition is None:
            leftover[key] = value
        else:
            where.append(condition[0])
            params.extend(condition[1])
    return where, params, leftover


def simple_filters(filters: MetadataFilters) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """``MetadataFilters`` as equality (``==``) and membership (``in``) tests, AND only; anything else is refused."""
    if str(getattr(filters.condition, "value", filters.condition)).lower() != "and":
        raise MemoryValidationError("filters", "only AND conditions are supported")
    wanted: dict[str, Any] = {}
    any_of: dict[str, list[Any]] = {}
    for flt in filters.filters:
        if isinstance(flt, MetadataFilters):
            raise MemoryValidationError("filters", "nested filters are not supported")
        if flt.operator == FilterOperator.EQ:
            wanted[flt.key] = flt.value
        elif flt.operator == FilterOperator.IN and isinstance(flt.value, list):
            any_of[flt.key] = list(flt.value)
        else:
            raise MemoryValidationError("filters", f"operator {flt.operator} is not supported")
    return wanted, any_of


def nearest(
    rows: Sequence[Sequence[Any]],
    query_embedding: Sequence[float],
    top_k: int,
    leftover: dict[str, Any],
    any_of: dict[str, list[Any]],
) -> tuple[list[LabelledNode], list[float]]:
    """The ``top_k`` node rows (with their embedding last) nearest to the query by cosine, after the filters
    SQL could not express: ``leftover`` (equality) and ``any_of`` (membership)."""
    q = np.asarray(query_embedding, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    scored: list[tuple[float, LabelledNode]] = []
    for row in rows:
        node = node_from_row(row)
        if leftover and not matches(node.properties, leftover):
            continue
        if any(node.properties.get(k) not in v for k, v in any_of.items()):
            continue
        vector = np.frombuffer(row[6], dtype=np.float32)
        if vector.shape != q.shape:
            continue
        scored.append((float(vector @ q / (np.linalg.norm(vector) or 1.0)), node))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    top = scored[: max(top_k, 0)]
    return [node for _, node in top], [score for score, _ in top]


__all__ = [
    "NODE_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "dumps",
    "embedding_blob",
    "json_list",
    "matches",
    "nearest",
    "node_conditions",
    "node_from_row",
    "property_condition",
    "read_only",
    "simple_filters",
]
