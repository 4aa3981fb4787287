"""Restarts: a folder held by another process, reopening, forks, and schema versions."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from store_checks import assert_indexes_agree, hashing, read_sqlite, vector_ids

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.errors import SchemaVersionError, StoreError, StoreLockedError

HOLDER = textwrap.dedent(
    """
    import sys
    from llama_index_memory_hierarchy import HierarchicalMemory
    memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="s1", persist_dir=sys.argv[1],
                                              embed_model="hashing")
    memory.episodic.add("written by the holder before the intruder came")
    print("READY", flush=True)
    sys.stdin.readline()  # the parent tries to open the folder meanwhile
    memory.episodic.add("written by the holder after the intruder left")
    memory.close()
    print("DONE", flush=True)
    """
)


def _open(folder: Path, user: str = "alice", **kwargs: Any) -> HierarchicalMemory:
    kwargs.setdefault("embed_model", "hashing")
    return HierarchicalMemory.from_defaults(user_id=user, session_id="s1", persist_dir=str(folder), **kwargs)


def test_folder_open_in_another_process_opens_here_too_and_refuses_only_a_job_alone(tmp_path: Path) -> None:
    """Issue 30: a second process opens a folder another holds and both write; a job that needs the folder
    alone (``lmh reindex``) is refused while anyone has it open, naming why, and changes nothing."""
    folder = tmp_path / "memory_data"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "READY"
        with _open(folder) as memory:
            assert [i.content for i in memory.episodic.get_timeline()] == [
                "written by the holder before the intruder came"
            ]
            memory.episodic.add("written by the second process meanwhile")
        from llama_index_memory_hierarchy.ops.rebuild import rebuild_indexes

        with pytest.raises(StoreLockedError) as caught:
            rebuild_indexes(folder)
        assert str(folder.resolve()) in str(caught.value) and "alone" in str(caught.value)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "DONE"
        assert holder.wait(60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
    with _open(folder) as memory:
        assert sorted(i.content for i in memory.episodic.get_timeline()) == [
            "written by the holder after the intruder left",
            "written by the holder before the intruder came",
            "written by the second process meanwhile",
        ]
        assert_indexes_agree(read_sqlite(folder), memory.context.runtime.run(vector_ids(memory.context)))


def test_same_folder_with_other_settings_in_one_process_shares_the_records(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    with _open(folder) as memory:
        with _open(folder, user="bob") as other:  # same settings: one shared set of stores
            assert other.context is memory.context
        with _open(folder, embed_model=hashing()) as apart:  # other settings: other stores, the same records
            assert apart.context is not memory.context
            apart.episodic.add("written through the other settings")
            assert [i.content for i in memory.episodic.retrieve("other settings", limit=1)] == [
                "written through the other settings"
            ]


def test_reopening_many_times_keeps_everything(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    ids: list[str] = []
    for round_no in range(4):
        with _open(folder) as memory:
            assert [i.id for i in memory.episodic.get_timeline()] == ids
            ids += memory.episodic.add_many([f"round {round_no} fact {i}" for i in range(5)])
    with _open(folder) as memory:
        assert len(memory.episodic.get_timeline()) == 20
        assert_indexes_agree(read_sqlite(folder), memory.context.runtime.run(vector_ids(memory.context)))


FORKED = textwrap.dedent(
    """
    import os, sys
    from llama_index_memory_hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.errors import StoreLockedError
    memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="s1", persist_dir=sys.argv[1],
                                              embed_model="hashing")
    memory.episodic.add("before the fork")
    pid = os.fork()
    if pid == 0:
        outcome = []
        try:
            memory.episodic.add("from the forked child")  # an inherited object must not hang
        except RuntimeError as exc:
            outcome.append(f"inherited:{'fork' in str(exc)}")
        try:
            HierarchicalMemory.from_defaults(user_id="alice", persist_dir=sys.argv[1], embed_model="hashing")
            outcome.append("reopen:ok")  # the folder serves many processes
        except StoreLockedError as exc:
            outcome.append("reopen:locked")
        print(" ".join(outcome), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    memory.episodic.add("after the fork")
    print(len(memory.episodic.get_timeline()), flush=True)
    memory.close()
    """
)


def test_forked_child_gets_an_error_not_a_hang(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    done = subprocess.run(
        [sys.executable, "-c", FORKED, str(folder)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["inherited:True reopen:ok", "2"], done.stdout


# --------------------------------------------------------------------------------------------------
# schema versions
# --------------------------------------------------------------------------------------------------


def _schema_version(folder: Path) -> int:
    db = sqlite3.connect(str(folder / "memory.db"))
    try:
        return db.execute("SELECT version FROM schema_info WHERE component = 'record_store'").fetchone()[0]
    finally:
        db.close()


REVISION = """
import sqlalchemy as sa
from alembic import op

revision = "reliability_next"
down_revision = "{head}"
branch_labels = None
depends_on = None
schema_version = {version}


def upgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("reliability_extra", sa.Integer(), nullable=True))
    if {fail}:
        raise RuntimeError("migration step failed half-way")
"""


def _columns(folder: Path) -> set[str]:
    db = sqlite3.connect(str(folder / "memory.db"))
    try:
        return {row[1] for row in db.execute("PRAGMA table_info(memories)")}
    finally:
        db.close()


def _baseline_database(folder: Path) -> str:
    """A database as the oldest schema (the baseline revision) left it, with one memory in it."""
    import time
    import uuid

    from alembic import command

    from llama_index_memory_hierarchy.stores import migrations

    folder.mkdir(parents=True)
    engine = sa.create_engine(f"sqlite:///{folder / 'memory.db'}")
    with engine.begin() as conn:
        command.upgrade(migrations.alembic_config(conn), migrations.BASELINE_REVISION)
    engine.dispose()
    memory_id = str(uuid.uuid4())
    values = {
        "id": memory_id,
        "user_id": "alice",
        "session_id": "s1",
        "namespace": "memory",
        "memory_type": "episodic",
        "content": "a memory written by the oldest schema",
        "content_hash": "0" * 64,
        "timestamp": time.time(),
        "created_at": time.time(),
        "importance": 0.5,
        "access_count": 0,
        "pinned": 0,
        "metadata": "{}",
        "keyword": "a memory written by the oldest schema",
    }
    db = sqlite3.connect(str(folder / "memory.db"))
    for _, name, kind, notnull, default, primary in db.execute("PRAGMA table_info(memories)").fetchall():
        if name not in values and notnull and default is None and not primary:
            values[name] = 0 if "INT" in kind.upper() or "FLOAT" in kind.upper() or "DOUBLE" in kind.upper() else ""
    db.execute(
        f"INSERT INTO memories ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", list(values.values())
    )
    db.commit()
    db.close()
    return memory_id


def test_older_schema_is_migrated_on_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database at the oldest revision is migrated on open, keeps its data and indexes it; a failing
    revision leaves the database exactly as it was."""
    import functools

    from llama_index_memory_hierarchy.stores import migrations

    folder = tmp_path / "memory_data"
    kept = _baseline_database(folder)
    with _open(folder) as memory:
        item = memory.episodic.get(kept)
        assert item is not None and item.content == "a memory written by the oldest schema"
        memory.episodic.add("a memory written by the current schema")
        assert len(memory.episodic.get_timeline()) == 2
    head, version = migrations.head_revision(), migrations.head_schema_version()
    assert _schema_version(folder) == version

    versions = tmp_path / "versions"
    versions.mkdir()
    revision = versions / "reliability_next.py"
    revision.write_text(REVISION.format(head=head, version=version + 1, fail=True))
    extra = (str(versions),)
    monkeypatch.setattr(migrations, "upgrade", functools.partial(migrations.upgrade, extra_locations=extra))
    monkeypatch.setattr(migrations, "head_schema_version", lambda extra_locations=(): version + 1)
    migrations._cached_script.cache_clear()
    with pytest.raises(Exception, match="half-way"):
        _open(folder)
    assert _schema_version(folder) == version and "reliability_extra" not in _columns(folder)  # rolled back

    revision.write_text(REVISION.format(head=head, version=version + 1, fail=False))
    migrations._cached_script.cache_clear()
    with _open(folder) as memory:
        assert memory.episodic.get(kept).content == "a memory written by the oldest schema"
        memory.episodic.add("a memory written by the next schema")
        assert_indexes_agree(read_sqlite(folder), memory.context.runtime.run(vector_ids(memory.context)))
    assert _schema_version(folder) == version + 1 and "reliability_extra" in _columns(folder)
    migrations._cached_script.cache_clear()


def test_newer_schema_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    with _open(folder) as memory:
        memory.episodic.add("written by a newer package, pretend")
    db = sqlite3.connect(str(folder / "memory.db"))
    db.execute("UPDATE schema_info SET version = 99 WHERE component = 'record_store'")
    db.commit()
    db.close()
    before = (folder / "memory.db").read_bytes()
    with pytest.raises(SchemaVersionError) as caught:
        _open(folder)
    assert str(folder / "memory.db") in str(caught.value) and "99" in str(caught.value)
    assert "upgrade" in str(caught.value)
    assert (folder / "memory.db").read_bytes() == before  # untouched
    with pytest.raises(StoreError):  # and the lock was released: a second try gets the same answer
        _open(folder)


def test_foreign_database_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    folder.mkdir()
    db = sqlite3.connect(str(folder / "memory.db"))
    db.execute("CREATE TABLE memories (id TEXT, secret TEXT)")
    db.execute("INSERT INTO memories VALUES ('x', 'someone else''s data')")
    db.commit()
    db.close()
    with pytest.raises(SchemaVersionError, match="not created by llama-index-memory-hierarchy"):
        _open(folder)
    rows = sqlite3.connect(str(folder / "memory.db")).execute("SELECT * FROM memories").fetchall()
    assert rows == [("x", "someone else's data")]


@pytest.mark.skipif(os.name != "posix", reason="flock semantics")
def test_lock_is_released_when_the_holder_is_killed(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
    holder.kill()
    holder.wait(30)
    with _open(folder) as memory:
        assert [i.content for i in memory.episodic.get_timeline()] == ["written by the holder before the intruder came"]
