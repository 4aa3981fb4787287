"""``SQLRecordStore``: the authoritative record store, on :class:`SQLDatabase`.

Writes (rows, keyword text and ``index_outbox`` rows in one transaction), reads, keyword search
and the outbox the vector indexes are kept in step from. User text is never SQL or query syntax:
every value is a bound parameter and keyword queries are rebuilt from :func:`index_terms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, OutboxOp, Record, RecordStore, batches
from llama_index_memory_hierarchy.stores.record_sql.database import SQLDatabase
from llama_index_memory_hierarchy.stores.record_sql.rows import (
    akeyword_texts,
    build_rows,
    canonical_json,
    content_hash,
    embedding_bytes,
    filter_conditions,
    row_to_record,
    validate_ids,
    validate_space,
)
from llama_index_memory_hierarchy.stores.schema import index_outbox, memories, user_scoped_tables
from llama_index_memory_hierarchy.text import index_terms, keyword_scope
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryType,
    validate_content,
    validate_identifier,
    validate_importance,
    validate_memory_id,
    validate_metadata,
    validate_positive_int,
)

logger = logging.getLogger(__name__)

#: The change-log row an erasure leaves instead of tombstones naming the user (``delete_user(tombstones="reset")``).
_RESET = {"op": "reset", "memory_id": "", "user_id": "", "space": None}

OrderBy = Literal["timestamp", "-timestamp", "importance", "-importance", "created_at", "-created_at"]

#: Largest count bound into SQL (SQLite and PostgreSQL BIGINT hold up to 2**63 - 1).
_MAX_SQL_INT = 2**62
#: Ids per ``IN (...)`` list (well under SQLite's and asyncpg's bound-parameter limits).
CHUNK = 500
#: Most distinct tokens a keyword query uses (bounds hostile query size).
MAX_QUERY_TOKENS = 64

_ORDER: dict[str, tuple[sa.Column[Any], bool]] = {
    "timestamp": (memories.c.timestamp, False),
    "-timestamp": (memories.c.timestamp, True),
    "importance": (memories.c.importance, False),
    "-importance": (memories.c.importance, True),
    "created_at": (memories.c.created_at, False),
    "-created_at": (memories.c.created_at, True),
}

_ITEM_COLUMNS = [c for c in memories.c if c.name not in {"embedding", "keyword", "keyword_scope", "content_hash"}]


def _count(value: Any, field: str, minimum: int) -> int:
    """A validated count, clamped to what SQL integers hold (a larger limit or offset means the same)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise MemoryValidationError(field, f"must be an integer >= {minimum}, got {value!r}")
    return min(value, _MAX_SQL_INT)


class SQLRecordStore(SQLDatabase, RecordStore):
    """Authoritative record store on SQLite (embedded) or PostgreSQL, via SQLAlchemy async.

    Build with ``SQLRecordStore(url)`` or ``SQLRecordStore.from_config(config)``; call
    :meth:`start` (or use ``async with``) before anything else.
    """

    # --- writes ----------------------------------------------------------------------------------------

    async def insert(self, records: Sequence[Record], *, dedupe: bool = False) -> list[str]:
        """Insert in one transaction (rows, keyword index, outbox); return ids in input order."""
        rows = await build_rows(records)
        if not rows:
            return []

        async def work(conn: AsyncConnection) -> list[str]:
            ids = [row["id"] for row in rows]
            fresh = rows
            if dedupe:
                ids, fresh = await self._dedupe(conn, rows)
            if fresh:
                try:
                    await conn.execute(sa.insert(memories), fresh)
                except IntegrityError as exc:
                    if "id" in str(exc.orig).lower():
                        raise MemoryValidationError(
                            "id", "a memory with this id already exists (ids must be unique)"
                        ) from None
                    raise
                outbox = [
                    {"op": "upsert", "memory_id": r["id"], "user_id": r["user_id"], "space": r["space"]}
                    for r in fresh
                    if r["embedding"] is not None
                ]
                if outbox:
                    await conn.execute(sa.insert(index_outbox), outbox)
            return ids

        ids = await self.run_transaction(work, write=True, op="insert")
        self.note_written(row["id"] for row in rows if row["embedding"] is not None)
        for user_id, memory_type in {(row["user_id"], row["memory_type"]) for row in rows}:
            self.note_change(user_id, MemoryType(memory_type))
        return ids

    async def _dedupe(
        self, conn: AsyncConnection, rows: list[dict[str, Any]]
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Ids for ``rows`` (existing ones for duplicates) and the rows still to insert."""

        def key(row: Any) -> tuple[Any, ...]:
            return (row["user_id"], row["session_id"], row["namespace"], row["memory_type"], row["content"])

        users = sorted({row["user_id"] for row in rows})
        await self._strategy.lock_users(conn, users)
        hashes = sorted({row["content_hash"] for row in rows})
        known: dict[tuple[Any, ...], str] = {}
        m = memories.c
        for chunk in batches(hashes, CHUNK):
            result = await conn.execute(
                sa.select(m.id, m.user_id, m.session_id, m.namespace, m.memory_type, m.content)
                .where(m.user_id.in_(users), m.content_hash.in_(list(chunk)))
                .order_by(m.seq)
            )
            for existing in result.mappings():
                known.setdefault(key(existing), existing["id"])
        ids: list[str] = []
        fresh: list[dict[str, Any]] = []
        for row in rows:
            found = known.get(key(row))
            if found is None:
                known[key(row)] = found = row["id"]
                fresh.append(row)
            ids.append(found)
        return ids, fresh

    async def update(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        pinned: bool | None = None,
        embedding: np.ndarray | None = None,
        space: str | None = None,
    ) -> Record | None:
        """Change fields of one record (``metadata`` replaces the old dict); None if absent.

        Re-indexes the keyword text when ``content`` changes; writes an outbox upsert when the
        record has an embedding (and a delete for the old space when ``space`` changes).
        """
        validate_identifier(user_id, "user_id")
        memory_id = validate_memory_id(memory_id)
        values: dict[str, Any] = {}
        if content is not None:
            values["content"] = validate_content(content)
            values["content_hash"] = content_hash(values["content"])
            [values["keyword"]] = await akeyword_texts([values["content"]])
        if importance is not None:
            values["importance"] = validate_importance(importance)
        if metadata is not None:
            values["metadata"] = canonical_json(validate_metadata(metadata))
        if pinned is not None:
            if not isinstance(pinned, bool):
                raise MemoryValidationError("pinned", f"must be a bool, got {type(pinned).__name__}")
            values["pinned"] = pinned
        if embedding is not None:
            values["embedding"] = embedding_bytes(embedding)
        if space is not None:
            values["space"] = validate_space(space)

        async def work(conn: AsyncConnection) -> Record | None:
            found = await conn.execute(
                sa.select(memories).where(memories.c.user_id == user_id, memories.c.id == memory_id)
            )
            row = found.mappings().first()
            if row is None:
                return None
            if values:
                await conn.execute(sa.update(memories).where(memories.c.seq == row["seq"]).values(**values))
                merged = {**row, **values}
                if row["embedding"] is not None and row["space"] != merged["space"]:
                    await conn.execute(
                        sa.insert(index_outbox).values(
                            op="delete", memory_id=memory_id, user_id=user_id, space=row["space"]
                        )
                    )
                if merged["embedding"] is not None:
                    await conn.execute(
                        sa.insert(index_outbox).values(
                            op="upsert", memory_id=memory_id, user_id=user_id, space=merged["space"]
                        )
                    )
                row = merged
            return row_to_record(row, with_embedding=True)

        record = await self.run_transaction(work, write=True, op="update")
        if record is not None:
            self.note_written([memory_id])
            self.note_change(user_id, record.item.memory_type)
        return record

    async def set_keywords(self, user_id: str, texts: Mapping[str, str]) -> int:
        """Replace what the keyword index holds for these records of this user (the text indexed instead of
        their content, as :attr:`Record.keyword`), in one transaction; how many records were found.

        Why: a turn's keyword text holds its neighbours' words; when a neighbour is deleted or edited,
        its tier rewrites the texts that held it, or the old words would still find them.
        """
        validate_identifier(user_id, "user_id")
        wanted = {
            validate_memory_id(memory_id, "texts"): validate_content(text, "texts") for memory_id, text in texts.items()
        }
        if not wanted:
            return 0
        keywords = dict(zip(wanted, await akeyword_texts(list(wanted.values())), strict=True))

        async def work(conn: AsyncConnection) -> int:
            found = 0
            for memory_id in sorted(keywords):  # sorted: one lock order for concurrent rewrites
                result = await conn.execute(
                    sa.update(memories)
                    .where(self._strategy.owned_by(user_id), memories.c.id == memory_id)
                    .values(keyword=keywords[memory_id])
                )
                found += result.rowcount
            return found

        found = await self.run_transaction(work, write=True, op="set_keywords")
        if found:
            self.note_change(user_id, None)
        return found

    async def _delete_matching(self, conn: AsyncConnection, clauses: list[Any]) -> list[str]:
        """Delete matching rows, write outbox deletes for embedded ones, return deleted ids.

        SELECT (row-locked on PostgreSQL) then DELETE by ``seq``, not ``DELETE ... RETURNING``:
        SQLite 3.40 returns wrong ``IS NULL`` results in RETURNING on a table with an
        AFTER DELETE trigger (the FTS5 sync trigger), and the outbox depends on that flag.
        """
        m = memories.c
        found = await conn.execute(
            sa.select(m.seq, m.id, m.user_id, m.space, m.embedding.is_not(None))
            .where(*clauses)
            .order_by(m.seq)
            .with_for_update()
        )
        rows = found.all()
        for chunk in batches([row[0] for row in rows], CHUNK):
            await conn.execute(sa.delete(memories).where(m.seq.in_(list(chunk))))
        outbox = [{"op": "delete", "memory_id": r[1], "user_id": r[2], "space": r[3]} for r in rows if r[4]]
        if outbox:
            await conn.execute(sa.insert(index_outbox), outbox)
        return [row[1] for row in rows]

    async def delete(self, user_id: str, ids: Sequence[str]) -> list[str]:
        """Delete this user's records with these ids; return the ids actually deleted (input order)."""
        validate_identifier(user_id, "user_id")
        wanted = validate_ids(ids)
        if not wanted:
            return []

        async def work(conn: AsyncConnection) -> list[str]:
            deleted: set[str] = set()
            for chunk in batches(wanted, CHUNK):
                clauses = [self._strategy.owned_by(user_id), memories.c.id.in_(list(chunk))]
                deleted.update(await self._delete_matching(conn, clauses))
            return [i for i in wanted if i in deleted]

        deleted = await self.run_transaction(work, write=True, op="delete")
        if deleted:
            self.note_written(deleted)
            self.note_change(user_id, None)
        return deleted

    async def delete_where(
        self,
        user_id: str,
        *,
        namespace: str | None = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
    ) -> list[str]:
        """Delete every matching record of this user (``namespace=None``: all namespaces)."""
        clauses = self._where(user_id, namespace, memory_type, filters)
        deleted = await self.run_transaction(lambda conn: self._delete_matching(conn, clauses), op="delete_where")
        if deleted:
            self.note_written(deleted)
            self.note_change(user_id, None)
        return deleted

    async def touch(self, user_id: str, ids: Sequence[str], *, times: int = 1) -> None:
        """Record accesses: ``access_count += times`` and ``last_accessed = now`` (one statement per chunk)."""
        validate_identifier(user_id, "user_id")
        times = validate_positive_int(times, "times")
        wanted = validate_ids(ids)
        if not wanted:
            return
        now = time.time()

        async def work(conn: AsyncConnection) -> None:
            for chunk in batches(sorted(wanted), CHUNK):  # sorted: one lock order for concurrent touches
                await conn.execute(
                    sa.update(memories)
                    .where(self._strategy.owned_by(user_id), memories.c.id.in_(list(chunk)))
                    .values(access_count=memories.c.access_count + times, last_accessed=now)
                )

        await self.run_transaction(work, write=True, op="touch", one_statement=len(wanted) <= CHUNK)

    async def delete_user(self, user_id: str, *, tombstones: bool | Literal["reset"] = True) -> dict[str, int]:
        """Delete every row of ``user_id`` in every registered table with a ``user_id`` column.

        Runs in one transaction. The user's pending outbox rows go too; with ``tombstones``
        (default) an outbox ``delete`` per embedded memory is written in their place, so derived
        vector indexes are cleaned even if the caller stops before ``VectorIndex.delete_user``.
        ``tombstones="reset"`` writes one ``reset`` row naming nobody instead: every process
        mirroring the change log (:meth:`changes_after`) drops what it holds and reads again, and
        no row names the erased user. Returns rows deleted per table.
        """
        validate_identifier(user_id, "user_id")

        async def work(conn: AsyncConnection) -> dict[str, int]:
            counts: dict[str, int] = {}
            outbox = await conn.execute(sa.delete(index_outbox).where(index_outbox.c.user_id == user_id))
            counts[index_outbox.name] = outbox.rowcount
            if tombstones == "reset":
                await conn.execute(sa.insert(index_outbox).values(**_RESET))
            elif tombstones:
                m = memories.c
                await conn.execute(
                    sa.insert(index_outbox).from_select(
                        ["op", "memory_id", "user_id", "space"],
                        sa.select(sa.literal("delete", sa.String), m.id, m.user_id, m.space)
                        .where(m.user_id == user_id, m.embedding.is_not(None))
                        .order_by(m.seq),
                    )
                )
            existing = set(await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names()))
            for table in user_scoped_tables():
                if table is index_outbox or table.name not in existing:  # registered but never created
                    continue
                result = await conn.execute(sa.delete(table).where(table.c.user_id == user_id))
                counts[table.name] = result.rowcount
            return counts

        counts = await self.run_transaction(work, write=True, op="delete_user")
        self.note_change(user_id, None)
        return counts

    # --- reads -------------------------------------------------------------------------------------------

    def _where(
        self,
        user_id: str | None,
        namespace: str | None,
        memory_type: MemoryType | None,
        filters: MemoryFilter | None,
        *,
        any_user: bool = False,
    ) -> list[Any]:
        """The WHERE clauses of a scope and a filter; ``user_id`` is required unless ``any_user`` (admin counts)."""
        if not any_user:
            user_id = validate_identifier(user_id, "user_id")
        return filter_conditions(
            user_id, namespace, memory_type, filters, metadata_equals=self._strategy.metadata_equals
        )

    def _columns(self, with_embeddings: bool, with_keywords: bool = False) -> list[Any]:
        return [
            *_ITEM_COLUMNS,
            memories.c.embedding if with_embeddings else sa.null().label("embedding"),
            memories.c.keyword if with_keywords else sa.null().label("keyword"),
        ]

    @functools.cached_property
    def _lookups(self) -> dict[tuple[bool, bool], sa.Select[Any]]:
        """One user's records by a list of ids (``owner``, ``ids`` bound at execution), by ``with_embeddings``
        and ``with_keywords``, built once per store: every search fetches its candidates so, and building the
        expression cost more than running it."""
        owner = sa.bindparam("owner", type_=sa.String)
        ids = sa.bindparam("ids", expanding=True, type_=sa.String)
        where = (self._strategy.owned_by(owner), memories.c.id.in_(ids))
        return {
            (embedded, keyed): sa.select(*self._columns(embedded, keyed)).where(*where)
            for embedded in (False, True)
            for keyed in (False, True)
        }

    async def get(
        self, user_id: str, ids: Sequence[str], *, with_embeddings: bool = False, with_keywords: bool = False
    ) -> list[Record]:
        """This user's records with these ids, in the given order (others' ids are absent)."""
        validate_identifier(user_id, "user_id")
        wanted = validate_ids(ids)
        if not wanted:
            return []

        statement = self._lookups[with_embeddings, with_keywords]

        async def work(conn: AsyncConnection) -> list[Record]:
            found: dict[str, Record] = {}
            for chunk in batches(wanted, CHUNK):
                result = await conn.execute(statement, {"owner": user_id, "ids": list(chunk)})
                for row in result.mappings():
                    found[row["id"]] = row_to_record(row, with_embeddings, with_keywords)
            return [found[i] for i in wanted if i in found]

        one = len(wanted) <= CHUNK
        return await self.run_transaction(work, write=False, op="get", one_statement=one, small=one)

    async def query(
        self,
        user_id: str,
        *,
        namespace: str = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
        order_by: OrderBy = "timestamp",
        limit: int | None = None,
        offset: int = 0,
        with_embeddings: bool = False,
    ) -> list[Record]:
        """Records matching the filters, ordered (ties by insertion order), paginated."""
        clauses = self._where(user_id, namespace, memory_type, filters)
        if order_by not in _ORDER:
            raise MemoryValidationError("order_by", f"must be one of {', '.join(_ORDER)}, got {order_by!r}")
        column, descending = _ORDER[order_by]
        offset = _count(offset, "offset", 0)
        statement = (
            sa.select(*self._columns(with_embeddings))
            .where(*clauses)
            .order_by(
                column.desc() if descending else column.asc(), memories.c.seq.desc() if descending else memories.c.seq
            )
        )
        if limit is not None:
            statement = statement.limit(_count(limit, "limit", 0))
        if offset:
            statement = statement.offset(offset)

        async def work(conn: AsyncConnection) -> list[Record]:
            result = await conn.execute(statement)
            return [row_to_record(row, with_embeddings) for row in result.mappings()]

        return await self.run_transaction(work, write=False, op="query", one_statement=True)

    async def count(
        self,
        user_id: str | None,
        *,
        namespace: str | None = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
    ) -> int:
        """Number of matching records (``user_id=None``: every user; admin and tests)."""
        clauses = self._where(user_id, namespace, memory_type, filters, any_user=True)
        statement = sa.select(sa.func.count()).select_from(memories).where(*clauses)

        async def work(conn: AsyncConnection) -> int:
            return int((await conn.execute(statement)).scalar_one())

        return await self.run_transaction(work, write=False, op="count", one_statement=True)

    async def keyword_search(
        self,
        user_id: str,
        text: str,
        *,
        namespace: str = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
        limit: int = 20,
    ) -> list[tuple[str, float]]:
        """Full-text search, ``(memory_id, score)`` best first; ``text`` is data, never syntax."""
        clauses = self._where(user_id, namespace, memory_type, filters)
        if not isinstance(text, str):
            raise MemoryValidationError("query", f"must be a string, got {type(text).__name__}")
        limit = _count(limit, "limit", 0)
        tokens = list(dict.fromkeys(index_terms(text)))[:MAX_QUERY_TOKENS]
        if not tokens or limit == 0:
            return []
        statement = self._strategy.keyword_select(tokens, clauses, limit, keyword_scope(user_id, namespace))

        async def work(conn: AsyncConnection) -> list[tuple[str, float]]:
            result = await conn.execute(statement)
            return [(row[0], float(row[1])) for row in result]

        return await self.run_transaction(work, write=False, op="keyword_search", one_statement=True, small=True)

    async def users(self) -> list[str]:
        """Every user id with at least one record, sorted."""
        statement = sa.select(memories.c.user_id).distinct().order_by(memories.c.user_id)

        async def work(conn: AsyncConnection) -> list[str]:
            return list((await conn.execute(statement)).scalars())

        return await self.run_transaction(work, write=False, op="users")

    async def outbox_pending(self, limit: int = 1000) -> list[OutboxOp]:
        """Oldest unapplied index operations (all users), in commit order of their writes."""
        limit = _count(limit, "limit", 1)
        o = index_outbox.c
        statement = sa.select(o.seq, o.op, o.memory_id, o.user_id, o.space).order_by(o.seq).limit(limit)

        async def work(conn: AsyncConnection) -> list[OutboxOp]:
            result = await conn.execute(statement)
            return [
                OutboxOp(seq=int(row[0]), op=row[1], memory_id=row[2], user_id=row[3], space=row[4]) for row in result
            ]

        return await self.run_transaction(work, write=False, op="outbox_pending")

    async def outbox_ack(self, seqs: Sequence[int]) -> None:
        """Mark index operations applied (their rows are deleted)."""
        wanted = sorted({_count(seq, "seqs", 0) for seq in seqs})
        if not wanted:
            return

        async def work(conn: AsyncConnection) -> None:
            for chunk in batches(wanted, CHUNK):
                await conn.execute(sa.delete(index_outbox).where(index_outbox.c.seq.in_(list(chunk))))

        await self.run_transaction(work, write=True, op="outbox_ack")

    async def changes_after(self, cursor: int, limit: int = 1000) -> tuple[list[OutboxOp], int]:
        """The change log after ``cursor`` (SQLite): up to ``limit`` outbox rows with ``seq > cursor``, oldest
        first, and the highest seq ever issued, read in one snapshot.

        Why: every process on an embedded folder mirrors the vectors (:class:`MirrorVectorIndex`) and follows
        this log instead of draining it. SQLite's AUTOINCREMENT never reuses a seq and a rolled-back write
        takes its seq back, so a gap between ``cursor`` and the rows returned means rows were removed
        (pruned, or an erased user's): the caller then reads its state anew.
        """
        cursor = _count(cursor, "cursor", 0)
        limit = _count(limit, "limit", 1)
        statement = sa.text(
            "SELECT * FROM (SELECT seq, op, memory_id, user_id, space FROM index_outbox WHERE seq > :cursor "
            "ORDER BY seq LIMIT :limit) UNION ALL SELECT coalesce((SELECT seq FROM sqlite_sequence "
            "WHERE name = 'index_outbox'), 0), NULL, NULL, NULL, NULL"
        ).bindparams(cursor=cursor, limit=limit)

        async def work(conn: AsyncConnection) -> tuple[list[OutboxOp], int]:
            rows = list(await conn.execute(statement))
            ops = [OutboxOp(seq=int(r[0]), op=r[1], memory_id=r[2], user_id=r[3], space=r[4]) for r in rows[:-1]]
            return ops, int(rows[-1][0])

        return await self.run_transaction(work, write=False, op="changes_after", one_statement=True, small=True)

    async def prune_changes(self, keep: int) -> int:
        """Delete all but the newest ``keep`` rows of the change log; how many went (SQLite, mirrored indexes).

        A process further behind than that sees the gap and reads its state anew (:meth:`changes_after`).
        """
        keep = _count(keep, "keep", 0)
        o = index_outbox.c

        async def work(conn: AsyncConnection) -> int:
            newest = (await conn.execute(sa.select(sa.func.max(o.seq)))).scalar()
            if newest is None:
                return 0
            return (await conn.execute(sa.delete(index_outbox).where(o.seq <= newest - keep))).rowcount

        return await self.run_transaction(work, write=True, op="prune_changes")

    @contextlib.asynccontextmanager
    async def outbox_claim(self, limit: int = 1000) -> AsyncIterator[list[OutboxOp]]:
        """Claim pending operations; acknowledged (deleted) when the block exits cleanly.

        PostgreSQL (many processes share one outbox): one transaction selects the oldest
        operations ``FOR UPDATE SKIP LOCKED`` (a row another drainer holds is skipped, not
        waited for), leaving out any operation with an older one still pending for the same
        memory (held by another drainer, or skipped), so a memory's operations apply one at a
        time and in commit order. The rows are deleted and committed after the block; an
        exception rolls back and leaves them for any process to retry. The block runs while
        the transaction is open, so keep it to applying the operations.

        SQLite (one process, the persist folder lock): read, then acknowledge, as the base class.
        """
        limit = _count(limit, "limit", 1)
        if self._strategy.name != "postgresql":
            async with super().outbox_claim(limit) as ops:
                yield ops
            return
        o = index_outbox.c
        older = index_outbox.alias("older")
        statement = (
            sa.select(o.seq, o.op, o.memory_id, o.user_id, o.space)
            .where(~sa.exists().where(older.c.memory_id == o.memory_id, older.c.seq < o.seq))
            .order_by(o.seq)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        in_block = False
        try:
            async with self.engine.connect() as conn, conn.begin():
                result = await conn.execute(statement)
                ops = [
                    OutboxOp(seq=int(row[0]), op=row[1], memory_id=row[2], user_id=row[3], space=row[4])
                    for row in result
                ]
                in_block = True
                yield ops
                in_block = False
                for chunk in batches([op.seq for op in ops], CHUNK):
                    await conn.execute(sa.delete(index_outbox).where(o.seq.in_(list(chunk))))
        except (asyncio.TimeoutError, SQLAlchemyError, OSError) as exc:
            if in_block:  # the caller's failure (rolled back): not the record store's
                raise
            raise self._store_error("outbox_claim", exc, 1) from exc

    async def iter_embedded(
        self, space: str, *, batch_size: int = 1000, after_seq: int = 0, user_id: str | None = None
    ) -> list[tuple[int, Record]]:
        """Up to ``batch_size`` records (of ``user_id``, or all users) in ``space`` with ``seq > after_seq``."""
        if space is None:
            raise MemoryValidationError("space", "must be a vector space name, got None")
        space = validate_space(space)
        batch_size = _count(batch_size, "batch_size", 1)
        after_seq = _count(after_seq, "after_seq", 0)
        m = memories.c
        statement = (
            sa.select(*self._columns(True))
            .where(m.space == space, m.embedding.is_not(None), m.seq > after_seq)
            .order_by(m.seq)
            .limit(batch_size)
        )
        if user_id is not None:
            statement = statement.where(m.user_id == validate_identifier(user_id, "user_id"))  # the user index

        async def work(conn: AsyncConnection) -> list[tuple[int, Record]]:
            result = await conn.execute(statement)
            return [(int(row["seq"]), row_to_record(row, True)) for row in result.mappings()]

        return await self.run_transaction(work, write=False, op="iter_embedded")
