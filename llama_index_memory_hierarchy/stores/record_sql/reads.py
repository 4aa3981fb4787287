"""Reads of the record store: records by id, filtered queries, counts, keyword search, embedded scans.

User text is never SQL or query syntax: every value is a bound parameter and keyword queries are
rebuilt from :func:`index_terms`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, Record, RecordStore, batches
from llama_index_memory_hierarchy.stores.record_sql.database import SQLDatabase
from llama_index_memory_hierarchy.stores.record_sql.rows import (
    CHUNK,
    filter_conditions,
    row_to_record,
    sql_count,
    validate_ids,
    validate_space,
)
from llama_index_memory_hierarchy.stores.schema import memories
from llama_index_memory_hierarchy.text import index_terms, keyword_scope
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryType, validate_identifier

OrderBy = Literal["timestamp", "-timestamp", "importance", "-importance", "created_at", "-created_at"]

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


class RecordReads(SQLDatabase, RecordStore):
    """The record store's reads; every one is scoped to a user unless it says otherwise."""

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
        offset = sql_count(offset, "offset", 0)
        statement = (
            sa.select(*self._columns(with_embeddings))
            .where(*clauses)
            .order_by(
                column.desc() if descending else column.asc(), memories.c.seq.desc() if descending else memories.c.seq
            )
        )
        if limit is not None:
            statement = statement.limit(sql_count(limit, "limit", 0))
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
        limit = sql_count(limit, "limit", 0)
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

    async def iter_embedded(
        self, space: str, *, batch_size: int = 1000, after_seq: int = 0, user_id: str | None = None
    ) -> list[tuple[int, Record]]:
        """Up to ``batch_size`` records (of ``user_id``, or all users) in ``space`` with ``seq > after_seq``."""
        if space is None:
            raise MemoryValidationError("space", "must be a vector space name, got None")
        space = validate_space(space)
        batch_size = sql_count(batch_size, "batch_size", 1)
        after_seq = sql_count(after_seq, "after_seq", 0)
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
