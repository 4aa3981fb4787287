"""Store reconciliation: the derived indexes checked and repaired against the record store.

The record store (SQLite or PostgreSQL) is the source of truth; the vector indexes (one per
vector space) and the keyword index (SQLite FTS5 / PostgreSQL ``tsvector``) are derived from it.
This module reads and repairs them at the level of the stores alone (no tier, no lifecycle):

* :func:`areconcile_vectors`: the cheap check a :class:`StoreContext` runs when it opens an
  embedded folder: per vector space, compare the number of records with an embedding to
  the number of points, and their ids when the counts differ or the space is small
  (:data:`EXACT_CHECK_MAX_RECORDS`); upsert the missing points from the records and delete
  the extra ones. This repairs an index that lost points it
  had acknowledged (e.g. an OS crash between a qdrant-edge write and its flush, or a
  vector folder restored from an older backup).
* :func:`acheck_indexes`: the stores' half of ``ops.verify.verify_indexes``: ids of every space,
  the keyword index's integrity against its table and pending outbox entries; ``repair=True``
  fixes vector differences.
* the building blocks of ``ops.rebuild`` (``lmh reindex``): space statistics, the outbox's
  bounds, the keyword analysis version the keyword text was written with, :func:`reindex_space`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.language import ANALYZER_VERSION
from llama_index_memory_hierarchy.stores.base import VECTOR_NAMESPACE, RecordStore, VectorIndex
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.stores.schema import index_outbox, memories, schema_info
from llama_index_memory_hierarchy.stores.vector import record_to_point

logger = logging.getLogger(__name__)

__all__ = [
    "ANALYZER_COMPONENT",
    "EXACT_CHECK_MAX_RECORDS",
    "REINDEX_BATCH",
    "IndexReport",
    "IndexedStores",
    "SpaceReport",
    "acheck_indexes",
    "analyzer_version",
    "areconcile_vectors",
    "as_config",
    "edge_spaces",
    "foreign_text_spaces",
    "keyword_index_ok",
    "outbox_ack_upto",
    "outbox_max_seq",
    "reindex_space",
    "set_analyzer_version",
    "space_ids",
    "space_stats",
    "text_records",
    "vectors_embedded",
]

#: Records per batch when re-indexing.
REINDEX_BATCH = 512
#: Spaces up to this many records get their ids compared on every open (about 0.3 s at this size);
#: larger ones only when the counts differ (``verify_indexes(repair=True)`` or ``lmh reindex`` for more).
EXACT_CHECK_MAX_RECORDS = 50_000
_EDGE_CONFIG = "edge_config.json"


@dataclass
class SpaceReport:
    """The state of one vector space: records with an embedding in it against index points."""

    space: str
    records: int
    points: int
    missing: list[str] = field(default_factory=list)  # records without a point
    extra: list[str] = field(default_factory=list)  # points without a record
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return not self.missing and not self.extra and self.records == self.points


@dataclass
class IndexReport:
    """Result of ``ops.verify.averify_indexes``: the stores' checks (:func:`acheck_indexes`), then the erasures'."""

    spaces: list[SpaceReport] = field(default_factory=list)
    outbox_pending: int = 0
    keyword_index_ok: bool | None = None  # None: not checked (PostgreSQL keeps it in a generated column)
    pending_erasures: list[str] = field(default_factory=list)  # users whose erasure began and did not finish
    graph_orphans: dict[str, int] = field(default_factory=dict)  # user digest -> graph nodes, user has no records
    file_orphans: list[str] = field(default_factory=list)  # stored-file folders of users with no records
    lifecycle_orphans: dict[str, int] = field(default_factory=dict)  # user digest -> marks/summaries, no records
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and not self.pending_erasures
            and self.outbox_pending == 0
            and self.keyword_index_ok is not False
            and all(s.ok or s.repaired for s in self.spaces)
        )


class IndexedStores(Protocol):
    """What reconciliation uses of a store context (which calls this module when it opens)."""

    config: MemoryConfig
    persist_dir: Path
    records: RecordStore
    #: True where the outbox is a change log that in-process mirrors follow (never pending).
    follows_log: bool

    async def avector_index(self, space: str | None = None, dim: int | None = None) -> VectorIndex: ...

    async def drain_outbox(self) -> int: ...


def as_config(config: MemoryConfig | str | Path) -> MemoryConfig:
    """A :class:`MemoryConfig`, or the config of a persist folder (what the operations accept)."""
    if isinstance(config, MemoryConfig):
        return config
    if isinstance(config, (str, Path)):
        return MemoryConfig.from_env(persist_dir=str(config))
    raise MemoryValidationError("config", f"expected a MemoryConfig or a persist folder, got {type(config).__name__}")


# --------------------------------------------------------------------------------------------------
# record-store side
# --------------------------------------------------------------------------------------------------


def _sql_store(records: Any) -> SQLRecordStore:
    if not isinstance(records, SQLRecordStore):
        raise StoreError(f"index maintenance needs the SQL record store, not {type(records).__name__}")
    return records


async def space_stats(records: Any) -> dict[str, tuple[int, int]]:
    """``space -> (records in it, dimension)`` from the record store.

    Counted on the ``(space, seq)`` index alone, so it stays cheap on a large store (a record has a
    space exactly when it has an embedding); the dimension is read from one row per space.
    """
    store = _sql_store(records)
    m = memories.c
    counts = sa.select(m.space, sa.func.count()).where(m.space.is_not(None)).group_by(m.space)

    async def work(conn: Any) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for space, count in (await conn.execute(counts)).all():
            size = await conn.execute(
                sa.select(sa.func.length(m.embedding)).where(m.space == space, m.embedding.is_not(None)).limit(1)
            )
            found[space] = (int(count), int(size.scalar() or 0) // 4)
        return found

    return await store.run_transaction(work, write=False, op="space stats")


#: ``schema_info`` row holding the keyword analysis version (``language.ANALYZER_VERSION``) of the keyword index.
ANALYZER_COMPONENT = "keyword_analyzer"


def text_records() -> Any:
    """Records embedded in a *text* space: everything but perception's satellite vectors (other encoders)."""
    return memories.c.namespace != VECTOR_NAMESPACE


async def foreign_text_spaces(records: Any, space: str) -> dict[str, int]:
    """``space -> records`` embedded in a text space other than ``space`` (another embedding model).

    Dense search reads only the configured model's space, so these records are found by keywords
    alone until ``lmh reindex`` re-embeds them with the configured model.
    """
    store = _sql_store(records)
    m = memories.c
    statement = (
        sa.select(m.space, sa.func.count())
        .where(m.space.is_not(None), m.space != space, text_records())
        .group_by(m.space)
    )

    async def work(conn: Any) -> dict[str, int]:
        return {str(name): int(count) for name, count in (await conn.execute(statement)).all()}

    return await store.run_transaction(work, write=False, op="foreign spaces")


async def analyzer_version(records: Any) -> int:
    """The keyword analysis version the store's keyword text was written with.

    A store with records but no version row was written before versions were kept: version 1.
    A new, empty store is marked with this release's version.
    """
    store = _sql_store(records)
    info = schema_info.c

    async def read(conn: Any) -> int | None:
        found = (await conn.execute(sa.select(info.version).where(info.component == ANALYZER_COMPONENT))).scalar()
        if found is not None:
            return int(found)
        return None if (await conn.execute(sa.select(memories.c.seq).limit(1))).first() is None else 1

    found = await store.run_transaction(read, write=False, op="analyzer version")
    if found is None:  # a new store: its keyword text will be written by this analysis
        await store.run_transaction(lambda conn: set_analyzer_version(conn, ANALYZER_VERSION), op="analyzer version")
        return ANALYZER_VERSION
    return found


async def set_analyzer_version(conn: Any, version: int) -> None:
    """Record in ``conn``'s transaction that the keyword text is written by analysis ``version``."""
    info = schema_info.c
    row = sa.update(schema_info).where(info.component == ANALYZER_COMPONENT)
    done = await conn.execute(row.values(version=version))
    if not done.rowcount:
        await conn.execute(sa.insert(schema_info).values(component=ANALYZER_COMPONENT, version=version))


async def space_ids(records: Any, space: str) -> set[str]:
    """Ids of every record (all users) with an embedding in ``space`` (a record has a space exactly when
    it has an embedding, so the ``(space, seq)`` index serves this)."""
    store = _sql_store(records)
    m = memories.c
    statement = sa.select(m.id).where(m.space == space)

    async def work(conn: Any) -> set[str]:
        return set((await conn.execute(statement)).scalars())

    return await store.run_transaction(work, write=False, op="space ids")


async def _records_by_id(records: Any, ids: Iterable[str]) -> list[Any]:
    """Records (with embeddings) of these ids whatever their user, for re-indexing."""
    store = _sql_store(records)
    wanted = list(ids)
    found: list[Any] = []
    for start in range(0, len(wanted), REINDEX_BATCH):
        chunk = wanted[start : start + REINDEX_BATCH]
        rows = await store.run_transaction(
            lambda conn, chunk=chunk: _select_users(conn, chunk), write=False, op="reindex lookup"
        )
        by_user: dict[str, list[str]] = {}
        for memory_id, user_id in rows:
            by_user.setdefault(user_id, []).append(memory_id)
        for user_id, user_ids in by_user.items():
            found.extend(await store.get(user_id, user_ids, with_embeddings=True))
    return found


async def _select_users(conn: Any, ids: Sequence[str]) -> list[tuple[str, str]]:
    m = memories.c
    result = await conn.execute(sa.select(m.id, m.user_id).where(m.id.in_(list(ids))))
    return [(row[0], row[1]) for row in result]


async def outbox_max_seq(records: Any) -> int:
    store = _sql_store(records)

    async def work(conn: Any) -> int:
        return int((await conn.execute(sa.select(sa.func.max(index_outbox.c.seq)))).scalar() or 0)

    return await store.run_transaction(work, write=False, op="outbox max")


async def _outbox_count(records: Any) -> int:
    store = _sql_store(records)

    async def work(conn: Any) -> int:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(index_outbox))).scalar_one())

    return await store.run_transaction(work, write=False, op="outbox count")


async def outbox_ack_upto(records: Any, seq: int) -> int:
    store = _sql_store(records)

    async def work(conn: Any) -> int:
        result = await conn.execute(sa.delete(index_outbox).where(index_outbox.c.seq <= seq))
        return int(result.rowcount or 0)

    return await store.run_transaction(work, write=True, op="outbox ack")


async def keyword_index_ok(records: Any) -> bool | None:
    """SQLite: FTS5 ``integrity-check`` of the keyword index against its table; None elsewhere."""
    store = _sql_store(records)
    if store.dialect != "sqlite":
        return None

    async def work(conn: Any) -> bool:
        try:
            async with conn.begin_nested():
                await conn.exec_driver_sql("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
        except sa.exc.DatabaseError as exc:
            logger.warning("record store %s: keyword index is inconsistent: %s", store.where, exc.orig)
            return False
        return True

    return await store.run_transaction(work, write=True, op="keyword index check")


# --------------------------------------------------------------------------------------------------
# vector side
# --------------------------------------------------------------------------------------------------


def edge_spaces(persist_dir: Path) -> dict[str, int | None]:
    """Embedded vector folders on disk: ``space -> dimension`` (None when unreadable)."""
    root = persist_dir / "vectors"
    found: dict[str, int | None] = {}
    if not root.is_dir():
        return found
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        try:
            stored = json.loads((folder / _EDGE_CONFIG).read_text(encoding="utf-8"))
            found[folder.name] = int(stored["vectors"][""]["size"])
        except (OSError, ValueError, KeyError, TypeError):
            found[folder.name] = None
    return found


def vectors_embedded(config: MemoryConfig) -> bool:
    """Whether the vector indexes live in the persist folder as qdrant-edge shards."""
    return config.resolved_vector_backend == "edge"


async def _compare(index: VectorIndex, records: Any, space: str, expected: int) -> SpaceReport:
    """Counts always; ids when counts differ or the space is small enough to compare them on every open
    (equal counts can hide a lost upsert plus a lost delete)."""
    points = await index.count()
    report = SpaceReport(space=space, records=expected, points=points)
    if points != expected or expected <= EXACT_CHECK_MAX_RECORDS:
        stored = await space_ids(records, space)
        indexed = await index.ids()
        report.records = len(stored)
        report.missing = sorted(stored - indexed)
        report.extra = sorted(indexed - stored)
    return report


async def _repair(index: VectorIndex, records: Any, report: SpaceReport) -> None:
    if report.missing:
        for start in range(0, len(report.missing), REINDEX_BATCH):
            batch = await _records_by_id(records, report.missing[start : start + REINDEX_BATCH])
            points = [record_to_point(r) for r in batch if r.embedding is not None and r.space == report.space]
            if points:
                await index.upsert(points)
    if report.extra:
        still = await space_ids(records, report.space)  # a point is removed only if its record is really gone
        doomed = [i for i in report.extra if i not in still]
        if doomed:
            await index.delete(doomed)
    report.repaired = True


async def areconcile_vectors(context: IndexedStores) -> list[SpaceReport]:
    """Make every vector index of ``context`` hold exactly the embedded records (cheap when they agree).

    Counts are compared per space; ids only where counts differ. Runs on the runtime loop while
    nothing else uses the context (the context calls it on open, after draining the outbox).
    """
    stats = await space_stats(context.records)
    spaces: dict[str, int | None] = {space: dim for space, (_, dim) in stats.items()}
    if vectors_embedded(context.config):
        for space, dim in edge_spaces(context.persist_dir).items():
            spaces.setdefault(space, dim)
    reports: list[SpaceReport] = []
    for space, dim in spaces.items():
        if not dim:
            continue  # an unreadable folder with no records: nothing refers to it
        index = await context.avector_index(space, dim)
        report = await _compare(index, context.records, space, stats.get(space, (0, 0))[0])
        if not report.ok:
            logger.warning(
                "vector index %s disagrees with the record store (%d records, %d points: %d missing, %d extra); "
                "repairing from the records",
                space,
                report.records,
                report.points,
                len(report.missing),
                len(report.extra),
            )
            await _repair(index, context.records, report)
        reports.append(report)
    return reports


async def acheck_indexes(context: IndexedStores, *, repair: bool = False) -> IndexReport:
    """Check the derived indexes of ``context`` against its records (on the context's loop).

    Compares the ids of every vector space (not only counts), runs the keyword index's integrity
    check and counts pending outbox entries. With ``repair``, vector differences are fixed.
    """
    report = IndexReport()
    if repair:
        await context.drain_outbox()
    stats = await space_stats(context.records)
    spaces: dict[str, int | None] = {space: dim for space, (_, dim) in stats.items()}
    if vectors_embedded(context.config):
        for space, dim in edge_spaces(context.persist_dir).items():
            if dim is None:
                report.problems.append(f"vector folder {context.persist_dir / 'vectors' / space} is unreadable")
            spaces.setdefault(space, dim)
    for space, dim in spaces.items():
        if not dim:
            continue
        index = await context.avector_index(space, dim)
        stored = await space_ids(context.records, space)
        indexed = await index.ids()
        space_report = SpaceReport(
            space=space,
            records=len(stored),
            points=len(indexed),
            missing=sorted(stored - indexed),
            extra=sorted(indexed - stored),
        )
        if repair and not space_report.ok:
            await _repair(index, context.records, space_report)
        report.spaces.append(space_report)
    report.keyword_index_ok = await keyword_index_ok(context.records)
    if not context.follows_log:  # a change log that every process follows is never pending
        report.outbox_pending = await _outbox_count(context.records)
    return report


async def reindex_space(records: Any, index: VectorIndex, space: str) -> int:
    """Upsert every record embedded in ``space`` into ``index`` (in seq order, by batches); return how many."""
    written = 0
    after = 0
    while True:
        batch = await records.iter_embedded(space, batch_size=REINDEX_BATCH, after_seq=after)
        if not batch:
            return written
        after = batch[-1][0]
        await index.upsert([record_to_point(record) for _, record in batch])
        written += len(batch)
