"""Small tables of the lifecycle, on the record store's shared schema metadata.

* ``lifecycle_consolidated``: which memories each consolidation stage already handled (so
  consolidation is idempotent: running it twice creates nothing twice);
* ``lifecycle_summaries``: the running summary of each (user, session) conversation;
* ``lifecycle_state``: per-user cursors (when the last reflection ran, ...);
* ``lifecycle_events``: an audit trail of lifecycle operations (counts, never memory text);
* ``lifecycle_tombstones``: ids of deleted memories (no text), so consolidation never writes one back;
* ``lifecycle_erasures``: user erasures begun and not finished (resumed when the stores next open);
* ``lifecycle_shown``: the access log, what ``get()`` showed (memory ids), when, for which input; written in
  the background (``stores.access``), dropped with the memories it names and with the user.

Every table has a ``user_id`` column, so ``SQLRecordStore.delete_user`` (user erasure) removes
a user's rows from all of them, and the portability module exports and imports them generically.
The tables are registered on :data:`~llama_index_memory_hierarchy.stores.schema.metadata`; the
record store creates registered tables when it opens, and :func:`aensure_tables` creates them
once per store context when this module was imported after the store opened.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from llama_index_memory_hierarchy.errors import StoreError
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.schema import SeqType, memories, metadata

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

consolidated = sa.Table(
    "lifecycle_consolidated",
    metadata,
    sa.Column("user_id", sa.String(128), primary_key=True),
    sa.Column("memory_id", sa.String(36), primary_key=True),
    sa.Column("stage", sa.String(16), primary_key=True),
    sa.Column("session_id", sa.String(128), nullable=True),
    sa.Column("result_ids", sa.Text(), nullable=False),
    sa.Column("at", sa.Double(), nullable=False),
)

summaries = sa.Table(
    "lifecycle_summaries",
    metadata,
    sa.Column("user_id", sa.String(128), primary_key=True),
    sa.Column("session_id", sa.String(128), primary_key=True),
    sa.Column("summary", sa.Text(), nullable=False),
    sa.Column("covered_until", sa.String(36), nullable=True),
    sa.Column("covered_count", sa.Integer(), nullable=False),
    sa.Column("tokens", sa.Integer(), nullable=False),
    sa.Column("method", sa.String(32), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
)

state = sa.Table(
    "lifecycle_state",
    metadata,
    sa.Column("user_id", sa.String(128), primary_key=True),
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
)

events = sa.Table(
    "lifecycle_events",
    metadata,
    sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("at", sa.Double(), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("detail", sa.Text(), nullable=False),
    sa.Index("ix_lifecycle_events_user", "user_id", "seq"),
    sqlite_autoincrement=True,
)

tombstones = sa.Table(
    "lifecycle_tombstones",
    metadata,
    sa.Column("user_id", sa.String(128), primary_key=True),
    sa.Column("memory_id", sa.String(36), primary_key=True),
    sa.Column("at", sa.Double(), nullable=False),
)

#: Keyed by ``erasing_user``, not ``user_id``: ``delete_user`` sweeps every ``user_id`` table, and this
#: row must outlive that sweep (it is deleted last, when nothing of the user is left).
erasures = sa.Table(
    "lifecycle_erasures",
    metadata,
    sa.Column("erasing_user", sa.String(128), primary_key=True),
    sa.Column("started_at", sa.Double(), nullable=False),
)

#: ``erasing_user`` of the marker left between an erasure's deletions and its compaction (names no user;
#: not a valid user id, so it cannot clash with one).
COMPACTION_PENDING = "#compaction"

shown = sa.Table(
    "lifecycle_shown",
    metadata,
    sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("session_id", sa.String(128), nullable=True),
    sa.Column("at", sa.Double(), nullable=False),
    sa.Column("input", sa.Text(), nullable=False),
    sa.Column("memory_ids", sa.Text(), nullable=False),
    sa.Index("ix_lifecycle_shown_user", "user_id", "seq"),
    sqlite_autoincrement=True,
)

#: The lifecycle's tables (export, import and erasure walk every user-scoped table anyway).
TABLES = (consolidated, summaries, state, events, tombstones, shown)


class UserErasedError(StoreError):
    """A lifecycle write for a user whose erasure is under way (refused in the write's own transaction)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


class LifecycleStore:
    """Typed access to the lifecycle tables of one store context (coroutines run on its runtime)."""

    def __init__(self, context: StoreContext) -> None:
        self.context = context

    async def aensure_tables(self) -> None:
        """Create the tables when the record store opened before this module was imported (once)."""
        if not self.context.shared.lifecycle_tables_ready:
            await self.context.records.create_tables()  # type: ignore[attr-defined]
            self.context.shared.lifecycle_tables_ready = True

    async def _run(self, work: Any, *, write: bool, op: str, for_user: str | None = None, lookup: bool = False) -> Any:
        """Run ``work`` in one transaction; a write ``for_user`` first checks, in that transaction, that no
        erasure of that user is under way (why: a consolidation still running when ``forget_user`` began must
        not write the user's id back after it). ``lookup``: ``work`` is one read by key, run at once on this
        thread's SQLite reader (every ``get()`` reads its session's state: through the async engine that took
        a quarter of an ``aget``)."""
        await self.aensure_tables()
        if for_user is not None:
            inner = work

            async def work(conn: AsyncConnection) -> Any:
                erasing = sa.select(erasures.c.erasing_user).where(erasures.c.erasing_user == for_user)
                if (await conn.execute(erasing)).first() is not None:
                    raise UserErasedError(f"{op}: the user is being erased; nothing is written for them")
                return await inner(conn)

        return await self.context.records.run_transaction(  # type: ignore[attr-defined]
            work, write=write, op=op, one_statement=lookup, small=lookup
        )

    async def aleftover_users(self) -> dict[str, int]:
        """``{user_id: rows}`` of the users with consolidation marks or running summaries (derived from their
        memories, so a user who has none left is half-erased: ``ops.verify`` reports them)."""

        async def work(conn: AsyncConnection) -> dict[str, int]:
            found: dict[str, int] = {}
            for table in (consolidated, summaries):
                query = sa.select(table.c.user_id, sa.func.count()).group_by(table.c.user_id)
                for user, count in await conn.execute(query):
                    found[user] = found.get(user, 0) + int(count)
            return found

        return await self._run(work, write=False, op="lifecycle leftovers")

    # ------------------------------------------------------------------ consolidation marks
    async def aconsolidated(self, user_id: str, stage: str, ids: Sequence[str] | None = None) -> dict[str, list[str]]:
        """``{memory_id: result_ids}`` of the memories ``stage`` already handled (of these ids, or all)."""
        c = consolidated.c

        async def work(conn: AsyncConnection) -> dict[str, list[str]]:
            query = sa.select(c.memory_id, c.result_ids).where(c.user_id == user_id, c.stage == stage)
            if ids is not None:
                found: dict[str, list[str]] = {}
                for start in range(0, len(ids), 500):
                    part = list(ids[start : start + 500])
                    rows = await conn.execute(query.where(c.memory_id.in_(part)))
                    found.update({row[0]: json.loads(row[1]) for row in rows})
                return found
            return {row[0]: json.loads(row[1]) for row in await conn.execute(query)}

        return await self._run(work, write=False, op="lifecycle consolidated")

    async def amark(self, user_id: str, stage: str, marks: Iterable[tuple[str, str | None, Sequence[str]]]) -> None:
        """Record ``(memory_id, session_id, result_ids)`` as handled by ``stage`` (replacing earlier marks)."""
        rows = [
            {
                "user_id": user_id,
                "memory_id": memory_id,
                "stage": stage,
                "session_id": session_id,
                "result_ids": _dumps(list(results)),
                "at": time.time(),
            }
            for memory_id, session_id, results in marks
        ]
        if not rows:
            return
        c = consolidated.c

        async def work(conn: AsyncConnection) -> None:
            ids = [row["memory_id"] for row in rows]
            for start in range(0, len(ids), 500):
                await conn.execute(
                    sa.delete(consolidated).where(
                        c.user_id == user_id, c.stage == stage, c.memory_id.in_(ids[start : start + 500])
                    )
                )
            await conn.execute(sa.insert(consolidated), rows)

        await self._run(work, write=True, op="lifecycle mark", for_user=user_id)

    async def aunmark(self, user_id: str, ids: Sequence[str]) -> None:
        """Drop every stage's marks of these (deleted) memories."""
        c = consolidated.c

        async def work(conn: AsyncConnection) -> None:
            for start in range(0, len(ids), 500):
                part = list(ids[start : start + 500])
                await conn.execute(sa.delete(consolidated).where(c.user_id == user_id, c.memory_id.in_(part)))

        if ids:
            await self._run(work, write=True, op="lifecycle unmark")

    # ------------------------------------------------------------------ tombstones
    async def atombstone(self, user_id: str, ids: Sequence[str]) -> None:
        """Record these memories as deleted (ids only)."""
        c = tombstones.c
        now = time.time()

        async def work(conn: AsyncConnection) -> None:
            for start in range(0, len(ids), 500):
                part = list(ids[start : start + 500])
                await conn.execute(sa.delete(tombstones).where(c.user_id == user_id, c.memory_id.in_(part)))
                await conn.execute(
                    sa.insert(tombstones), [{"user_id": user_id, "memory_id": i, "at": now} for i in part]
                )

        if ids:
            await self._run(work, write=True, op="lifecycle tombstone", for_user=user_id)

    async def atombstoned(self, user_id: str, ids: Sequence[str]) -> set[str]:
        """Which of these ids were deleted."""
        c = tombstones.c

        async def work(conn: AsyncConnection) -> set[str]:
            found: set[str] = set()
            for start in range(0, len(ids), 500):
                part = list(ids[start : start + 500])
                rows = await conn.execute(sa.select(c.memory_id).where(c.user_id == user_id, c.memory_id.in_(part)))
                found.update(row[0] for row in rows)
            return found

        return await self._run(work, write=False, op="lifecycle tombstoned") if ids else set()

    # ------------------------------------------------------------------ pending erasures
    async def abegin_erasure(self, user_id: str) -> None:
        """Record that erasing ``user_id`` began (committed before anything is deleted)."""
        c = erasures.c

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(sa.delete(erasures).where(c.erasing_user == user_id))
            await conn.execute(sa.insert(erasures).values(erasing_user=user_id, started_at=time.time()))

        await self._run(work, write=True, op="lifecycle erasure begin")

    async def aend_erasure(self, user_id: str, *, then: str | None = None) -> None:
        """The erasure of ``user_id`` finished: drop its record (replaced by ``then`` in the same transaction)."""
        c = erasures.c

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(sa.delete(erasures).where(c.erasing_user.in_([user_id, *([then] if then else [])])))
            if then:
                await conn.execute(sa.insert(erasures).values(erasing_user=then, started_at=time.time()))

        await self._run(work, write=True, op="lifecycle erasure end")

    async def apending_erasures(self) -> dict[str, float]:
        """``{user_id: started_at}`` of erasures begun and not finished."""

        async def work(conn: AsyncConnection) -> dict[str, float]:
            rows = await conn.execute(sa.select(erasures.c.erasing_user, erasures.c.started_at))
            return {row[0]: float(row[1]) for row in rows}

        return await self._run(work, write=False, op="lifecycle erasures")

    # ------------------------------------------------------------------ state
    async def aget_state(self, user_id: str, key: str, default: Any = None) -> Any:
        """A per-user value (JSON), or ``default``."""
        c = state.c

        async def work(conn: AsyncConnection) -> Any:
            row = (await conn.execute(sa.select(c.value).where(c.user_id == user_id, c.key == key))).first()
            return default if row is None else json.loads(row[0])

        return await self._run(work, write=False, op="lifecycle state", lookup=True)

    async def aset_state(self, user_id: str, key: str, value: Any) -> None:
        """Set a per-user value (JSON)."""
        c = state.c

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(sa.delete(state).where(c.user_id == user_id, c.key == key))
            await conn.execute(
                sa.insert(state).values(user_id=user_id, key=key, value=_dumps(value), updated_at=time.time())
            )

        await self._run(work, write=True, op="lifecycle state", for_user=user_id)

    # ------------------------------------------------------------------ summaries
    async def aget_summary(self, user_id: str, session_id: str) -> dict[str, Any] | None:
        """The running summary row of one conversation, or None."""
        c = summaries.c

        async def work(conn: AsyncConnection) -> dict[str, Any] | None:
            row = (
                (await conn.execute(sa.select(summaries).where(c.user_id == user_id, c.session_id == session_id)))
                .mappings()
                .first()
            )
            return None if row is None else dict(row)

        return await self._run(work, write=False, op="lifecycle summary")

    async def aput_summary(self, row: dict[str, Any]) -> None:
        """Insert or replace the running summary of ``(row['user_id'], row['session_id'])``."""
        c = summaries.c
        row = {**row, "updated_at": row.get("updated_at") or time.time()}

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.delete(summaries).where(c.user_id == row["user_id"], c.session_id == row["session_id"])
            )
            await conn.execute(sa.insert(summaries).values(**row))

        await self._run(work, write=True, op="lifecycle summary", for_user=row["user_id"])

    async def adelete_summary(self, user_id: str, session_id: str) -> None:
        """Forget the running summary of one conversation."""
        c = summaries.c

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(sa.delete(summaries).where(c.user_id == user_id, c.session_id == session_id))

        await self._run(work, write=True, op="lifecycle summary")

    # ------------------------------------------------------------------ audit trail
    async def alog(self, user_id: str, action: str, detail: dict[str, Any]) -> None:
        """Append an audit event (counts and ids only; callers never pass memory text)."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.insert(events).values(user_id=user_id, at=time.time(), action=action[:32], detail=_dumps(detail))
            )

        await self._run(work, write=True, op="lifecycle log", for_user=user_id)

    # ------------------------------------------------------------------ the access log
    async def arecord_shown(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append access-log rows (``user_id``, ``session_id``, ``at``, ``input``, ``memory_ids``) in one insert;
        rows of a user without records are dropped: another process queued them before erasing the user."""
        if not rows:
            return

        async def work(conn: AsyncConnection) -> None:
            users = sorted({row["user_id"] for row in rows})
            found = {
                user
                for user in users
                if (await conn.execute(sa.select(sa.literal(1)).where(memories.c.user_id == user).limit(1))).first()
            }
            kept = [{**row, "memory_ids": _dumps(list(row["memory_ids"]))} for row in rows if row["user_id"] in found]
            if kept:
                await conn.execute(sa.insert(shown), kept)

        await self._run(work, write=True, op="access log")

    async def ashown(self, user_id: str, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        """This user's access log, newest first."""
        c = shown.c

        async def work(conn: AsyncConnection) -> list[dict[str, Any]]:
            query = (
                sa.select(c.at, c.session_id, c.input, c.memory_ids)
                .where(c.user_id == user_id)
                .order_by(c.seq.desc())
                .limit(limit)
                .offset(offset)
            )
            return [
                {"at": at, "session_id": session, "input": text, "memory_ids": json.loads(ids)}
                for at, session, text, ids in (await conn.execute(query)).all()
            ]

        return await self._run(work, write=False, op="access log")

    async def ashown_in_session(
        self, user_id: str, session_id: str, *, after_seq: int, since: float | None, limit: int
    ) -> list[tuple[int, str, list[str]]]:
        """``(seq, input, memory_ids)`` of the session's access-log rows after ``after_seq`` logged at or after
        ``since`` (epoch seconds), the newest ``limit`` of them, oldest first."""
        c = shown.c

        async def work(conn: AsyncConnection) -> list[tuple[int, str, list[str]]]:
            query = (
                sa.select(c.seq, c.input, c.memory_ids)
                .where(c.user_id == user_id, c.session_id == session_id, c.seq > after_seq, c.at >= (since or 0.0))
                .order_by(c.seq.desc())
                .limit(limit)
            )
            rows = (await conn.execute(query)).all()
            return [(int(seq), text, json.loads(ids)) for seq, text, ids in reversed(rows)]

        return await self._run(work, write=False, op="access log", lookup=True)

    async def aforget_shown(self, user_id: str, memory_ids: Sequence[str] | None = None) -> int:
        """Delete the user's access-log rows that name any of ``memory_ids`` (None: all of them); how many."""
        c = shown.c

        async def work(conn: AsyncConnection) -> int:
            query = sa.delete(shown).where(c.user_id == user_id)
            if memory_ids is not None:
                if not memory_ids:
                    return 0
                query = query.where(sa.or_(*(c.memory_ids.contains(f'"{i}"', autoescape=True) for i in memory_ids)))
            return (await conn.execute(query)).rowcount or 0

        return await self._run(work, write=True, op="access log")

    async def aevents(self, user_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """This user's audit events, oldest first."""
        c = events.c

        async def work(conn: AsyncConnection) -> list[dict[str, Any]]:
            query = sa.select(c.at, c.action, c.detail).where(c.user_id == user_id).order_by(c.seq)
            if limit is not None:
                query = query.limit(limit)
            rows = (await conn.execute(query)).all()
            return [{"at": at, "action": action, "detail": json.loads(detail)} for at, action, detail in rows]

        return await self._run(work, write=False, op="lifecycle events")
