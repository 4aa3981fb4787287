"""The work locks of the layers above (``StoreContext.lock``, :mod:`stores.worklock`) hold across the processes
of one embedded folder: two real processes racing the same read-modify-write end as if they ran one after the
other, and a lock held by a process that is SIGKILLed is free again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ENV = {**os.environ, "LMH_EMBED_MODEL": "hashing", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
TIMEOUT = 180

#: Opens the folder, waits for the ``go`` file, then adds 1 to a counter file ``rounds`` times under the lock
#: (read, pause, write: without the lock the two processes lose each other's increments).
COUNTER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from llama_index_memory_hierarchy import HierarchicalMemory

    class Tally:
        '''The owner of the lock (its name, the same in both processes, is part of the key).'''

    folder, rounds, hold = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="s", persist_dir=str(folder),
                                              embed_model="hashing")
    counter = folder / "counter.txt"

    async def count() -> None:
        for _ in range(rounds):
            async with memory.context.lock(Tally, "alice"):
                value = int(counter.read_text())
                await asyncio.sleep(0.002)
                counter.write_text(str(value + 1))
        if hold:
            async with memory.context.lock(Tally, "alice"):
                print("HOLDING", flush=True)
                await asyncio.sleep(hold)

    print("READY", flush=True)
    while not (folder / "go").exists():
        time.sleep(0.01)
    memory.context.runtime.run(count())
    memory.close()
    print("DONE", flush=True)
    """
)

#: Ingests ``doc_id`` (one of two versions of the text) into the same knowledge base once the ``go`` file exists.
INGEST = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from llama_index_memory_hierarchy.knowledge import KnowledgeBase

    folder, version = Path(sys.argv[1]), sys.argv[2]
    kb = KnowledgeBase.from_defaults(namespace="manuals", user_id="alice", persist_dir=str(folder),
                                     embed_model="hashing", chunk_size=40, chunk_overlap=0)
    paragraphs = [f"Section {i} of the pump manual, version {version}: valve {i} turns {version} times."
                  for i in range(120)]
    print("READY", flush=True)
    while not (folder / "go").exists():
        time.sleep(0.01)
    report = kb.add_text("\\n\\n".join(paragraphs), doc_id="pump-manual")
    print("WROTE", report.chunks_written, flush=True)
    kb.close()
    """
)


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )


def _wait_for(process: subprocess.Popen[str], word: str) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(word):
            return line
        if not line and process.poll() is not None:
            break
    raise AssertionError(f"no {word} from the child: {process.stderr.read() if process.stderr else ''}")


def _race(folder: Path, *children: subprocess.Popen[str]) -> None:
    for child in children:
        _wait_for(child, "READY")
    (folder / "go").touch()


def test_two_processes_incrementing_one_counter_lose_no_increment(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    folder.mkdir()
    (folder / "counter.txt").write_text("0")
    children = [_start(COUNTER, str(folder), "60", "0") for _ in range(2)]
    _race(folder, *children)
    for child in children:
        _wait_for(child, "DONE")
        assert child.wait(TIMEOUT) == 0
    assert (folder / "counter.txt").read_text() == "120"


def test_a_killed_holder_frees_the_lock(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    folder.mkdir()
    (folder / "counter.txt").write_text("0")
    holder = _start(COUNTER, str(folder), "0", "600")
    _race(folder, holder)
    _wait_for(holder, "HOLDING")
    other = _start(COUNTER, str(folder), "5", "0")
    _wait_for(other, "READY")
    time.sleep(1.0)
    assert (folder / "counter.txt").read_text() == "0"  # waiting for the holder
    holder.send_signal(signal.SIGKILL)
    holder.wait(TIMEOUT)
    _wait_for(other, "DONE")
    assert other.wait(TIMEOUT) == 0
    assert (folder / "counter.txt").read_text() == "5"


def test_two_processes_ingesting_one_document_leave_one_version(tmp_path: Path) -> None:
    """Each reads the document's manifest, embeds, writes its chunks and deletes the old ones: serialised, the
    later ingest replaces the earlier, so the knowledge base holds exactly one version's chunks."""
    folder = tmp_path / "memory_data"
    children = [_start(INGEST, str(folder), version) for version in ("1", "2")]
    _race(folder, *children)
    written = [int(_wait_for(child, "WROTE").split()[1]) for child in children]
    for child in children:
        assert child.wait(TIMEOUT) == 0
    from llama_index_memory_hierarchy.knowledge import KnowledgeBase

    kb = KnowledgeBase.from_defaults(
        namespace="manuals", user_id="alice", persist_dir=str(folder), embed_model="hashing"
    )
    try:
        stats = kb.stats()
    finally:
        kb.close()
    assert written[0] == written[1] > 50
    assert stats["documents"] == 1 and stats["chunks"] == written[0]  # not both versions' chunks


def test_deleting_the_work_lock_file_does_not_let_a_second_holder_in(tmp_path: Path) -> None:
    """``.work.lock`` deleted while a process holds a key in it: before, the next process to open the folder made
    a new file and took the same key at once (two holders; the counter moved while the first still held it)."""
    from llama_index_memory_hierarchy.stores.worklock import LOCK_FILE

    folder = tmp_path / "memory_data"
    folder.mkdir()
    (folder / "counter.txt").write_text("0")
    holder = _start(COUNTER, str(folder), "0", "600")
    try:
        _race(folder, holder)
        _wait_for(holder, "HOLDING")
        (folder / LOCK_FILE).unlink()
        other = _start(COUNTER, str(folder), "5", "0")
        assert other.wait(TIMEOUT) != 0  # refused to open: it could not share the holder's locks
        assert f"{LOCK_FILE} was deleted while other processes have the folder open" in other.stderr.read()
        assert (folder / "counter.txt").read_text() == "0"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(TIMEOUT)
    again = _start(COUNTER, str(folder), "5", "0")  # alone with the folder: the file is made again
    _race(folder, again)
    _wait_for(again, "DONE")
    assert again.wait(TIMEOUT) == 0
    assert (folder / "counter.txt").read_text() == "5" and (folder / LOCK_FILE).exists()
