"""A qdrant-edge folder rebuilt beside the old one: every state a kill can leave opens whole, with no leftover."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest

from llama_index_memory_hierarchy.stores.base import VectorPoint
from llama_index_memory_hierarchy.stores.vector.edge import EdgeVectorIndex
from llama_index_memory_hierarchy.stores.vector.edge_rebuild import recover_rebuilds, staging_folder, switch_in

SPACE, DIM = "space-a", 8


def _folder(persist: Path, users: list[str]) -> Path:
    """A closed shard of the space with one point per user, written where a rebuild writes (``folder=``)."""

    async def build() -> Path:
        index = EdgeVectorIndex(persist, SPACE, DIM, folder=persist / "shard")
        vectors = np.random.default_rng(7).random((len(users), DIM), dtype=np.float32)
        await index.upsert(
            [VectorPoint(str(uuid.uuid4()), v, {"user_id": u}) for u, v in zip(users, vectors, strict=True)]
        )
        await index.close()
        return index.path

    return asyncio.run(build())


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A shard holding user "old" and one holding user "new", built once (a shard takes a second to make)."""
    root = tmp_path_factory.mktemp("shards")
    return _folder(root / "old", ["old"]), _folder(root / "new", ["new"])


def _live_and_staging(tmp_path: Path, shards: tuple[Path, Path]) -> tuple[Path, Path]:
    live = tmp_path / "vectors" / SPACE
    shutil.copytree(shards[0], live)
    staging = staging_folder(live)
    shutil.copytree(shards[1], staging)
    return live, staging


def _users(persist: Path) -> dict[str, int]:
    async def count() -> dict[str, int]:
        index = EdgeVectorIndex(persist, SPACE, DIM)
        try:
            return {user: await index.count(user) for user in ("old", "new")}
        finally:
            await index.close()

    return asyncio.run(count())


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("staging half written", {"old": 1, "new": 0}),
        ("staging complete", {"old": 1, "new": 0}),
        ("between the renames", {"old": 0, "new": 1}),
        ("switched, old half removed", {"old": 0, "new": 1}),
    ],
)
def test_every_state_of_an_interrupted_rebuild_opens_whole(
    tmp_path: Path, shards: tuple[Path, Path], state: str, expected: dict[str, int]
) -> None:
    live, staging = _live_and_staging(tmp_path, shards)
    retired = live.with_name(f".{live.name}.old")
    if state == "staging half written":
        (staging / "edge_config.json").unlink()
    elif state == "between the renames":
        live.rename(retired)
    elif state == "switched, old half removed":
        live.rename(retired)
        staging.rename(live)
        (retired / "edge_config.json").unlink()
    recover_rebuilds(tmp_path / "vectors")  # what an open does first
    assert sorted(p.name for p in (tmp_path / "vectors").iterdir()) == [SPACE]
    assert _users(tmp_path) == expected


def test_switch_in_replaces_the_folder_and_leaves_nothing_beside_it(tmp_path: Path, shards: tuple[Path, Path]) -> None:
    live, staging = _live_and_staging(tmp_path, shards)
    switch_in(live, staging)
    assert sorted(p.name for p in (tmp_path / "vectors").iterdir()) == [SPACE]
    assert _users(tmp_path) == {"old": 0, "new": 1}
