"""Erasure removes staging copies left by interrupted file writes, whoever's they were, and only those (issue 36,
item 4): a write killed mid-copy leaves ``files/.staging/*.part`` with a user's bytes; a live write holds its copy
with an exclusive ``flock`` until it is committed or discarded, and keeps it."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.perception.files import FileStore

pytestmark = pytest.mark.skipif(os.name == "nt", reason="staging holds are flock()s (POSIX)")

SECRET = b"private-scan-bytes-" * 4096
#: A write that copies a few chunks, then hangs until killed (what a kill during a 90 MB copy leaves).
CHILD = """
import sys, time
from llama_index_memory_hierarchy.perception.files import FileStore

class Slow:
    def __init__(self):
        self.sent = 0
    def read(self, n):
        if self.sent >= 3:
            time.sleep(3600)
        self.sent += 1
        return sys.argv[2].encode() * 4096

FileStore(sys.argv[1], chunk_bytes=65536).stage(Slow())
"""


def _killed_write(folder: Path) -> Path:
    """A ``.part`` left by a write SIGKILLed mid-copy."""
    staging = folder / "files" / ".staging"
    before = set(staging.glob("*.part")) if staging.is_dir() else set()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), "private-scan-bytes-"])
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            parts = [p for p in staging.glob("*.part") if p not in before and p.stat().st_size > 0]
            if parts:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the child never started its copy")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return parts[0]


class Gate:
    """A binary stream that gives one chunk, then waits for ``open`` before the rest (a live, slow write)."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.chunks = [SECRET, SECRET]

    def read(self, n: int) -> bytes:
        if len(self.chunks) == 1:
            self.open.wait(120)
        return self.chunks.pop() if self.chunks else b""


def _memory(folder: Path, user: str) -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(user_id=user, persist_dir=str(folder), embed_model="hashing", llm=None)


def test_forget_user_removes_leftovers_of_killed_writes_and_keeps_a_live_one(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    with _memory(folder, "alice") as alice:
        alice.episodic.add("Alice scanned her passport")
    leftover = _killed_write(folder)
    assert SECRET[:19] in leftover.read_bytes()

    store = FileStore(folder)  # a live write of another user, in this process, mid-copy
    gate, staged = Gate(), {}
    writer = threading.Thread(target=lambda: staged.setdefault("file", store.stage(gate)))
    writer.start()
    staging = folder / "files" / ".staging"
    while len(list(staging.glob("*.part"))) < 2:
        time.sleep(0.01)
    live = next(p for p in staging.glob("*.part") if p != leftover)

    with _memory(folder, "alice") as alice:
        report = alice.manager.forget_user()
    assert report.staging_files == 1
    assert not leftover.exists(), "the killed write's copy survived the erasure"
    assert live.exists(), "an erasure removed a live write's copy"

    gate.open.set()
    writer.join(60)
    ref = store.commit(staged["file"], "bob", "bin")
    store.discard(staged["file"])
    assert store.resolve(ref, "bob").read_bytes() == SECRET * 2
    assert list(staging.glob("*.part")) == []


def test_lmh_forget_everything_removes_staging_leftovers(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
    import cli_helpers

    run_lmh: Any = functools.partial(cli_helpers.run_lmh, env={"LMH_EMBED_MODEL": "hashing"})
    folder = tmp_path / "memory"
    common = ["--dir", str(folder), "--user", "alice"]
    run_lmh("add", "Alice renewed her passport", "--tier", "episodic", *common).ok()
    leftover = _killed_write(folder)
    run_lmh("forget", "--everything", "--yes", *common).ok()
    assert not leftover.exists()
    assert not any(SECRET[:19] in p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_a_copy_deleted_by_an_erasure_before_its_hold_is_made_again(tmp_path: Path, monkeypatch) -> None:
    """The instant between a staging file's creation and its hold: an erasure then takes the empty file for a
    leftover and deletes it. The write made the rest of its copy in the deleted file and failed on commit."""
    import llama_index_memory_hierarchy.perception.files as files

    store = FileStore(tmp_path)
    hold, raced = files._hold, []

    def erasure_first(fd: int) -> int | None:
        if not raced:
            raced.append(store.remove_staging_leftovers())  # another thread's erasure, in the window
        return hold(fd)

    monkeypatch.setattr(files, "_hold", erasure_first)
    staged = store.stage(SECRET)
    assert raced == [1]
    ref = store.commit(staged, "alice", "bin")
    assert store.resolve(ref, "alice").read_bytes() == SECRET
