"""``rebuild_indexes`` (``lmh reindex``): every derived index rebuilt from the record store.

The keyword text of every record is recomputed with today's analysis (as the tiers write it),
then the keyword index, each vector space from scratch (a corrupt embedded vector folder is
replaced; records of another embedding model are re-embedded first) and each user's graph of
semantic facts (through the semantic tier, which owns the graph mirror). The store-level
steps come from :mod:`~llama_index_memory_hierarchy.stores.reconcile`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.embeddings import EmbeddingService
from llama_index_memory_hierarchy.language import ANALYZER_VERSION, keyword_text
from llama_index_memory_hierarchy.lifecycle.erasure import aresume_erasures
from llama_index_memory_hierarchy.runtime import get_runtime
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, VectorIndex
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.graph.sqlite import GRAPH_DB_NAME
from llama_index_memory_hierarchy.stores.lock import FolderLock
from llama_index_memory_hierarchy.stores.reconcile import (
    REINDEX_BATCH,
    as_config,
    edge_spaces,
    foreign_text_spaces,
    keyword_index_ok,
    outbox_ack_upto,
    outbox_max_seq,
    reindex_space,
    set_analyzer_version,
    space_ids,
    space_stats,
    text_records,
    vectors_embedded,
)
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.stores.record_sql.rows import embedding_bytes, stored_time
from llama_index_memory_hierarchy.stores.schema import memories
from llama_index_memory_hierarchy.stores.vector import open_vector_index
from llama_index_memory_hierarchy.stores.vector.edge import EdgeVectorIndex
from llama_index_memory_hierarchy.tiers.episodic import embedded_turn, keyword_documents
from llama_index_memory_hierarchy.tiers.tierset import TierSet
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

logger = logging.getLogger(__name__)

__all__ = ["RebuildReport", "arebuild_indexes", "rebuild_indexes"]


@dataclass
class RebuildReport:
    """Result of :func:`rebuild_indexes`: what was rebuilt from the record store."""

    records: int = 0
    keyword_index: bool = False
    spaces: dict[str, int] = field(default_factory=dict)  # space -> points written
    removed_spaces: list[str] = field(default_factory=list)  # vector folders with no records left
    graph_users: dict[str, int] = field(default_factory=dict)  # user -> relations written
    graph_replaced: bool = False  # the embedded graph file was deleted and rebuilt from the facts
    outbox_acknowledged: int = 0
    reembedded: dict[str, int] = field(default_factory=dict)  # old space -> records moved to the model's space
    analyzer_version: int = 0  # keyword analysis the keyword index now holds (language.ANALYZER_VERSION)

    def summary(self) -> str:
        spaces = ", ".join(f"{s}: {n}" for s, n in self.spaces.items()) or "none"
        moved = "".join(f"; re-embedded {n} records from {s}" for s, n in self.reembedded.items())
        return (
            f"rebuilt from {self.records} records: keyword index {'yes' if self.keyword_index else 'no'}; "
            f"vector spaces {spaces}; graphs of {len(self.graph_users)} users{moved}"
        )


async def _arebuild_vectors(config: MemoryConfig, records: Any, report: RebuildReport) -> None:
    persist_dir = Path(config.persist_dir).expanduser().resolve()
    stats = await space_stats(records)
    if config.resolved_vector_backend == "sqlite":  # each process mirrors the records' vectors: nothing on disk
        legacy = persist_dir / "vectors"  # an earlier release's qdrant-edge folder
        if legacy.is_dir():
            report.removed_spaces.extend(sorted(p.name for p in legacy.iterdir() if p.is_dir()))
            await asyncio.to_thread(shutil.rmtree, legacy)
        report.spaces.update({space: count for space, (count, _) in stats.items()})
        return
    embedded = vectors_embedded(config)
    if embedded:
        for space in edge_spaces(persist_dir):
            if space not in stats:
                await asyncio.to_thread(shutil.rmtree, persist_dir / "vectors" / space)
                report.removed_spaces.append(space)
    for space, (_, dim) in stats.items():
        if embedded:
            folder = persist_dir / "vectors" / space
            if folder.exists():
                await asyncio.to_thread(shutil.rmtree, folder)
            index: VectorIndex = await asyncio.to_thread(
                lambda space=space, dim=dim: EdgeVectorIndex(persist_dir, space, dim, flush_on_write=False)
            )
        else:
            index = await asyncio.to_thread(open_vector_index, config, space, dim)
        try:
            written = await reindex_space(records, index, space)
            if not embedded:  # a shared server index: remove points whose records are gone
                stale = await index.ids() - await space_ids(records, space)
                if stale:
                    await index.delete(sorted(stale))
            if isinstance(index, EdgeVectorIndex):
                await index.flush()
        finally:
            await index.close()
        report.spaces[space] = written


async def _areanalyze_keywords(records: SQLRecordStore) -> int:
    """Recompute every record's keyword text with today's analysis (``language``), as the tiers write it.

    Episodic memories get theirs from :func:`keyword_documents`, session by session in event order (a
    turn: its date and the two previous turns; a derived one, a summary, only its date); every other
    record its content.
    """
    m = memories.c
    columns = (m.seq, m.user_id, m.session_id, m.namespace, m.memory_type, m.content, m.timestamp, m.metadata)

    async def work(conn: Any) -> int:
        rows = (await conn.execute(sa.select(*columns).order_by(m.user_id, m.session_id, m.timestamp, m.seq))).all()
        texts = {seq: content for seq, *_, content, _, _ in rows}
        sessions: dict[tuple[str, str | None], list[tuple[int, MemoryItem]]] = {}
        for seq, user_id, session_id, namespace, memory_type, content, timestamp, metadata in rows:
            if namespace == MEMORY_NAMESPACE and memory_type == MemoryType.EPISODIC.value:
                item = MemoryItem.model_construct(
                    content=content,
                    session_id=session_id,
                    timestamp=stored_time(float(timestamp)),
                    metadata=json.loads(metadata or "{}"),
                )
                sessions.setdefault((user_id, session_id), []).append((seq, item))
        for turns in sessions.values():
            texts.update(zip((seq for seq, _ in turns), keyword_documents([item for _, item in turns]), strict=True))
        updates = [{"b_seq": seq, "b_keyword": keyword_text(text)} for seq, text in texts.items()]
        statement = sa.update(memories).where(m.seq == sa.bindparam("b_seq")).values(keyword=sa.bindparam("b_keyword"))
        for start in range(0, len(updates), REINDEX_BATCH):
            await conn.execute(statement, updates[start : start + REINDEX_BATCH])
        await set_analyzer_version(conn, ANALYZER_VERSION)
        return len(updates)

    return await records.run_transaction(work, write=True, op="reanalyze keywords")


async def _areembed(config: MemoryConfig, records: SQLRecordStore, report: RebuildReport, embed_model: Any) -> None:
    """Move records embedded by another text model into the configured model's space (re-embedding them).

    What is embedded matches the tiers: ``"speaker: text"`` for episodic turns, the content otherwise.
    """
    service = EmbeddingService.from_config(config, embed_model)
    await service.aprobe()
    space = service.space
    m = memories.c
    for old in await foreign_text_spaces(records, space):
        moved = 0
        while True:
            statement = (
                sa.select(m.id, m.memory_type, m.content, m.metadata)
                .where(m.space == old, text_records())
                .order_by(m.seq)
                .limit(REINDEX_BATCH)
            )

            async def fetch(conn: Any, statement: Any = statement) -> list[Any]:
                return list((await conn.execute(statement)).all())

            rows = await records.run_transaction(fetch, write=False, op="reembed read")
            if not rows:
                break
            texts = [
                embedded_turn(MemoryItem.model_construct(content=content, metadata=json.loads(meta or "{}")))
                if memory_type == MemoryType.EPISODIC.value
                else content
                for _, memory_type, content, meta in rows
            ]
            vectors = await service.aembed_texts(texts)
            values = [
                {"b_id": memory_id, "b_embedding": embedding_bytes(vector), "b_space": space}
                for (memory_id, *_), vector in zip(rows, vectors, strict=True)
            ]
            update = (
                sa.update(memories)
                .where(m.id == sa.bindparam("b_id"))
                .values(embedding=sa.bindparam("b_embedding"), space=sa.bindparam("b_space"))
            )

            async def write(conn: Any, values: list[dict[str, Any]] = values, update: Any = update) -> None:
                await conn.execute(update, values)

            await records.run_transaction(write, write=True, op="reembed write")
            moved += len(rows)
        report.reembedded[old] = moved
        logger.info("re-embedded %d records of %s into %s", moved, old, space)


async def arebuild_indexes(config: MemoryConfig, *, embed_model: Any = None, reembed: bool = True) -> RebuildReport:
    """Rebuild the keyword and vector indexes from the records (the caller holds the folder lock).

    With ``reembed`` (the default), records embedded by another text model than the configured
    one (``embed_model`` overrides the config's) are re-embedded into its space first.
    """
    report = RebuildReport()
    records = SQLRecordStore.from_config(config)
    await records.start()
    try:
        upto = await outbox_max_seq(records)
        if reembed:
            await _areembed(config, records, report, embed_model)
        if await keyword_index_ok(records) is False:  # a damaged index would fail the re-analysis's writes
            await records.rebuild_keyword_index()
        await _areanalyze_keywords(records)
        await records.rebuild_keyword_index()
        report.keyword_index = True
        report.analyzer_version = ANALYZER_VERSION
        report.records = await records.count(None, namespace=None)
        await _arebuild_vectors(config, records, report)
        # Every index now reflects the records as they were after entry ``upto``: those are applied.
        report.outbox_acknowledged = await outbox_ack_upto(records, upto) if upto else 0
    finally:
        await records.close()
    return report


async def _semantic_users(config: MemoryConfig) -> list[str]:
    records = SQLRecordStore.from_config(config)
    await records.start()
    m = memories.c
    statement = sa.select(m.user_id).where(m.memory_type == "semantic").distinct().order_by(m.user_id)

    async def work(conn: Any) -> list[str]:
        return list((await conn.execute(statement)).scalars())

    try:
        return await records.run_transaction(work, write=False, op="semantic users")
    finally:
        await records.close()


def _remove_embedded_graph(persist_dir: Path) -> bool:
    """Delete ``graph.db`` (and its WAL files): it is derived from the fact records, and may be corrupt."""
    removed = False
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = persist_dir / f"{GRAPH_DB_NAME}{suffix}"
        if path.exists():
            path.unlink()
            removed = True
    return removed


def _rebuild_graphs(config: MemoryConfig, users: list[str]) -> dict[str, int]:
    # the model loads only if used; rebuilding the graph embeds nothing
    context = StoreContext.acquire(config, on_open=aresume_erasures)
    written: dict[str, int] = {}
    try:
        for user_id in users:
            written[user_id] = TierSet(context, user_id=user_id).semantic.rebuild_graph()
    finally:
        context.release()
    return written


def rebuild_indexes(
    config: MemoryConfig | str | Path, *, graph: bool = True, embed_model: Any = None, reembed: bool = True
) -> RebuildReport:
    """Rebuild every derived index of a deployment from its record store (``lmh reindex``).

    Embedded folders must not be open anywhere (this takes the folder lock and raises
    :class:`StoreLockedError` otherwise). The keyword index is rebuilt, each embedded vector
    folder is deleted and rebuilt from the stored embeddings (so a corrupt one is replaced;
    no embedding model is needed), server indexes are re-upserted and cleaned of stale points,
    pending outbox entries are acknowledged, and each user's knowledge graph is rebuilt from
    the semantic fact records (the embedded ``graph.db`` is deleted first, so a corrupt one is
    replaced). ``config`` may be a :class:`MemoryConfig` or a persist folder.

    Records embedded by another embedding model (a store made before ``embed_model`` changed)
    are re-embedded with the configured model (``embed_model`` overrides it) and moved to its
    space, unless ``reembed`` is False; the keyword text of every record is recomputed with
    today's analysis (:mod:`~llama_index_memory_hierarchy.language`).
    """
    config = as_config(config)
    embedded = not (config.records_on_server and config.vectors_on_server)  # as StoreContext locks the folder
    lock = FolderLock(Path(config.persist_dir).expanduser().resolve()) if embedded else None
    runtime = get_runtime()
    try:
        report = runtime.run(arebuild_indexes(config, embed_model=embed_model, reembed=reembed))
        if graph and not config.graph_store_url:
            report.graph_replaced = _remove_embedded_graph(Path(config.persist_dir).expanduser().resolve())
    finally:
        if lock is not None:
            lock.release()
    if graph:
        users = runtime.run(_semantic_users(config))
        if users:
            report.graph_users = _rebuild_graphs(config, users)
    logger.info("%s", report.summary())
    return report
