"""Writes of the record store: inserts, updates, keyword rewrites, deletes, access counts and erasure.

Each is one transaction: the rows, their keyword text and the ``index_outbox`` rows the vector
indexes follow commit together or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, Record, batches
from llama_index_memory_hierarchy.stores.record_sql.reads import RecordReads
from llama_index_memory_hierarchy.stores.record_sql.rows import (
    CHUNK,
    akeyword_texts,
    build_rows,
    canonical_json,
    content_hash,
    embedding_bytes,
    row_to_record,
    validate_ids,
    validate_space,
)
from llama_index_memory_hierarchy.stores.schema import index_outbox, memories, user_scoped_tables
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

#: The change-log row an erasure leaves instead of tombstones naming the user (``delete_user(tombstones="reset")``).
_RESET = {"op": "reset", "memory_id": "", "user_id": "", "space": None}


class RecordWrites(RecordReads):
    """The record store's writes (on its reads: ``delete_where`` deletes what a query would find)."""

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
