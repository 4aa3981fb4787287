"""Corruption: damaged SQLite files and vector segments give a clear error naming the file, never a
crash; the derived indexes are rebuilt from SQLite by ``rebuild_indexes`` (``lmh reindex``)."""

from __future__ import annotations

import glob
import os
import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from store_checks import assert_graph_agrees, assert_indexes_agree, clone_folder, hashing, read_sqlite, vector_ids

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.errors import StoreError, StoreLockedError
from llama_index_memory_hierarchy.ops.rebuild import rebuild_indexes
from llama_index_memory_hierarchy.ops.verify import averify_indexes, verify_indexes

FACTS = [
    "Ana's flight to Porto leaves on Friday at 7 am",
    "the wifi password is written on the fridge",
    "Luis is allergic to peanuts",
    "the car is booked for its service on the 12th",
    "grandma's birthday is on the 3rd of May",
] + [f"filler memory number {i} about groceries and errands" for i in range(40)]


def _garbage(size: int) -> bytes:
    """Random bytes from a fixed seed: the same damage every run, so a failure can be reproduced (qdrant-edge once
    aborted the whole process on one unseeded draw of the segment damage)."""
    return random.Random(size).randbytes(size)


def _open(folder: Path, user: str = "alice") -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id=user, session_id="s1", persist_dir=str(folder), embed_model=hashing()
    )


@pytest.fixture(scope="module", autouse=True)
def _edge_vectors() -> Iterator[None]:
    """These tests damage qdrant-edge folders, the explicit on-disk backend (the default keeps no vector file)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LMH_VECTOR_BACKEND", "edge")
        yield


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with memories of two users, closed (built once, cloned per test)."""
    folder = tmp_path_factory.mktemp("template") / "memory_data"
    with _open(folder) as alice, _open(folder, "bob") as bob:
        alice.episodic.add_many(FACTS)
        bob.episodic.add_many(["bob keeps his bike in the basement", "bob's locker code is 4471"])
        alice.semantic.add_facts([("Ana", "flies_to", "Porto"), ("Luis", "allergic_to", "Peanuts")])
    return folder


@pytest.fixture
def filled(template: Path, tmp_path: Path) -> Path:
    return clone_folder(template, tmp_path / "memory_data")


def _assert_healthy(folder: Path) -> None:
    with _open(folder) as memory:
        assert memory.episodic.retrieve("who is allergic to peanuts?", limit=1)[0].content == FACTS[2]
        assert len(memory.episodic.get_timeline()) == len(FACTS)
        assert_indexes_agree(read_sqlite(folder), memory.context.runtime.run(vector_ids(memory.context)))


def _expect_store_error(folder: Path, names: str) -> StoreError:
    """Opening and using the folder fails with a StoreError naming ``names``; twice (the lock is released)."""
    caught: StoreError | None = None
    for _ in range(2):
        try:
            with _open(folder) as memory:
                memory.episodic.retrieve("who is allergic to peanuts?", limit=3)
                memory.episodic.get_timeline()
        except StoreLockedError as exc:  # pragma: no cover - the failure must release the folder
            raise AssertionError(f"a failed open left the folder locked: {exc}") from exc
        except StoreError as exc:
            caught = exc
            assert names in str(exc), str(exc)
        else:
            raise AssertionError("the damaged store opened and answered without an error")
    assert caught is not None
    return caught


# --------------------------------------------------------------------------------------------------
# the record store (the source of truth: a clear error, no rebuild from nothing)
# --------------------------------------------------------------------------------------------------


def test_garbage_sqlite_file_is_named(filled: Path) -> None:
    db = filled / "memory.db"
    db.write_bytes(_garbage(db.stat().st_size))
    error = _expect_store_error(filled, str(db))
    assert "not a SQLite database" in str(error)


def test_truncated_sqlite_file_is_named(filled: Path) -> None:
    db = filled / "memory.db"
    with db.open("r+b") as handle:
        handle.truncate(db.stat().st_size // 2)
    error = _expect_store_error(filled, str(db))
    assert "truncated" in str(error)


def test_damaged_page_inside_sqlite_file_is_named(filled: Path) -> None:
    """Header intact, a data page overwritten: SQLite reports 'malformed' on the page; we name the file."""
    db = filled / "memory.db"
    connection = sqlite3.connect(str(db))
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    root = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'memories'").fetchone()[0]
    connection.close()
    with db.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(_garbage(page_size))
    _expect_store_error(filled, str(db))


def test_garbage_wal_file_does_not_break_the_store(filled: Path) -> None:
    """SQLite ignores WAL frames whose checksums fail; committed, checkpointed data stays readable."""
    with _open(filled) as memory:
        memory.context.runtime.run(memory.context.records.close())
    (filled / "memory.db-wal").write_bytes(_garbage(64 * 1024))
    _assert_healthy(filled)


# --------------------------------------------------------------------------------------------------
# vector segments (derived: a clear error, then a rebuild from SQLite)
# --------------------------------------------------------------------------------------------------


def _space_folder(folder: Path) -> Path:
    [space] = (folder / "vectors").iterdir()
    return space


def _segment(folder: Path) -> Path:
    return Path(sorted(glob.glob(str(_space_folder(folder) / "segments" / "*")))[0])


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("segment.json", lambda seg, space: (seg / "segment.json").write_bytes(_garbage(200))),
        ("id tracker", lambda seg, space: (seg / "mutable_id_tracker.mappings").write_bytes(_garbage(300))),
        ("wal", lambda seg, space: (space / "wal" / "open-1").write_bytes(_garbage(4096))),
        ("edge_config.json", lambda seg, space: (space / "edge_config.json").write_bytes(b"\x00{not json")),
        ("vectors truncated", lambda seg, space: os.truncate(seg / "vector_storage" / "vectors" / "chunk_0.mmap", 100)),
    ],
)
def test_damaged_vector_segment_is_named_then_rebuilt(filled: Path, name: str, damage: Any) -> None:
    space = _space_folder(filled)
    damage(_segment(filled), space)
    error = _expect_store_error(filled, str(space))
    assert "reindex" in str(error) or "rebuild" in str(error), str(error)
    report = rebuild_indexes(filled, embed_model=hashing())
    assert report.spaces == {space.name: len(FACTS) + 4}
    _assert_healthy(filled)
    with _open(filled, "bob") as bob:
        assert bob.episodic.retrieve("locker code", limit=1)[0].content == "bob's locker code is 4471"


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_graph_file_is_named_then_rebuilt(filled: Path, damage: str) -> None:
    graph = filled / "graph.db"
    for extra in ("graph.db-wal", "graph.db-shm"):
        (filled / extra).unlink(missing_ok=True)
    if damage == "garbage":
        graph.write_bytes(_garbage(graph.stat().st_size))
    else:
        os.truncate(graph, 200)
    with _open(filled) as memory:
        assert memory.episodic.retrieve("who is allergic to peanuts?", limit=1)[0].content == FACTS[2]  # unaffected
        with pytest.raises(StoreError) as caught:
            memory.semantic.get_related_entities("Luis")
        assert str(graph) in str(caught.value) and "reindex" in str(caught.value)
    report = rebuild_indexes(filled, embed_model=hashing())
    assert report.graph_replaced and report.graph_users == {"alice": 2}
    with _open(filled) as memory:
        assert [r.name for r in memory.semantic.get_related_entities("Luis")] == ["Peanuts"]
        assert_graph_agrees(read_sqlite(filled), filled)


def test_rebuild_repairs_a_damaged_keyword_index(filled: Path) -> None:
    db = sqlite3.connect(str(filled / "memory.db"))
    db.execute("DELETE FROM memories_fts_data WHERE id > 10")  # lose most of the FTS5 b-tree
    db.commit()
    db.close()
    assert read_sqlite(filled).fts_integrity != "ok"
    report = rebuild_indexes(filled, embed_model=hashing())
    assert report.keyword_index and report.records == len(FACTS) + 4
    assert read_sqlite(filled).fts_integrity == "ok"
    with _open(filled) as memory:
        hits = memory.context.runtime.run(memory.context.records.keyword_search("alice", "peanuts", limit=5))
        peanuts = next(i.id for i in memory.episodic.get_timeline() if "peanuts" in i.content)
        assert peanuts in [memory_id for memory_id, _ in hits]


def test_rebuild_drops_stray_spaces_and_acknowledges_the_outbox(filled: Path, tmp_path: Path) -> None:
    stray = filled / "vectors" / "old-model-8"
    shutil.copytree(_space_folder(filled), stray)
    (stray / "edge_config.json").write_text((stray / "edge_config.json").read_text().replace('"size":384', '"size":8'))
    db = sqlite3.connect(str(filled / "memory.db"))
    db.execute(
        "INSERT INTO index_outbox (op, memory_id, user_id, space) SELECT 'upsert', id, user_id, space FROM memories"
    )
    db.commit()
    db.close()
    report = rebuild_indexes(filled, embed_model=hashing())
    assert report.removed_spaces == ["old-model-8"] and not stray.exists()
    assert report.outbox_acknowledged == len(FACTS) + 4
    checked = verify_indexes(filled, embed_model=hashing())
    assert checked.ok, checked


def test_verify_reports_differences_and_repairs_them(filled: Path) -> None:
    with _open(filled) as memory:
        context = memory.context
        index = context.runtime.run(context.avector_index(_space_folder(filled).name, 384))
        some = sorted(context.runtime.run(index.ids()))[:3]
        context.runtime.run(index.delete(some))  # behind the record store's back

        report = context.runtime.run(averify_indexes(context))
        assert not report.ok and report.spaces[0].missing == some
        repaired = context.runtime.run(averify_indexes(context, repair=True))
        assert repaired.spaces[0].repaired
        assert context.runtime.run(averify_indexes(context)).ok


def test_rebuild_without_a_database_is_an_empty_rebuild(tmp_path: Path) -> None:
    report = rebuild_indexes(tmp_path / "fresh", embed_model=hashing())
    assert report.records == 0 and report.spaces == {}


def test_non_finite_vector_in_a_segment_does_not_crash(filled: Path) -> None:
    """Garbage floats inside the vector file: searches still answer (from damaged data) without crashing,
    and a rebuild restores the exact vectors from SQLite."""
    chunk = _segment(filled) / "vector_storage" / "vectors" / "chunk_0.mmap"
    with chunk.open("r+b") as handle:
        handle.write(np.full(384 * 8, np.nan, dtype=np.float32).tobytes())
    with _open(filled) as memory:
        memory.episodic.retrieve("anything at all", limit=3)
    rebuild_indexes(filled, embed_model=hashing())
    _assert_healthy(filled)
