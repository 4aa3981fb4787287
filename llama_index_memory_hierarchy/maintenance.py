"""Consistency checks and repair of the derived indexes, from the record store.

The record store (SQLite or PostgreSQL) is the source of truth. Everything else is derived
from it and can be rebuilt: the vector indexes (one per vector space), the keyword index
(SQLite FTS5 / PostgreSQL ``tsvector``) and the knowledge graph mirror of semantic facts.

* :func:`areconcile_vectors`: the cheap check a :class:`StoreContext` runs when it opens an
  embedded folder: per vector space, compare the number of records with an embedding to
  the number of points, and their ids when the counts differ or the space is small
  (:data:`EXACT_CHECK_MAX_RECORDS`); upsert the missing points from the records and delete
  the extra ones. This repairs an index that lost points it
  had acknowledged (e.g. an OS crash between a qdrant-edge write and its flush, or a
  vector folder restored from an older backup).
* :func:`verify_indexes` / :func:`averify_indexes`: a full check (ids of every space, the
  keyword index's integrity against its table, pending outbox entries, unfinished user
  erasures, and graph nodes or stored files of users without records) for tests and
  operators; ``repair=True`` fixes vector differences.
* :func:`rebuild_indexes`: rebuild every derived index from the records (the CLI's
  ``lmh reindex``): the keyword index, each vector space from scratch (a corrupt embedded
  vector folder is replaced), then each user's graph of semantic facts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.stores.base import VectorIndex
from llama_index_memory_hierarchy.stores.schema import index_outbox, memories, schema_info

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.stores.context import StoreContext
    from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

logger = logging.getLogger(__name__)

__all__ = [
    "IndexReport",
    "RebuildReport",
    "SpaceReport",
    "arebuild_indexes",
    "areconcile_vectors",
    "averify_indexes",
    "rebuild_indexes",
    "verify_indexes",
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
    """Result of :func:`averify_indexes`."""

    spaces: list[SpaceReport] = field(default_factory=list)
    outbox_pending: int = 0
    keyword_index_ok: bool | None = None  # None: not checked (PostgreSQL keeps it in a generated column)
    pending_erasures: list[str] = field(default_factory=list)  # users whose erasure began and did not finish
    graph_orphans: dict[str, int] = field(default_factory=dict)  # user digest -> graph nodes, user has no records
    file_orphans: list[str] = field(default_factory=list)  # stored-file folders of users with no records
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


# --------------------------------------------------------------------------------------------------
# record-store side
# --------------------------------------------------------------------------------------------------


def _sql_store(records: Any) -> SQLRecordStore:
    from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

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


def _text_records() -> Any:
    """Records embedded in a *text* space: everything but perception's satellite vectors (other encoders)."""
    from llama_index_memory_hierarchy.tiers.perceptual import VECTOR_NAMESPACE

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
        .where(m.space.is_not(None), m.space != space, _text_records())
        .group_by(m.space)
    )

    async def work(conn: Any) -> dict[str, int]:
        return {str(name): int(count) for name, count in (await conn.execute(statement)).all()}

    return await store.run_transaction(work, write=False, op="foreign spaces")


async def analyzer_version(records: Any) -> int | None:
    """The keyword analysis version the store's keyword text was written with.

    A store with records but no version row was written before versions were kept: version 1.
    A new, empty store is marked with this release's version.
    """
    from llama_index_memory_hierarchy.language import ANALYZER_VERSION

    store = _sql_store(records)
    info = schema_info.c

    async def read(conn: Any) -> int | None:
        found = (await conn.execute(sa.select(info.version).where(info.component == ANALYZER_COMPONENT))).scalar()
        if found is not None:
            return int(found)
        return None if (await conn.execute(sa.select(memories.c.seq).limit(1))).first() is None else 1

    found = await store.run_transaction(read, write=False, op="analyzer version")
    if found is None:  # a new store: its keyword text will be written by this analysis
        await store.run_transaction(lambda conn: _set_analyzer_version(conn, ANALYZER_VERSION), op="analyzer version")
        return ANALYZER_VERSION
    return found


async def _set_analyzer_version(conn: Any, version: int) -> None:
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


async def _outbox_max_seq(records: Any) -> int:
    store = _sql_store(records)

    async def work(conn: Any) -> int:
        return int((await conn.execute(sa.select(sa.func.max(index_outbox.c.seq)))).scalar() or 0)

    return await store.run_transaction(work, write=False, op="outbox max")


async def _outbox_count(records: Any) -> int:
    store = _sql_store(records)

    async def work(conn: Any) -> int:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(index_outbox))).scalar_one())

    return await store.run_transaction(work, write=False, op="outbox count")


async def _outbox_ack_upto(records: Any, seq: int) -> int:
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


def _edge_dims(persist_dir: Path) -> dict[str, int | None]:
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


def _embedded_vectors(config: MemoryConfig) -> bool:
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
    from llama_index_memory_hierarchy.stores.vector import record_to_point

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


async def areconcile_vectors(context: StoreContext) -> list[SpaceReport]:
    """Make every vector index of ``context`` hold exactly the embedded records (cheap when they agree).

    Counts are compared per space; ids only where counts differ. Runs on the runtime loop while
    nothing else uses the context (the context calls it on open, after draining the outbox).
    """
    stats = await space_stats(context.records)
    spaces: dict[str, int | None] = {space: dim for space, (_, dim) in stats.items()}
    if _embedded_vectors(context.config):
        for space, dim in _edge_dims(context.persist_dir).items():
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


async def averify_indexes(context: StoreContext, *, repair: bool = False) -> IndexReport:
    """Full consistency check of the derived indexes against the records of ``context``.

    Compares the ids of every vector space (not only counts), runs the keyword index's integrity
    check and counts pending outbox entries. With ``repair``, vector differences are fixed.
    """

    async def run() -> IndexReport:
        report = IndexReport()
        if repair:
            await context.drain_outbox()
        stats = await space_stats(context.records)
        spaces: dict[str, int | None] = {space: dim for space, (_, dim) in stats.items()}
        if _embedded_vectors(context.config):
            for space, dim in _edge_dims(context.persist_dir).items():
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
        report.outbox_pending = await _outbox_count(context.records)
        await _acheck_erasures(context, report)
        return report

    return await context.runtime.arun(run())


async def _acheck_erasures(context: StoreContext, report: IndexReport) -> None:
    """Unfinished erasures, and graph nodes or stored files of users that have no records (a half-erased user)."""
    from llama_index_memory_hierarchy.lifecycle.erasure import _graph, user_digest
    from llama_index_memory_hierarchy.lifecycle.tables import COMPACTION_PENDING, LifecycleStore
    from llama_index_memory_hierarchy.perception.files import user_dir_name

    pending = await LifecycleStore(context).apending_erasures()
    report.pending_erasures = sorted(u for u in pending if u != COMPACTION_PENDING)
    hint = "it is finished when a memory next opens these stores (or run `lmh forget --everything --yes --user ID`)"
    for user in report.pending_erasures:
        report.problems.append(f"the erasure of user #{user_digest(user)} began and did not finish; {hint}")
    if COMPACTION_PENDING in pending:
        report.problems.append(f"an erasure's compaction (vector folders, SQLite files) did not finish; {hint}")
    users = set(await context.records.users())  # type: ignore[attr-defined]
    try:
        graph_users = getattr(_graph(context).store, "users", None)
    except Exception as exc:  # a graph backend that cannot open here is reported by its own users
        logger.warning("graph store not checked: %s", exc)
        graph_users = None
    if graph_users is not None:
        for user, nodes in (await asyncio.to_thread(graph_users)).items():
            if user not in users:
                report.graph_orphans[user_digest(user)] = nodes
                report.problems.append(
                    f"the graph holds {nodes} nodes of user #{user_digest(user)}, who has no records "
                    "(a half-erased user?); `lmh reindex` rebuilds the graph from the facts"
                )
    files = context.persist_dir / "files"
    if files.is_dir():
        expected = {user_dir_name(u) for u in users}
        for folder in sorted(p for p in files.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if folder.name not in expected and any(f.is_file() for f in folder.rglob("*")):
                report.file_orphans.append(folder.name)
                report.problems.append(
                    f"stored files in {folder} belong to no user with records (a half-erased user?); "
                    "finish the erasure or delete the folder"
                )


def verify_indexes(config: MemoryConfig | str | Path, *, repair: bool = False, embed_model: Any = None) -> IndexReport:
    """Sync twin of :func:`averify_indexes` that opens (and closes) the stores of ``config``."""
    from llama_index_memory_hierarchy.stores.context import StoreContext

    context = StoreContext.acquire(_as_config(config), embed_model=embed_model, resume_erasures=False)  # report
    try:
        return context.runtime.run(averify_indexes(context, repair=repair))
    finally:
        context.release()


# --------------------------------------------------------------------------------------------------
# rebuild
# --------------------------------------------------------------------------------------------------


def _as_config(config: MemoryConfig | str | Path) -> MemoryConfig:
    if isinstance(config, MemoryConfig):
        return config
    if isinstance(config, (str, Path)):
        return MemoryConfig.from_env(persist_dir=str(config))
    raise MemoryValidationError("config", f"expected a MemoryConfig or a persist folder, got {type(config).__name__}")


async def _reindex_space(records: Any, index: VectorIndex, space: str) -> int:
    from llama_index_memory_hierarchy.stores.vector import record_to_point

    written = 0
    after = 0
    while True:
        batch = await records.iter_embedded(space, batch_size=REINDEX_BATCH, after_seq=after)
        if not batch:
            return written
        after = batch[-1][0]
        await index.upsert([record_to_point(record) for _, record in batch])
        written += len(batch)


async def _arebuild_vectors(config: MemoryConfig, records: Any, report: RebuildReport) -> None:
    from llama_index_memory_hierarchy.stores.vector import open_vector_index
    from llama_index_memory_hierarchy.stores.vector.edge import EdgeVectorIndex

    persist_dir = Path(config.persist_dir).expanduser().resolve()
    stats = await space_stats(records)
    embedded = _embedded_vectors(config)
    if embedded:
        for space in _edge_dims(persist_dir):
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
            written = await _reindex_space(records, index, space)
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

    Episodic turns get their date and the two previous turns of their session (in event order),
    as :meth:`EpisodicMemory.abuild_records` does; every other record its content.
    """
    from llama_index_memory_hierarchy.language import ANALYZER_VERSION, keyword_text
    from llama_index_memory_hierarchy.ranking.pipeline import DEFAULT_RECIPE, format_turn, keyword_document
    from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE
    from llama_index_memory_hierarchy.tiers.stored import speaker_of
    from llama_index_memory_hierarchy.types import MemoryType

    context = DEFAULT_RECIPE.context_before
    m = memories.c
    columns = (m.seq, m.user_id, m.session_id, m.namespace, m.memory_type, m.content, m.timestamp, m.metadata)

    async def work(conn: Any) -> int:
        rows = (await conn.execute(sa.select(*columns).order_by(m.user_id, m.session_id, m.timestamp, m.seq))).all()
        history: dict[tuple[str, str], list[str]] = {}
        updates = []
        for seq, user_id, session_id, namespace, memory_type, content, timestamp, metadata in rows:
            if namespace == MEMORY_NAMESPACE and memory_type == MemoryType.EPISODIC.value:
                speaker = speaker_of(_MetadataOnly(json.loads(metadata or "{}")))  # type: ignore[arg-type]
                before = history.setdefault((user_id, session_id), []) if session_id else []
                when = datetime.fromtimestamp(float(timestamp), UTC)
                text = keyword_document(content, speaker=speaker, when=when, previous=before[-context:])
                if session_id:
                    before.append(format_turn(content, speaker))
            else:
                text = content
            updates.append({"b_seq": seq, "b_keyword": keyword_text(text)})
        statement = sa.update(memories).where(m.seq == sa.bindparam("b_seq")).values(keyword=sa.bindparam("b_keyword"))
        for start in range(0, len(updates), REINDEX_BATCH):
            await conn.execute(statement, updates[start : start + REINDEX_BATCH])
        await _set_analyzer_version(conn, ANALYZER_VERSION)
        return len(updates)

    return await records.run_transaction(work, write=True, op="reanalyze keywords")


@dataclass
class _MetadataOnly:
    """Enough of a memory item for ``speaker_of``."""

    metadata: dict[str, Any]


async def _areembed(config: MemoryConfig, records: SQLRecordStore, report: RebuildReport, embed_model: Any) -> None:
    """Move records embedded by another text model into the configured model's space (re-embedding them).

    What is embedded matches the tiers: ``"speaker: text"`` for episodic turns, the content otherwise.
    """
    from llama_index_memory_hierarchy.embeddings import EmbeddingService
    from llama_index_memory_hierarchy.ranking.pipeline import format_turn
    from llama_index_memory_hierarchy.stores.record_sql import _embedding_bytes
    from llama_index_memory_hierarchy.tiers.stored import speaker_of
    from llama_index_memory_hierarchy.types import MemoryType

    service = EmbeddingService.from_config(config, embed_model)
    await service.aprobe()
    space = service.space
    m = memories.c
    for old in await foreign_text_spaces(records, space):
        moved = 0
        while True:
            statement = (
                sa.select(m.id, m.memory_type, m.content, m.metadata)
                .where(m.space == old, _text_records())
                .order_by(m.seq)
                .limit(REINDEX_BATCH)
            )

            async def fetch(conn: Any, statement: Any = statement) -> list[Any]:
                return list((await conn.execute(statement)).all())

            rows = await records.run_transaction(fetch, write=False, op="reembed read")
            if not rows:
                break
            texts = [
                format_turn(content, speaker_of(_MetadataOnly(json.loads(meta or "{}"))))  # type: ignore[arg-type]
                if memory_type == MemoryType.EPISODIC.value
                else content
                for _, memory_type, content, meta in rows
            ]
            vectors = await service.aembed_texts(texts)
            values = [
                {"b_id": memory_id, "b_embedding": _embedding_bytes(vector), "b_space": space}
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
    from llama_index_memory_hierarchy.language import ANALYZER_VERSION
    from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

    report = RebuildReport()
    records = SQLRecordStore.from_config(config)
    await records.start()
    try:
        upto = await _outbox_max_seq(records)
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
        report.outbox_acknowledged = await _outbox_ack_upto(records, upto) if upto else 0
    finally:
        await records.close()
    return report


async def _semantic_users(config: MemoryConfig) -> list[str]:
    from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

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
    from llama_index_memory_hierarchy.stores.graph.sqlite import GRAPH_DB_NAME

    removed = False
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = persist_dir / f"{GRAPH_DB_NAME}{suffix}"
        if path.exists():
            path.unlink()
            removed = True
    return removed


def _rebuild_graphs(config: MemoryConfig, users: list[str]) -> dict[str, int]:
    from llama_index_memory_hierarchy.stores.context import StoreContext
    from llama_index_memory_hierarchy.tiers.tierset import TierSet

    context = StoreContext.acquire(config)  # the model loads only if used; rebuilding the graph embeds nothing
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
    from llama_index_memory_hierarchy.runtime import get_runtime
    from llama_index_memory_hierarchy.stores.context import _FolderLock

    config = _as_config(config)
    embedded = not (config.records_on_server and config.vectors_on_server)  # as StoreContext locks the folder
    lock = _FolderLock(Path(config.persist_dir).expanduser().resolve()) if embedded else None
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
