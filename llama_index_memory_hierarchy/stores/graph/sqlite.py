"""``SQLitePropertyGraphStore``: the embedded, durable, transactional property graph.

A LlamaIndex :class:`~llama_index.core.graph_stores.types.PropertyGraphStore` on one
SQLite file (``<persist_dir>/graph.db``), in WAL mode, one transaction per call.

Why this and not the alternatives (measured while designing semantic memory):

* ``SimplePropertyGraphStore`` keeps the whole graph in a Python dict and persists it by
  rewriting one JSON file: not durable between ``persist()`` calls, not transactional,
  O(graph) per save. Its ``delete(entity_names=[...])`` removes the endpoint nodes of
  every matching triplet and then, as ``get(properties=None, ids=None)`` returns every
  node, *all* nodes of the graph; it also leaves dangling triplets that make later
  ``get_triplets`` raise ``KeyError``. Not usable as a default.
* Kuzu runs embedded and offline, but its repository is archived (no fixes, no wheels for
  new Pythons) and it adds a second embedded engine and file format to ship and back up.
* SQLite is already the embedded engine of the record store, ships with Python, is
  durable (``synchronous=FULL`` by default), crash-safe and has foreign keys: deleting a
  node removes its relations in the same transaction (Cypher's ``DETACH DELETE``).

Why its own file (``graph.db``) and not tables inside ``memory.db``: this interface is
synchronous while the record store is async (aiosqlite); two connections writing one
SQLite file contend for its single write lock, and the record store may be PostgreSQL,
where the graph still needs a home. The graph is a *derived* index: semantic memory
keeps every fact as a record (the source of truth) and mirrors it here, so ``graph.db``
can be deleted and rebuilt from the records at any time. A separate file keeps
rebuilds, schema versions and locks independent of the records.

Semantics, kept identical to the Cypher stores (Neo4j, FalkorDB) so that the same
contract suite passes on all of them:

* node id: ``EntityNode.id`` (its name) or ``ChunkNode.id``; upserting merges properties
  (``SET n += props``: new keys win, absent keys stay; ``None`` removes a key) and keeps
  the old embedding when the new one is None;
* relation key: ``(source_id, label, target_id)``; upserting creates missing endpoints as
  bare entity nodes and merges properties; a relation may not join two users' nodes;
* ``properties`` filters are equality on every given key (AND);
* ``delete`` criteria are independent (each removes what it matches); deleting a node
  removes its relations and nothing else.

Every write takes a lock and runs in one transaction; a read is one statement (or a few) on
the calling thread's own read-only connection, which in WAL mode waits for neither (so the
memory's search reads the graph on its event loop, as it reads the records: a worker thread
would only add its hop and its wait for the GIL). Async twins run in a worker thread. The SQL
itself (tables, row codecs, filters) is in :mod:`.sqlite_sql`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.graph_stores.types import (
    ChunkNode,
    EntityNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
    Triplet,
)
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index_memory_hierarchy.errors import MemoryValidationError, SchemaVersionError, StoreError
from llama_index_memory_hierarchy.stores.graph.sqlite_sql import (
    NODE_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    dumps,
    embedding_blob,
    json_list,
    matches,
    nearest,
    node_conditions,
    node_from_row,
    read_only,
    simple_filters,
)
from llama_index_memory_hierarchy.stores.per_thread import PerThread

logger = logging.getLogger(__name__)

#: File name inside a persist folder.
GRAPH_DB_NAME = "graph.db"
#: Relations never followed by ``get_rel_map`` (chunk-to-entity provenance edges).
MENTIONS = "MENTIONS"


class SQLitePropertyGraphStore(PropertyGraphStore):
    """Embedded property graph on SQLite: durable, transactional, correct on delete.

    Args:
        path: the database file (created with its folder when missing).
        synchronous: SQLite fsync level; ``FULL`` (default) makes each committed call
            survive power loss.
        busy_timeout_s: how long a call waits for another process's write lock.
    """

    supports_structured_queries: bool = False
    supports_vector_queries: bool = True

    def __init__(self, path: str | Path, *, synchronous: str = "FULL", busy_timeout_s: float = 30.0) -> None:
        if synchronous not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise MemoryValidationError("synchronous", f"must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.path = Path(path).expanduser().resolve()
        self._lock = threading.RLock()
        self._closed = False
        self._readers: PerThread[sqlite3.Connection] = PerThread(  # each reading thread's own (``_read``)
            lambda: read_only(self.path, busy_timeout_s),
            lambda: StoreError(f"{self.path}: the graph store is closed"),
        )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.path}: cannot open the graph database: {exc}") from exc
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")  # validated literal above
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(
                f"{self.path}: not a valid graph database (corrupt or foreign file): {exc}; the graph is derived "
                "from the semantic fact records: rebuild it with `lmh reindex` "
                "(llama_index_memory_hierarchy.ops.rebuild.rebuild_indexes), or delete the file"
            ) from exc
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def from_persist_dir(cls, persist_dir: str | Path, **kwargs: Any) -> SQLitePropertyGraphStore:
        """The graph of a persist folder: ``<persist_dir>/graph.db``."""
        return cls(Path(persist_dir) / GRAPH_DB_NAME, **kwargs)

    def __repr__(self) -> str:
        return f"SQLitePropertyGraphStore(path={str(self.path)!r})"

    # ------------------------------------------------------------------ plumbing
    def _migrate(self) -> None:
        with self._transaction() as cur:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    cur.execute(statement)
            row = cur.execute("SELECT value FROM graph_meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                cur.execute("INSERT INTO graph_meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path}: graph schema version {row[0]} is newer than this package's {SCHEMA_VERSION}; "
                    "upgrade llama-index-memory-hierarchy"
                )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction (``BEGIN IMMEDIATE``: take the write lock up front)."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path}: the graph store is closed")
            cur = self._conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot start a transaction: {exc}") from exc
            try:
                yield cur
            except BaseException:
                self._conn.rollback()
                raise
            else:
                try:
                    self._conn.commit()
                except sqlite3.Error as exc:
                    self._conn.rollback()
                    raise StoreError(f"{self.path}: commit failed: {exc}") from exc
            finally:
                cur.close()

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement on this thread's own read-only connection: it sees every committed write and, in WAL
        mode, waits neither for a writer nor for the lock, so a read may run on an event loop's own thread."""
        try:
            return self._readers.get().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: graph read failed: {exc}") from exc

    @property
    def client(self) -> sqlite3.Connection:
        """The underlying connection (read-only use; writes must go through this class)."""
        return self._conn

    def close(self) -> None:
        """Checkpoint the WAL and close the connection (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._readers.close(sqlite3.Connection.close)
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:  # pragma: no cover - best effort
                logger.debug("WAL checkpoint failed for %s", self.path, exc_info=True)
            self._conn.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close` (called by the store context on shutdown)."""
        await asyncio.to_thread(self.close)

    # ------------------------------------------------------------------ node conversion
    def _select_nodes(self, where: list[str], params: list[Any], leftover: dict[str, Any]) -> list[LabelledNode]:
        sql = f"SELECT {NODE_COLUMNS} FROM graph_nodes AS n"
        if where:
            sql += " WHERE " + " AND ".join(f"({w})" for w in where)
        nodes = [node_from_row(row) for row in self._read(sql + " ORDER BY n.id", params)]
        if leftover:
            nodes = [node for node in nodes if matches(node.properties, leftover)]
        return nodes

    def _nodes_by_id(self, ids: Iterable[str]) -> dict[str, LabelledNode]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = self._read(
            f"SELECT {NODE_COLUMNS} FROM graph_nodes AS n WHERE n.id IN (SELECT value FROM json_each(?))",
            [json_list(ids)],
        )
        return {row[0]: node_from_row(row) for row in rows}

    def _triplets(self, rows: Sequence[tuple[Any, ...]]) -> list[Triplet]:
        """Relation rows ``(source_id, label, target_id, properties)`` with their endpoint nodes."""
        nodes = self._nodes_by_id([r[0] for r in rows] + [r[2] for r in rows])
        triplets: list[Triplet] = []
        for source_id, label, target_id, properties in rows:
            source, target = nodes.get(source_id), nodes.get(target_id)
            if source is None or target is None:  # pragma: no cover - foreign keys forbid it
                continue
            relation = Relation(
                label=label, source_id=source_id, target_id=target_id, properties=json.loads(properties)
            )
            triplets.append((source, relation, target))
        return triplets

    # ------------------------------------------------------------------ reads
    def get(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        """Nodes with these ids and/or property values (every node when neither is given)."""
        where, params, leftover = node_conditions("n", ids=ids, properties=properties)
        return self._select_nodes(where, params, leftover)

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets with an endpoint matching every given node filter, and a label in ``relation_names``.

        As in the Cypher stores, node filters (names, ids, properties) select the anchor
        node and the triplets touching it in either direction are returned, each once.
        """
        where, params, leftover = node_conditions("n", entity_names=entity_names, ids=ids, properties=properties)
        label_sql, label_params = "", []
        if relation_names:
            label_sql = " AND r.label IN (SELECT value FROM json_each(?))"
            label_params = [json_list(relation_names)]
        columns = "r.source_id, r.label, r.target_id, r.properties"
        if not where and not leftover:
            rows = self._read(f"SELECT {columns} FROM graph_relations AS r WHERE 1 = 1{label_sql}", label_params)
            return self._triplets(rows)
        anchor_where = " AND ".join(f"({w})" for w in where) if where else "1 = 1"
        anchors_sql = f"SELECT n.id, n.properties FROM graph_nodes AS n WHERE {anchor_where}"
        anchor_rows = self._read(anchors_sql, params)
        anchors = [node_id for node_id, props in anchor_rows if not leftover or matches(json.loads(props), leftover)]
        if not anchors:
            return []
        anchor_param = json_list(anchors)
        rows = self._read(
            f"SELECT {columns} FROM graph_relations AS r "
            f"WHERE r.source_id IN (SELECT value FROM json_each(?)){label_sql} "
            f"UNION "
            f"SELECT {columns} FROM graph_relations AS r "
            f"WHERE r.target_id IN (SELECT value FROM json_each(?)){label_sql}",
            [anchor_param, *label_params, anchor_param, *label_params],
        )
        return self._triplets(rows)

    def get_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets within ``depth`` hops of the given nodes (either direction), nearest first.

        Breadth-first, one query per level; ``ignore_rels`` and ``MENTIONS`` relations are
        neither returned nor followed; at most ``limit`` triplets.
        """
        depth, limit = int(depth), int(limit)
        if depth < 1 or limit < 1 or not graph_nodes:
            return []
        ignored = json_list({MENTIONS, *(ignore_rels or [])})
        seen_nodes = {node.id for node in graph_nodes}
        frontier = list(seen_nodes)
        seen_rels: set[tuple[str, str, str]] = set()
        rows_out: list[tuple[Any, ...]] = []
        columns = "r.source_id, r.label, r.target_id, r.properties"
        for _ in range(depth):
            if not frontier:
                break
            param = json_list(frontier)
            rows = self._read(
                f"SELECT {columns} FROM graph_relations AS r WHERE r.source_id IN (SELECT value FROM json_each(?)) "
                f"AND r.label NOT IN (SELECT value FROM json_each(?)) "
                f"UNION SELECT {columns} FROM graph_relations AS r "
                f"WHERE r.target_id IN (SELECT value FROM json_each(?)) "
                f"AND r.label NOT IN (SELECT value FROM json_each(?)) ORDER BY 1, 2, 3",
                [param, ignored, param, ignored],
            )
            next_frontier: list[str] = []
            for row in rows:
                key = (row[0], row[1], row[2])
                if key in seen_rels:
                    continue
                seen_rels.add(key)
                rows_out.append(row)
                for node_id in (row[0], row[2]):
                    if node_id not in seen_nodes:
                        seen_nodes.add(node_id)
                        next_frontier.append(node_id)
                if len(rows_out) >= limit:
                    return self._triplets(rows_out)
            frontier = next_frontier
        return self._triplets(rows_out)

    # ------------------------------------------------------------------ writes
    def _upsert_nodes(self, cur: sqlite3.Cursor, nodes: Sequence[LabelledNode]) -> None:
        now = time.time()
        for node in nodes:
            if isinstance(node, EntityNode):
                kind, name, text = "entity", node.name, None
            elif isinstance(node, ChunkNode):
                kind, name, text = "chunk", None, node.text
            else:
                raise MemoryValidationError("nodes", f"unsupported node type {type(node).__name__}")
            props = dumps(node.properties, "properties")
            user_id = node.properties.get("user_id")
            cur.execute(
                "INSERT INTO graph_nodes (id, kind, name, label, text, user_id, properties, embedding, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, json_patch('{}', ?), ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, name = excluded.name, label = excluded.label, "
                "text = COALESCE(excluded.text, graph_nodes.text), "
                "properties = json_patch(graph_nodes.properties, ?), "
                "user_id = json_extract(json_patch(graph_nodes.properties, ?), '$.user_id'), "
                "embedding = COALESCE(excluded.embedding, graph_nodes.embedding), updated_at = excluded.updated_at",
                (
                    node.id,
                    kind,
                    name,
                    node.label,
                    text,
                    user_id if isinstance(user_id, str) else None,
                    props,
                    embedding_blob(node.embedding),
                    now,
                    props,
                    props,
                ),
            )

    def _upsert_relations(self, cur: sqlite3.Cursor, relations: Sequence[Relation]) -> None:
        now = time.time()
        for relation in relations:
            props = dumps(relation.properties, "properties")
            rel_user = relation.properties.get("user_id")
            rel_user = rel_user if isinstance(rel_user, str) else None
            for node_id in (relation.source_id, relation.target_id):
                # A missing endpoint becomes a bare entity node, as Cypher's MERGE would make it.
                cur.execute(
                    "INSERT INTO graph_nodes (id, kind, name, label, user_id, properties, updated_at) "
                    "VALUES (?, 'entity', ?, 'entity', ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (node_id, node_id, rel_user, dumps({"user_id": rel_user} if rel_user else {}, "properties"), now),
                )
            owners = {
                row[0]
                for row in cur.execute(
                    "SELECT user_id FROM graph_nodes WHERE id IN (?, ?) AND user_id IS NOT NULL",
                    (relation.source_id, relation.target_id),
                ).fetchall()
            }
            if rel_user is not None:
                owners.add(rel_user)
            if len(owners) > 1:
                raise MemoryValidationError(
                    "relations", f"relation {relation.label!r} would join nodes of different users ({sorted(owners)})"
                )
            cur.execute(
                "INSERT INTO graph_relations (source_id, label, target_id, user_id, properties) "
                "VALUES (?, ?, ?, ?, json_patch('{}', ?)) "
                "ON CONFLICT (source_id, label, target_id) DO UPDATE SET "
                "properties = json_patch(graph_relations.properties, ?), "
                "user_id = COALESCE(json_extract(json_patch(graph_relations.properties, ?), '$.user_id'), "
                "graph_relations.user_id)",
                (relation.source_id, relation.label, relation.target_id, rel_user, props, props, props),
            )

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Insert or merge nodes, all in one transaction."""
        with self._transaction() as cur:
            self._upsert_nodes(cur, nodes)

    def upsert_relations(self, relations: list[Relation]) -> None:
        """Insert or merge relations, all in one transaction."""
        with self._transaction() as cur:
            self._upsert_relations(cur, relations)

    def upsert(self, nodes: Sequence[LabelledNode] = (), relations: Sequence[Relation] = ()) -> None:
        """Nodes and relations in one transaction (both or neither)."""
        with self._transaction() as cur:
            self._upsert_nodes(cur, nodes)
            self._upsert_relations(cur, relations)

    def delete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> None:
        """Delete, in one transaction, what each criterion matches (criteria are independent).

        ``entity_names``: entity nodes with these names; ``ids``: nodes with these ids;
        ``properties``: nodes matching every given value; ``relation_names``: relations
        with these labels. A deleted node takes its relations with it, nothing more.
        """
        with self._transaction() as cur:
            if entity_names:
                cur.execute(
                    "DELETE FROM graph_nodes WHERE kind = 'entity' AND name IN (SELECT value FROM json_each(?))",
                    (json_list(entity_names),),
                )
            if ids:
                cur.execute("DELETE FROM graph_nodes WHERE id IN (SELECT value FROM json_each(?))", (json_list(ids),))
            if relation_names:
                cur.execute(
                    "DELETE FROM graph_relations WHERE label IN (SELECT value FROM json_each(?))",
                    (json_list(relation_names),),
                )
            if properties:
                where, params, leftover = node_conditions("n", properties=properties)
                sql = "SELECT n.id, n.properties FROM graph_nodes AS n WHERE " + " AND ".join(f"({w})" for w in where)
                rows = cur.execute(sql if where else "SELECT n.id, n.properties FROM graph_nodes AS n", params)
                doomed = [i for i, props in rows.fetchall() if not leftover or matches(json.loads(props), leftover)]
                cur.execute(
                    "DELETE FROM graph_nodes WHERE id IN (SELECT value FROM json_each(?))", (json_list(doomed),)
                )

    def delete_relations(self, keys: Iterable[tuple[str, str, str]], *, user_id: str | None = None) -> int:
        """Delete exactly these relations ``(source_id, label, target_id)`` (of this user); return how many."""
        keys = list(keys)
        if not keys:
            return 0
        sql = (
            "DELETE FROM graph_relations WHERE (source_id, label, target_id) IN "
            "(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') "
            "FROM json_each(?))"
        )
        params: list[Any] = [json_list([list(k) for k in keys])]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        with self._transaction() as cur:
            cur.execute(sql, params)
            return cur.rowcount

    def count(self, user_id: str | None = None) -> dict[str, int]:
        """``{"nodes": n, "relations": m}`` of one user (by the ``user_id`` property) or of all."""
        if user_id is None:
            nodes = self._read("SELECT COUNT(*) FROM graph_nodes")[0][0]
            relations = self._read("SELECT COUNT(*) FROM graph_relations")[0][0]
        else:
            nodes = self._read("SELECT COUNT(*) FROM graph_nodes WHERE user_id = ?", [user_id])[0][0]
            relations = self._read("SELECT COUNT(*) FROM graph_relations WHERE user_id = ?", [user_id])[0][0]
        return {"nodes": int(nodes), "relations": int(relations)}

    def users(self) -> dict[str, int]:
        """``{user_id: nodes}`` of every user with nodes (consistency checks: a user with no records has none)."""
        rows = self._read("SELECT user_id, COUNT(*) FROM graph_nodes WHERE user_id IS NOT NULL GROUP BY user_id")
        return {str(user): int(count) for user, count in rows}

    def dump(self) -> tuple[list[LabelledNode], list[Relation]]:
        """Every node (with its embedding) and relation of every user: what ``lmh migrate`` copies."""
        nodes = self.get()
        embeddings = {
            node_id: np.frombuffer(blob, dtype="<f4").astype(float).tolist()
            for node_id, blob in self._read("SELECT id, embedding FROM graph_nodes WHERE embedding IS NOT NULL")
        }
        for node in nodes:
            if node.id in embeddings:
                node.embedding = embeddings[node.id]
        relations = [
            Relation(label=label, source_id=source, target_id=target, properties=json.loads(props))
            for source, label, target, props in self._read(
                "SELECT source_id, label, target_id, properties FROM graph_relations "
                "ORDER BY source_id, label, target_id"
            )
        ]
        return nodes, relations

    def relation_keys(self, user_id: str) -> set[tuple[str, str, str]]:
        """Every ``(source_id, label, target_id)`` of one user: an exact check against the fact records."""
        rows = self._read("SELECT source_id, label, target_id FROM graph_relations WHERE user_id = ?", [user_id])
        return {(str(s), str(label), str(t)) for s, label, t in rows}

    # ------------------------------------------------------------------ queries
    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        """Not supported: this store speaks no query language (use the typed methods)."""
        raise NotImplementedError("SQLitePropertyGraphStore has no structured (Cypher) query language")

    def vector_query(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list[LabelledNode], list[float]]:
        """Nodes nearest to ``query.query_embedding`` by cosine, exact scan over matching nodes.

        Supports ``MetadataFilters`` with ``==`` and ``in`` on node properties (AND).
        """
        if query.query_embedding is None:
            return [], []
        wanted: dict[str, Any] = {}
        any_of: dict[str, list[Any]] = {}
        if query.filters is not None:
            wanted, any_of = simple_filters(query.filters)
        where, params, leftover = node_conditions("n", properties=wanted)
        where.append("n.embedding IS NOT NULL")
        rows = self._read(
            f"SELECT {NODE_COLUMNS}, n.embedding FROM graph_nodes AS n WHERE " + " AND ".join(f"({w})" for w in where),
            params,
        )
        return nearest(rows, query.query_embedding, int(query.similarity_top_k), leftover, any_of)

    def get_schema(self, refresh: bool = False) -> dict[str, Any]:
        """Node labels and relation labels with their counts."""
        return {
            "node_labels": dict(self._read("SELECT label, COUNT(*) FROM graph_nodes GROUP BY label ORDER BY label")),
            "relation_labels": dict(
                self._read("SELECT label, COUNT(*) FROM graph_relations GROUP BY label ORDER BY label")
            ),
        }

    def persist(self, persist_path: str, fs: Any = None) -> None:
        """No-op: every call is already committed to disk."""

    # ------------------------------------------------------------------ async twins (off the loop)
    async def aget(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        return await asyncio.to_thread(self.get, properties, ids)

    async def aget_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        return await asyncio.to_thread(self.get_triplets, entity_names, relation_names, properties, ids)

    async def aget_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        return await asyncio.to_thread(self.get_rel_map, graph_nodes, depth, limit, ignore_rels)

    async def aupsert_nodes(self, nodes: list[LabelledNode]) -> None:
        await asyncio.to_thread(self.upsert_nodes, nodes)

    async def aupsert_relations(self, relations: list[Relation]) -> None:
        await asyncio.to_thread(self.upsert_relations, relations)

    async def adelete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> None:
        await asyncio.to_thread(self.delete, entity_names, relation_names, properties, ids)

    async def avector_query(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list[LabelledNode], list[float]]:
        return await asyncio.to_thread(self.vector_query, query, **kwargs)
