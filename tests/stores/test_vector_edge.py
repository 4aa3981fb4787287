"""EdgeVectorIndex specifics: folder locking, corrupt folders, durability, optimisation."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import StoreError, StoreLockedError
from llama_index_memory_hierarchy.stores.base import VectorFilter, VectorPoint
from llama_index_memory_hierarchy.stores.vector import (
    EdgeVectorIndex,
    LlamaVectorIndex,
    aopen_vector_index,
    open_vector_index,
    qdrant_vector_index,
)

DIM = 16
SPACE = "edge-test-16"


def points(n: int, user: str = "alice", seed: int = 0) -> list[VectorPoint]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    return [VectorPoint(str(uuid.uuid4()), vectors[i], {"user_id": user, "timestamp": float(i)}) for i in range(n)]


async def test_folder_layout_and_second_handle_is_refused(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path, SPACE, DIM)
    assert index.path == (tmp_path / "vectors" / SPACE).resolve()
    assert (index.path / "edge_config.json").is_file()
    with pytest.raises(StoreLockedError, match=str(index.path)):
        EdgeVectorIndex(tmp_path, SPACE, DIM)
    other_space = EdgeVectorIndex(tmp_path, "other-space-16", DIM)  # another folder is independent
    await other_space.close()
    await index.close()
    again = EdgeVectorIndex(tmp_path, SPACE, DIM)  # close released the lock
    await again.close()
    with pytest.raises(StoreError, match="closed"):
        await again.count()


def test_garbage_folders_raise_store_error_naming_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "vectors" / SPACE
    folder.mkdir(parents=True)
    (folder / "edge_config.json").write_text("this is not json")
    with pytest.raises(StoreError, match=str(folder)):
        EdgeVectorIndex(tmp_path, SPACE, DIM)

    (folder / "edge_config.json").unlink()
    (folder / "segments" / "x").mkdir(parents=True)
    (folder / "segments" / "x" / "segment.json").write_text("zzz")
    with pytest.raises(StoreError, match=str(folder)):
        EdgeVectorIndex(tmp_path, SPACE, DIM)


async def test_corrupt_segment_files_raise_store_error(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path, SPACE, DIM)
    await index.upsert(points(20))
    await index.close()
    for root, _dirs, files in os.walk(index.path / "segments"):
        for name in files:
            Path(root, name).write_bytes(b"\xff\x00garbage")
    with pytest.raises(StoreError, match=str(index.path)):
        EdgeVectorIndex(tmp_path, SPACE, DIM)


def test_acknowledged_upserts_survive_a_killed_process(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal, uuid
        import numpy as np
        from llama_index_memory_hierarchy.stores.base import VectorPoint
        from llama_index_memory_hierarchy.stores.vector import EdgeVectorIndex

        async def main():
            index = EdgeVectorIndex({str(tmp_path)!r}, {SPACE!r}, {DIM})
            rng = np.random.default_rng(1)
            for batch in range(3):
                await index.upsert([
                    VectorPoint(str(uuid.uuid4()), rng.standard_normal({DIM}).astype(np.float32), {{"user_id": "u"}})
                    for _ in range(50)
                ])
            await index.delete_user("nobody")
            print("written", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # no close, no flush at exit

        asyncio.run(main())
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "written" in result.stdout

    async def check() -> int:
        index = EdgeVectorIndex(tmp_path, SPACE, DIM)
        try:
            return await index.count("u")
        finally:
            await index.close()

    assert asyncio.run(check()) == 150


async def test_optimize_keeps_results(tmp_path: Path) -> None:
    index = await EdgeVectorIndex.aopen(tmp_path, SPACE, DIM, optimize_every=300, flush_on_write=False)
    batch = points(900, seed=3)
    await index.upsert(batch[:450])  # passes optimize_every: optimises in the write
    await index.upsert(batch[450:])
    await index.delete([p.id for p in batch[:100]])
    assert isinstance(await index.optimize(), bool)
    await index.flush()
    assert await index.count() == 800
    hits = await index.search(batch[500].vector, VectorFilter(user_id="alice"), 3)
    assert hits[0][0] == batch[500].id
    await index.close()


async def test_concurrent_reads_and_writes(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path, SPACE, DIM)
    first = points(200, seed=5)
    await index.upsert(first)
    writes = [index.upsert(points(50, user=f"w{i}", seed=10 + i)) for i in range(4)]
    reads = [index.search(p.vector, VectorFilter(user_id="alice"), 1) for p in first[:20]]
    results = await asyncio.gather(*writes, *reads)
    for p, hits in zip(first[:20], results[4:], strict=True):
        assert hits[0][0] == p.id
    assert await index.count() == 400
    await index.close()


async def test_open_vector_index_follows_the_config(tmp_path: Path) -> None:
    edge = open_vector_index(MemoryConfig(persist_dir=tmp_path), SPACE, DIM)
    assert isinstance(edge, EdgeVectorIndex)
    await edge.close()
    local = await aopen_vector_index(MemoryConfig(persist_dir=tmp_path, vector_backend="qdrant"), SPACE, DIM)
    assert isinstance(local, LlamaVectorIndex)
    await local.upsert(points(3))
    # a second space in the same local folder shares the client instead of failing on its lock
    second = open_vector_index(MemoryConfig(persist_dir=tmp_path, vector_backend="qdrant"), "second-8", 8)
    assert await second.count() == 0
    await second.close()
    assert await local.count() == 3  # closing one index kept the shared client open
    await local.close()
    assert (tmp_path / "qdrant").is_dir()
    with pytest.raises(Exception, match="exactly one"):
        qdrant_vector_index(SPACE, DIM)
