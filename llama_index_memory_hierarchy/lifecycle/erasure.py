"""User erasure: remove one user from every store of a deployment ("right to be forgotten").

``aerase_user(context, user_id)`` first commits a *pending-erasure* record (the user id, in
``lifecycle_erasures``; the lifecycle's writes for the user are refused while it is there), cancels the
user's background work in this process and takes the user's consolidation lock, which a consolidation
in another process holds across its LLM call (so that one ends before anything is deleted), then
removes, in this order:

1. **Vector points**: every vector space the user has records in (the text space, the
   perceptual tier's satellite spaces such as phash/CLIP/audio, and every embedded space
   folder on disk) is opened, so the deletions reach it;
2. **Record rows**: ``SQLRecordStore.delete_user`` deletes the user's rows from every table
   registered with a ``user_id`` column, in one transaction: memories of every tier and
   namespace (knowledge-base chunks ``kb:*`` included), superseded facts (history), the
   lifecycle tables (running summaries, consolidation marks, tombstones, cursors, the audit
   trail) and whatever other modules registered; it writes vector tombstones in the outbox,
   which are then applied, and every space is also cleared by a ``user_id`` filter;
3. **Graph**: every node of the user (and so every relation) in the graph store;
4. **Files**: the user's folder of stored perception files;
5. **In-process state**: the semantic index of the user, and the working memory, history
   and running summary of every live memory of the user in this process (:mod:`.sessions`).

Then, in one transaction, the pending record is replaced by a *pending-compaction* marker
that names no user, and with ``compact`` (default) every file is rewritten so that no byte of
the user stays behind: each embedded (qdrant-edge) vector folder is rebuilt from the record
store (its write-ahead log, payload pages and payload index otherwise keep the user's id
until a segment is rewritten; qdrant-edge has no call that truncates its WAL), SQLite files
get FTS5 ``optimize``, ``VACUUM`` and a ``wal_checkpoint(TRUNCATE)`` (the graph's file too),
and PostgreSQL tables a ``VACUUM FULL`` (a new heap file; PostgreSQL's own write-ahead log
is recycled by its checkpoints, outside this package's files). The marker goes last.

Resumable: a kill at any point leaves the pending record or the marker, and the next open
of the stores finishes the erasure (:func:`aresume_erasures`, which every opener above the
stores passes as ``StoreContext.acquire(on_open=...)``);
``ops.verify.verify_indexes`` reports an unfinished one, and graph nodes or stored files of
a user without records. Vector indexes on a server (Qdrant, Chroma, a LlamaIndex store) are
cleared by filter and optimised where they can be; their files are the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.lifecycle.consolidation import Consolidator
from llama_index_memory_hierarchy.lifecycle.sessions import acancel_background, live_memories
from llama_index_memory_hierarchy.lifecycle.tables import COMPACTION_PENDING, LifecycleStore
from llama_index_memory_hierarchy.perception.files import FileStore
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.schema import memories, metadata
from llama_index_memory_hierarchy.tiers.semantic import areset_semantic_state
from llama_index_memory_hierarchy.types import validate_identifier

logger = logging.getLogger(__name__)


class ErasureReport(BaseModel):
    """What erasing one user removed."""

    user_id: str
    rows: dict[str, int] = Field(default_factory=dict, description="Rows deleted per record-store table.")
    vectors: dict[str, int] = Field(default_factory=dict, description="Points of the user per vector space before.")
    graph: dict[str, int] = Field(default_factory=dict, description="Nodes and relations of the user before.")
    files: int = 0
    staging_files: int = Field(default=0, description="Staging copies of interrupted file writes removed.")
    live_memories: int = Field(default=0, description="Open memories of the user in this process that were reset.")
    cancelled_tasks: int = Field(default=0, description="Background tasks of the user in this process cancelled.")
    compacted: bool = False

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def user_digest(user_id: str) -> str:
    """A short digest of a user id, for logs that must not keep the id itself."""
    return hashlib.sha256(user_id.encode()).hexdigest()[:12]


async def auser_spaces(context: StoreContext, user_id: str) -> dict[str, int]:
    """``{space: dim}`` of every vector space holding an embedding of this user's records."""
    m = memories.c

    async def work(conn: Any) -> dict[str, int]:
        rows = await conn.execute(
            sa.select(m.space, sa.func.max(sa.func.length(m.embedding)))
            .where(m.user_id == user_id, m.space.is_not(None), m.embedding.is_not(None))
            .group_by(m.space)
        )
        return {space: int(size) // 4 for space, size in rows if size}

    return await context.records.run_transaction(work, write=False, op="user spaces")  # type: ignore[attr-defined]


def disk_spaces(persist_dir: Path) -> dict[str, int]:
    """``{space: dim}`` of the embedded (qdrant-edge) vector folders under ``persist_dir/vectors``."""
    found: dict[str, int] = {}
    root = Path(persist_dir) / "vectors"
    if not root.is_dir():
        return found
    for folder in sorted(root.iterdir()):
        config = folder / "edge_config.json"
        if folder.name.startswith(".") or not config.is_file():  # a rebuild's leftover is no space
            continue
        try:
            found[folder.name] = int(json.loads(config.read_text("utf-8"))["vectors"][""]["size"])
        except (OSError, ValueError, KeyError, TypeError):
            logger.warning("vector folder %s: unreadable config; not opened for erasure", folder)
    return found


@traced("erase_user")
async def aerase_user(context: StoreContext, user_id: str, *, compact: bool = True) -> ErasureReport:
    """Remove ``user_id`` from every store of ``context`` (see the module docstring); runs on the store runtime."""
    user_id = validate_identifier(user_id, "user_id")
    return await context.runtime.arun(_aerase(context, user_id, compact))


async def aresume_erasures(context: StoreContext) -> list[str]:
    """Finish the erasures a killed process left (the stores call it when they open); digests of the users."""
    store = LifecycleStore(context)
    pending = await store.apending_erasures()
    finished = []
    for user_id in sorted(pending):
        if user_id == COMPACTION_PENDING:
            continue
        logger.warning("finishing the interrupted erasure of user #%s", user_digest(user_id))
        await _aerase(context, user_id, compact=True)
        finished.append(user_digest(user_id))
    if COMPACTION_PENDING in pending and not finished:
        logger.warning("finishing the compaction of an interrupted erasure")
        await _acompact(context, (await _aopen_spaces(context, None)).values(), [context.graph])
        await store.aend_erasure(COMPACTION_PENDING)
    return finished


async def _aopen_spaces(context: StoreContext, user_id: str | None) -> dict[str, Any]:
    """Every vector index the user (or anyone, for ``None``) may have points in, opened."""
    spaces = await auser_spaces(context, user_id) if user_id is not None else {}
    if not context.config.qdrant_url and not context.config.qdrant_path and context.config.vector_backend == "edge":
        for space, dim in disk_spaces(context.persist_dir).items():
            spaces.setdefault(space, dim)
    indexes = {}
    await context.avector_index()  # the text space
    for space, dim in spaces.items():
        indexes[space] = await context.avector_index(space, dim)
    text_space = await context.aspace()
    indexes.setdefault(text_space, await context.avector_index())
    return indexes


async def _aerase(context: StoreContext, user_id: str, compact: bool) -> ErasureReport:
    report = ErasureReport(user_id=user_id)
    store = LifecycleStore(context)
    await store.abegin_erasure(user_id)  # committed first: a kill from here on is finished on the next open
    await context.accesses.adiscard(user_id)  # queued bumps and access-log rows: none is written after this
    report.cancelled_tasks = await acancel_background(context, user_id)  # this process's, before its lock
    # a consolidation of the user in another process holds the lock across its LLM call: it ends first (its
    # lifecycle writes are refused from now on, see above), so what it stored is deleted below, not after
    async with context.lock(Consolidator, user_id):
        indexes, graphs = await _adelete_everything(context, user_id, report)
        # nothing of the user is left but bytes: the record naming them gives way to one naming nobody
        await store.aend_erasure(user_id, then=COMPACTION_PENDING if compact else None)
    if compact:
        await _acompact(context, indexes.values(), graphs)
        await store.aend_erasure(COMPACTION_PENDING)
        report.compacted = True
    logger.info(
        "erased user #%s: %d rows, %d vector points, %d graph nodes, %d files",
        user_digest(user_id),
        report.total_rows,
        sum(report.vectors.values()),
        report.graph.get("nodes", 0),
        report.files,
    )
    return report


async def _adelete_everything(
    context: StoreContext, user_id: str, report: ErasureReport
) -> tuple[dict[str, Any], list[Any]]:
    """Steps 1-5 of the module docstring; the vector indexes and graph stores the user was in."""
    for memory in live_memories(context, user_id):
        await memory.deps.areset_context()
        memory.compressor.forget_cached()
        report.live_memories += 1

    # 1. every vector space the user may have points in, open before the deletes are applied
    indexes = await _aopen_spaces(context, user_id)
    for space, index in indexes.items():
        report.vectors[space] = await index.count(user_id)

    # 2. record rows of every user-scoped table (tombstones for the vectors), then the outbox
    records: Any = context.records
    if hasattr(records, "delete_user"):
        report.rows = await records.delete_user(user_id, tombstones=context.erasure_tombstones)
    else:  # pragma: no cover - any other RecordStore: its memories at least
        report.rows = {"memories": len(await records.delete_where(user_id, namespace=None))}
    await context.drain_outbox()
    for index in indexes.values():
        await index.delete_user(user_id)

    # 3. the graph store (nodes carry user_id; deleting them takes their relations)
    graphs = await _aerase_graph(context, user_id, report)

    # 4. stored files, and staging copies no live write holds (whose they were, nothing says)
    files = FileStore(context.persist_dir)
    report.files = await asyncio.to_thread(files.delete_user, user_id)
    report.staging_files = await asyncio.to_thread(files.remove_staging_leftovers)

    # 5. in-process semantic index of the user
    await areset_semantic_state(context, user_id)
    return indexes, graphs


async def _aerase_graph(context: StoreContext, user_id: str, report: ErasureReport) -> list[Any]:
    """Clear the user from the graph store and from those the user's open memories were given; the graphs."""
    graph = context.graph
    counter = getattr(graph.store, "count", None)
    if counter is not None:
        report.graph = await asyncio.to_thread(counter, user_id)
    else:
        report.graph = {"nodes": len(await graph.anodes(user_id))}
    graphs = {id(graph.store): graph}
    # a memory opened with its own graph store (``graph_store=``) mirrors the user's facts there
    for memory in live_memories(context, user_id):
        own = memory.deps.tiers.semantic.graph
        graphs.setdefault(id(own.store), own)
    for each in graphs.values():
        await each.aclear_user(user_id)
    return list(graphs.values())


async def _acompact(context: StoreContext, indexes: Any, graphs: list[Any]) -> None:
    """Leave no deleted byte in vector folders, SQLite files (free pages, FTS5 segments, WAL) or PostgreSQL heaps."""
    for index in list(indexes):
        await context.arewrite_index(index)
    records: Any = context.records
    dialect = getattr(records, "dialect", None)
    if dialect == "sqlite":

        async def optimize(conn: Any) -> None:
            await conn.exec_driver_sql("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")

        await records.run_transaction(optimize, write=True, op="fts optimize")
        async with records.connection(write=True) as conn:
            raw = await conn.get_raw_connection()
            driver = raw.driver_connection  # aiosqlite, autocommit (the store issues BEGIN itself)
            await driver.execute("VACUUM")
            await driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    elif dialect == "postgresql":
        await _avacuum_postgres(records)
    for graph in graphs:
        store = getattr(graph, "store", None)
        client = getattr(store, "client", None)
        if client is not None:
            lock = getattr(store, "_lock", None) or contextlib.nullcontext()

            def vacuum(client: Any = client, lock: Any = lock) -> None:
                with lock:
                    client.execute("VACUUM")
                    client.execute("PRAGMA wal_checkpoint(TRUNCATE)")

            await asyncio.to_thread(vacuum)


async def _avacuum_postgres(records: Any) -> None:
    """``VACUUM FULL`` every table of the record store: a new heap file without the deleted rows' bytes."""
    async with records.engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:  # VACUUM: no BEGIN
        existing = set(await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names()))
        for table in metadata.sorted_tables:
            if table.name in existing:
                await conn.exec_driver_sql(f'VACUUM FULL "{table.name}"')  # names from our own metadata
