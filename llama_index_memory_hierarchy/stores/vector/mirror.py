"""``MirrorVectorIndex``: the embedded vector index, an exact in-process mirror of the embeddings in SQLite.

Why: the record store already holds every memory's embedding, and SQLite (WAL) is safe for many
processes; an index file beside it is not (qdrant-edge's folder serves one process). So each process
keeps its own copy, in memory, of the vectors of the users it serves, and nothing shared and mutable
lives outside SQLite: crash safety and erasure come from SQLite alone, and any number of processes open
one folder. ``StoreContext`` keeps the mirror current from the record store's change log (every write's
``index_outbox`` row, read by sequence number) before each search.

A user's vectors are read from the record store on the first search of that user (``loader``), so a
process holds only the users it serves; changes to users not loaded are skipped (their later load
reads them). Without a ``loader`` every user counts as loaded: a plain in-memory index.

Search is exact (the payload filter, then a matrix product over the user's points that pass it, in place
unless the filter is narrow): about 0.1 ms per thousand 384-d points on an idle machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from llama_index_memory_hierarchy.stores.base import VectorFilter, VectorIndex, VectorPoint
from llama_index_memory_hierarchy.stores.vector._common import (
    FLOAT_KEYS,
    KEYWORD_KEYS,
    check_limit,
    check_vector,
    prepare_filter,
    prepare_ids,
    prepare_points,
    validate_dim,
    validate_space,
)
from llama_index_memory_hierarchy.types import validate_identifier

#: Reads the points of one user (``None``: every user) of this index's space from the record store.
PointLoader = Callable[[str | None], Awaitable[list[VectorPoint]]]


class _Block:
    """The points of one user: unit vectors in one growing matrix, the filter keys in columns beside it.

    The keys every memory carries (``KEYWORD_KEYS`` as integer codes, ``FLOAT_KEYS`` as floats) are kept
    column by column as points come and go, so a search after a write rebuilds nothing; other payload
    keys are read from the payloads when a filter names them.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.n = 0
        self.matrix = np.empty((0, dim), dtype=np.float32)
        self.ids: list[str] = []
        self.payloads: list[dict[str, Any]] = []
        self.pos: dict[str, int] = {}
        self.codes: dict[str, dict[Any, int]] = {key: {} for key in KEYWORD_KEYS}
        self.columns: dict[str, np.ndarray] = {key: np.empty(0, dtype=np.int32) for key in KEYWORD_KEYS}
        self.columns.update({key: np.empty(0, dtype=np.float64) for key in FLOAT_KEYS})

    def _grow(self) -> None:
        size = max(16, 2 * self.n)
        grown = np.empty((size, self.dim), dtype=np.float32)
        grown[: self.n] = self.matrix[: self.n]
        self.matrix = grown
        for key, column in self.columns.items():
            wider = np.empty(size, dtype=column.dtype)
            wider[: self.n] = column[: self.n]
            self.columns[key] = wider

    def _set_row(self, row: int, payload: dict[str, Any]) -> None:
        for key in KEYWORD_KEYS:
            value = payload.get(key)
            codes = self.codes[key]
            self.columns[key][row] = -1 if value is None else codes.setdefault(value, len(codes))
        for key in FLOAT_KEYS:
            value = payload.get(key)
            self.columns[key][row] = np.nan if value is None else float(value)

    def put(self, point_id: str, unit: np.ndarray, payload: dict[str, Any]) -> None:
        row = self.pos.get(point_id)
        if row is None:
            if self.n == self.matrix.shape[0]:
                self._grow()
            row = self.n
            self.n += 1
            self.ids.append(point_id)
            self.payloads.append(payload)
            self.pos[point_id] = row
        else:
            self.payloads[row] = payload
        self.matrix[row] = unit
        self._set_row(row, payload)

    def remove(self, point_id: str) -> bool:
        row = self.pos.pop(point_id, None)
        if row is None:
            return False
        last = self.n - 1
        if row != last:  # the last point takes the freed row
            moved = self.ids[last]
            self.matrix[row] = self.matrix[last]
            for column in self.columns.values():
                column[row] = column[last]
            self.ids[row] = moved
            self.payloads[row] = self.payloads[last]
            self.pos[moved] = row
        self.ids.pop()
        self.payloads.pop()
        self.n = last
        return True

    def matches(self, key: str, value: Any) -> np.ndarray:
        """Rows whose ``key`` equals ``value`` (a list: any of them)."""
        wanted = value if isinstance(value, list) else [value]
        if key in self.codes:
            codes = [self.codes[key][v] for v in wanted if v in self.codes[key]]
            return np.isin(self.columns[key][: self.n], codes)
        return np.array([p.get(key) in wanted for p in self.payloads], dtype=bool)

    def numbers(self, key: str) -> np.ndarray:
        """The values of ``key`` as floats (NaN where absent or not a number)."""
        if key in FLOAT_KEYS:
            return self.columns[key][: self.n]
        out = np.full(self.n, np.nan)
        for i, payload in enumerate(self.payloads):
            value = payload.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[i] = value
        return out


class MirrorVectorIndex(VectorIndex):
    """An exact, in-process :class:`VectorIndex` of one space, loaded per user from the record store."""

    def __init__(self, space: str, dim: int, loader: PointLoader | None = None) -> None:
        self.space = validate_space(space)
        self.dim = validate_dim(dim)
        self._loader = loader
        self._blocks: dict[str, _Block] = {}
        self._owner: dict[str, str] = {}  # point id -> user id
        self._load_lock = asyncio.Lock()

    def loaded(self, user_id: str) -> bool:
        """Whether this process holds ``user_id``'s points (changes to other users need not be applied)."""
        return self._loader is None or user_id in self._blocks

    def forget(self) -> None:
        """Drop every loaded user (each is read again from the record store on its next search)."""
        if self._loader is not None:
            self._blocks.clear()
            self._owner.clear()

    async def _ablock(self, user_id: str) -> _Block | None:
        block = self._blocks.get(user_id)
        if block is not None or self._loader is None:
            return block
        async with self._load_lock:
            if user_id not in self._blocks:
                self._fill(await self._loader(user_id), {user_id})
            return self._blocks[user_id]

    def _fill(self, points: list[VectorPoint], users: set[str]) -> None:
        """Install freshly read points (replacing what those users held)."""
        for user_id in users:
            self._drop(user_id)
            self._blocks[user_id] = _Block(self.dim)
        for point in points:
            user_id = str(point.payload.get("user_id"))
            if user_id not in self._blocks:
                self._drop(user_id)
                self._blocks[user_id] = _Block(self.dim)
            self._put(user_id, point.id, np.asarray(point.vector, dtype=np.float32), point.payload)

    def _drop(self, user_id: str) -> None:
        block = self._blocks.pop(user_id, None)
        if block is not None:
            for point_id in block.ids:
                self._owner.pop(point_id, None)

    def _put(self, user_id: str, point_id: str, vector: np.ndarray, payload: dict[str, Any]) -> None:
        previous = self._owner.get(point_id)
        if previous is not None and previous != user_id and previous in self._blocks:
            self._blocks[previous].remove(point_id)
        block = self._blocks.setdefault(user_id, _Block(self.dim))
        block.put(point_id, vector / np.float32(np.linalg.norm(vector)), payload)
        self._owner[point_id] = user_id

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        for point in prepare_points(points, self.dim):
            user_id = point.payload["user_id"]
            if self.loaded(user_id):
                self._put(user_id, point.id, point.vector, point.payload)
            else:  # read with the user's other points when the user is first searched
                self._remove(point.id)

    def _remove(self, point_id: str) -> None:
        user_id = self._owner.pop(point_id, None)
        if user_id is not None and user_id in self._blocks:
            self._blocks[user_id].remove(point_id)

    async def delete(self, ids: Sequence[str]) -> None:
        for point_id in prepare_ids(ids):
            self._remove(point_id)

    async def delete_user(self, user_id: str) -> None:
        self._drop(validate_identifier(user_id, "user_id"))
        if self._loader is not None:  # nothing of the user is left to read: an empty block saves the query
            self._blocks[user_id] = _Block(self.dim)

    async def search(self, vector: np.ndarray, flt: VectorFilter, limit: int) -> list[tuple[str, float]]:
        query = check_vector(vector, self.dim, "vector")
        prepared = prepare_filter(flt)
        limit = check_limit(limit)
        if prepared.empty or limit == 0:
            return []
        block = await self._ablock(prepared.user_id)
        if block is None or block.n == 0:
            return []
        mask = np.ones(block.n, dtype=bool)
        for key, value in prepared.equals.items():
            mask &= block.matches(key, value)
        for key, (low, high) in prepared.ranges.items():
            column = block.numbers(key)
            with np.errstate(invalid="ignore"):
                if low is not None:
                    mask &= column >= low
                if high is not None:
                    mask &= column <= high
        if prepared.ids is not None:
            wanted = np.zeros(block.n, dtype=bool)
            wanted[[block.pos[i] for i in prepared.ids if i in block.pos]] = True
            mask &= wanted
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        unit = query / np.float32(np.linalg.norm(query))
        if rows.size * 4 < block.n:  # a narrow filter: copy its rows out
            scores = block.matrix[rows] @ unit
        else:  # most rows pass: scoring all of them in place is cheaper than copying most of the matrix
            scores = block.matrix[: block.n] @ unit
            scores = scores if rows.size == block.n else scores[rows]
        if limit < rows.size:
            top = np.argpartition(-scores, limit - 1)[:limit]
            top = top[np.argsort(-scores[top], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")
        return [(block.ids[int(rows[t])], float(scores[t])) for t in top]

    async def _aall(self) -> None:
        """Hold every user of the space (counts and ids of the whole index: checks and repair)."""
        if self._loader is not None:
            async with self._load_lock:
                points = await self._loader(None)
                self._blocks.clear()
                self._owner.clear()
                self._fill(points, set())

    async def count(self, user_id: str | None = None) -> int:
        if user_id is None:
            await self._aall()
            return sum(block.n for block in self._blocks.values())
        block = await self._ablock(validate_identifier(user_id, "user_id"))
        return 0 if block is None else block.n

    async def ids(self, user_id: str | None = None) -> set[str]:
        if user_id is None:
            await self._aall()
            return set(self._owner)
        block = await self._ablock(validate_identifier(user_id, "user_id"))
        return set() if block is None else set(block.ids)

    async def close(self) -> None:
        self._blocks.clear()
        self._owner.clear()

    def __repr__(self) -> str:
        return f"MirrorVectorIndex(space={self.space!r}, dim={self.dim}, users={len(self._blocks)})"
