"""Store reconciliation with the stores alone (no tier): vector indexes repaired from the record store,
and the keyword analysis version kept beside the keyword text (``stores.reconcile``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import sqlalchemy as sa

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.language import ANALYZER_VERSION
from llama_index_memory_hierarchy.runtime import get_runtime
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.reconcile import (
    ANALYZER_COMPONENT,
    acheck_indexes,
    analyzer_version,
    areconcile_vectors,
    set_analyzer_version,
)
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.stores.schema import schema_info
from llama_index_memory_hierarchy.stores.vector import record_to_point
from llama_index_memory_hierarchy.types import MemoryItem

SPACE, DIM = "reconcile-test-8", 8


def _records(count: int, seed: int) -> list[Record]:
    vectors = np.random.default_rng(seed).normal(size=(count, DIM)).astype(np.float32)
    return [
        Record(item=MemoryItem(content=f"note {seed}-{i}", user_id="ann"), embedding=vector, space=SPACE)
        for i, vector in enumerate(vectors)
    ]


def test_lost_and_stray_points_are_repaired_from_the_records(tmp_path: Path) -> None:
    """An index kept on disk (qdrant-edge) can drift from the records; the in-process mirrors cannot."""
    config = MemoryConfig.create(persist_dir=tmp_path / "memory", embed_model="hashing", vector_backend="edge")
    context = StoreContext.acquire(config)
    run = context.runtime.run
    try:
        ids = run(context.awrite(_records(6, seed=1), embed=False))
        index = run(context.avector_index(SPACE, DIM))
        run(index.delete(ids[:2]))  # points the index lost behind the record store's back
        stray = _records(1, seed=2)[0]  # and a point whose record does not exist
        run(index.upsert([record_to_point(stray)]))

        found = run(acheck_indexes(context))
        (space,) = [s for s in found.spaces if s.space == SPACE]
        assert not found.ok and space.missing == sorted(ids[:2]) and space.extra == [stray.item.id]

        (report,) = [r for r in run(areconcile_vectors(context)) if r.space == SPACE]
        assert report.repaired and report.missing == sorted(ids[:2]) and report.extra == [stray.item.id]
        assert run(index.ids()) == set(ids)
        assert run(acheck_indexes(context)).ok
    finally:
        context.release()


def test_the_keyword_analysis_version_is_kept_beside_the_keyword_text(tmp_path: Path) -> None:
    async def scenario() -> list[int]:
        seen: list[int] = []
        async with SQLRecordStore(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}") as store:
            seen.append(await analyzer_version(store))  # a new, empty store: written by this analysis
            await store.insert(_records(1, seed=3))
            drop = sa.delete(schema_info).where(schema_info.c.component == ANALYZER_COMPONENT)
            await store.run_transaction(lambda conn: conn.execute(drop))
            seen.append(await analyzer_version(store))  # records and no version: written before versions
            await store.run_transaction(lambda conn: set_analyzer_version(conn, ANALYZER_VERSION))
            seen.append(await analyzer_version(store))
        return seen

    assert get_runtime().run(scenario()) == [ANALYZER_VERSION, 1, ANALYZER_VERSION]
