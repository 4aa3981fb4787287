"""Crash safety: a writer process is killed with SIGKILL at random points, over and over.

Each round starts ``crash_child.py`` (a separate interpreter) on the same folder; several of
its users add, put, update and remove memories concurrently and print every acknowledged
operation. The parent kills it at a random moment (sometimes while it is still recovering
from the previous kill), then reopens the folder the ordinary way and checks:

* every id the child printed is there, with its content (``get``), and found by vector
  search and by ``retrieve``; an acknowledged remove stays removed;
* nothing is half-written: every row is a complete text the child meant to write, with
  its embedding, and rows present after an earlier round are still there (unless removed);
* derived indexes agree with SQLite: vector point ids == ids of records with an embedding,
  the FTS5 index passes its integrity check against the table, and the outbox is empty.

The fast variant makes a few kills with the lightweight hashing embedding (a child starts
in a few seconds); the slow one (``--run-slow``) makes many, with the real model too.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from store_checks import assert_graph_agrees, assert_indexes_agree, hashing, read_sqlite, vector_ids

from llama_index_memory_hierarchy import HierarchicalMemory

CHILD = Path(__file__).with_name("crash_child.py")
USERS = 3


@dataclass
class Ledger:
    """What the children acknowledged, and what the store held after the last check."""

    acked: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (user, content) of acked adds
    removed: set[str] = field(default_factory=set)
    contents: dict[str, str] = field(default_factory=dict)  # id -> last acknowledged content
    puts: set[tuple[str, str]] = field(default_factory=set)  # (user, content)
    facts: dict[str, tuple[str, str]] = field(default_factory=dict)  # fact id -> (user, subject)
    subjects: set[str] = field(default_factory=set)  # every fact subject a child meant to write
    intended: set[str] = field(default_factory=set)  # every content a child meant to write
    baseline: dict[str, str] = field(default_factory=dict)  # id -> content seen at the last check
    figures: dict[str, int] = field(
        default_factory=lambda: {
            "kills": 0,
            "kills_during_recovery": 0,
            "adds": 0,
            "puts": 0,
            "updates": 0,
            "removes": 0,
            "in_flight": 0,
            "rows": 0,
        }
    )


def run_child(folder: Path, seed: int, model: str, kill_after: float, before_ready: bool) -> list[str]:
    """Start a writer, SIGKILL it ``kill_after`` seconds after READY (or after start), return its lines."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(folder.parent / "child.err", "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(folder), str(seed), model, str(USERS)],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8").rstrip("\n")
            if line == "READY":
                ready.set()
            lines.append(line)
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not before_ready:
        assert ready.wait(120), "the writer did not start within 120 s"
        assert proc.poll() is None, f"the writer exited early (rc {proc.returncode}); see {folder.parent}/child.err"
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    reader.join(30)
    assert proc.returncode == -signal.SIGKILL, f"writer ended with {proc.returncode}; see {folder.parent}/child.err"
    return lines


def absorb(ledger: Ledger, lines: list[str]) -> dict[str, set[str]]:
    """Fold a child's output into the ledger; return in-flight updates and removes (id -> contents)."""
    in_flight: dict[str, set[str]] = {}
    pending: dict[str, str] = {}  # user -> intent line without an acknowledgement yet
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "I":
            user, op, detail = ([*rest.split(" ", 2), ""])[:3]
            pending[user] = f"{op} {detail}"
            if op in ("add", "put"):
                ledger.intended.add(detail)
            elif op == "add_many":
                ledger.intended.update(detail.split("|"))
            elif op == "update":
                ledger.intended.add(detail.split(" ", 1)[1])
            elif op == "fact":
                ledger.subjects.add(detail)
        elif kind == "A":
            user, memory_id, content = rest.split(" ", 2)
            ledger.acked[memory_id] = (user, content)
            ledger.contents[memory_id] = content
            ledger.figures["adds"] += 1
            if not pending.get(user, "").startswith("add_many"):
                pending.pop(user, None)
        elif kind == "P":
            user, content = rest.split(" ", 1)
            ledger.puts.add((user, content))
            ledger.figures["puts"] += 1
            pending.pop(user, None)
        elif kind == "D":
            user, memory_id = rest.split(" ", 1)
            ledger.removed.add(memory_id)
            ledger.figures["removes"] += 1
            pending.pop(user, None)
        elif kind == "F":
            user, memory_id, subject = rest.split(" ", 2)
            ledger.facts[memory_id] = (user, subject)
            ledger.figures["facts"] = ledger.figures.get("facts", 0) + 1
            pending.pop(user, None)
        elif kind == "U":
            user, memory_id, content = rest.split(" ", 2)
            ledger.contents[memory_id] = content
            ledger.figures["updates"] += 1
            pending.pop(user, None)
    for intent in pending.values():
        op, _, detail = intent.partition(" ")
        if op == "update":
            memory_id, content = detail.split(" ", 1)
            in_flight.setdefault(memory_id, set()).add(content)
        elif op == "remove":
            in_flight.setdefault(detail, set()).add("<removed>")
    ledger.figures["in_flight"] += len(pending)
    return in_flight


def check_folder(folder: Path, ledger: Ledger, in_flight: dict[str, set[str]], embed_model: Any) -> None:
    """Reopen the folder the ordinary way and check the invariants of the module docstring."""
    memories = [
        HierarchicalMemory.from_defaults(
            user_id=f"user{i}", session_id="check", persist_dir=str(folder), embed_model=embed_model
        )
        for i in range(USERS)
    ]
    try:
        context = memories[0].context
        state = read_sqlite(folder)
        points = context.runtime.run(vector_ids(context))
        assert_indexes_agree(state, points)
        rows = state.rows
        by_user_early = {m.user_id: m for m in memories}
        # nothing half-written: complete, intended texts, embedded, owned by a writer
        for memory_id, row in rows.items():
            if row["memory_type"] == "semantic":
                assert row["content"].split()[0] in ledger.subjects, f"fact {memory_id}: {row['content']!r}"
                continue
            assert row["content"] in ledger.intended, f"row {memory_id} holds text no writer sent: {row['content']!r}"
            assert row["embedding"] is not None and row["space"], f"row {memory_id} has no embedding"
            assert row["user_id"] in {m.user_id for m in memories}
        # durability of acknowledged operations
        for memory_id, (_user, _) in ledger.acked.items():
            if memory_id in ledger.removed:
                assert memory_id not in rows, f"acknowledged remove of {memory_id} undone"
                continue
            if "<removed>" in in_flight.get(memory_id, set()) and memory_id not in rows:
                continue
            assert memory_id in rows, f"acknowledged add {memory_id} lost"
            allowed = {ledger.contents[memory_id], *in_flight.get(memory_id, set())}
            assert rows[memory_id]["content"] in allowed, f"{memory_id}: content {rows[memory_id]['content']!r}"
        for memory_id, (user, subject) in ledger.facts.items():
            # (the subject may have been resolved to an earlier, similar entity: the text is that fact's)
            assert memory_id in rows, f"acknowledged fact lost: {subject}"
            assert by_user_early[user].semantic.get(memory_id) is not None
        for memory in memories:  # the graph is repaired when a user's facts are first used in a process
            memory.semantic.get_stats()
        assert_graph_agrees(state, folder)
        contents_by_user = {(row["user_id"], row["content"]) for row in rows.values()}
        for put in ledger.puts:
            assert put in contents_by_user, f"acknowledged put lost: {put}"
        for memory_id, content in ledger.baseline.items():  # what survived once survives again
            if memory_id in ledger.removed or "<removed>" in in_flight.get(memory_id, set()):
                continue
            assert memory_id in rows, f"{memory_id} was present after an earlier crash and is gone now"
            assert rows[memory_id]["content"] in {
                content,
                ledger.contents.get(memory_id),
                *in_flight.get(memory_id, set()),
            }
        # retrievable: get, vector search with the stored embedding, and hybrid retrieve (a sample)
        by_user = {m.user_id: m for m in memories}
        live = [i for i in ledger.acked if i in rows]
        for memory_id in live:
            row = rows[memory_id]
            memory = by_user[row["user_id"]]
            item = memory.episodic.get(memory_id)
            assert item is not None and item.content == row["content"]
            hits = context.runtime.run(
                context.adense_search(row["user_id"], row["embedding"], limit=10, space=row["space"])
            )
            assert memory_id in [h for h, _ in hits], f"{memory_id} not found by vector search"
        for memory_id in random.Random(len(live)).sample(live, min(10, len(live))):
            row = rows[memory_id]
            found = by_user[row["user_id"]].episodic.retrieve(row["content"], limit=5)
            assert memory_id in [i.id for i in found], f"{memory_id} not retrieved by its own text"
        assert all(
            memory_id
            not in {
                h
                for h, _ in context.runtime.run(
                    context.adense_search("intruder", row["embedding"], limit=5, space=row["space"])
                )
            }
            for memory_id, row in list(rows.items())[:5]
        )
        ledger.baseline = {memory_id: row["content"] for memory_id, row in rows.items()}
        for memory_id in ledger.acked:  # an in-flight update or remove that landed is now the state to keep
            if memory_id in rows:
                ledger.contents[memory_id] = rows[memory_id]["content"]
            else:
                ledger.removed.add(memory_id)
        ledger.figures["rows"] = len(rows)
    finally:
        for memory in memories:
            memory.close()


def crash_rounds(
    folder: Path, *, kills: int, model: str, embed_model: Any, seed: int, budget_s: float
) -> dict[str, int]:
    """Kill a writer ``kills`` times (or until ``budget_s`` runs out), checking the folder after each."""
    rng = random.Random(seed)
    ledger = Ledger()
    deadline = time.monotonic() + budget_s
    round_no = 0
    while round_no < kills or (ledger.figures["adds"] == 0 and round_no < kills + 3):
        if round_no and time.monotonic() > deadline and ledger.figures["adds"]:
            break
        before_ready = 0 < round_no < kills and rng.random() < 0.2
        delay = rng.uniform(0.5, 4.0) if before_ready else rng.uniform(0.05, 2.5)
        if round_no >= kills:  # a slow machine acknowledged nothing yet: give a writer time to work
            delay = 6.0
        round_no += 1
        lines = run_child(folder, rng.randrange(1 << 30), model, delay, before_ready)
        ledger.figures["kills"] += 1
        ledger.figures["kills_during_recovery"] += int(before_ready and "READY" not in lines)
        in_flight = absorb(ledger, lines)
        check_folder(folder, ledger, in_flight, embed_model)
    assert ledger.figures["adds"] > 0, "no add was acknowledged: the kills came too early to test anything"
    return ledger.figures


def test_sigkill_loses_nothing_acknowledged(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    figures = crash_rounds(folder, kills=5, model="hashing", embed_model="hashing", seed=1, budget_s=60)
    print(f"crash (fast): {figures}")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["hashing", "default"])
def test_sigkill_many_times(tmp_path: Path, model: str, minilm: Any) -> None:
    folder = tmp_path / "memory_data"
    embed_model = "hashing" if model == "hashing" else minilm
    figures = crash_rounds(folder, kills=200, model=model, embed_model=embed_model, seed=7, budget_s=420)
    print(f"crash (slow, {model}): {figures}")


def _open(folder: Path, embed_model: Any, user: str = "alice", **kwargs: Any) -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id=user, session_id="s1", persist_dir=str(folder), embed_model=embed_model, **kwargs
    )


#: The on-disk qdrant-edge index, whose repair these tests exercise (the default mirrors keep no vector file).
EDGE = {"vector_backend": "edge"}


def _assert_consistent(memory: HierarchicalMemory) -> None:
    context = memory.context
    assert_indexes_agree(read_sqlite(context.persist_dir), context.runtime.run(vector_ids(context)))


def test_vector_index_that_lost_acknowledged_points_is_repaired_on_open(tmp_path: Path, minilm: Any) -> None:
    """An OS crash between a qdrant-edge write and its flush loses points whose outbox entries
    were acknowledged; simulated by putting back an older copy of the vector folder."""
    import shutil

    folder = tmp_path / "memory_data"
    with _open(folder, minilm, **EDGE) as memory:
        early = memory.episodic.add_many([f"early note {i} about the {w}" for i, w in enumerate(["garden"] * 20)])
    shutil.copytree(folder / "vectors", tmp_path / "vectors.old")
    with _open(folder, minilm, **EDGE) as memory:
        late = memory.episodic.add_many([f"later note {i}: the ferry leaves at {i} pm" for i in range(30)])
        for memory_id in early[:5]:
            assert memory.episodic.remove(memory_id)
    shutil.rmtree(folder / "vectors")
    shutil.copytree(tmp_path / "vectors.old", folder / "vectors")  # 30 acknowledged points lost, 5 deletes undone

    with _open(folder, minilm, **EDGE) as memory:
        _assert_consistent(memory)
        found = memory.episodic.retrieve("when does the ferry leave? 7 pm", limit=3)
        assert "later note 7: the ferry leaves at 7 pm" in [i.content for i in found]
        space = memory.context.embeddings.space
        index = memory.context.runtime.run(memory.context.avector_index(space))
        ids = memory.context.runtime.run(index.ids())
        assert set(late) <= ids and not set(early[:5]) & ids


def test_deleted_vector_folder_is_rebuilt_on_open(tmp_path: Path, minilm: Any) -> None:
    import shutil

    folder = tmp_path / "memory_data"
    with _open(folder, minilm, **EDGE) as memory:
        ids = memory.episodic.add_many(["my passport number is in the blue folder", "the cat is called Miso"])
    shutil.rmtree(folder / "vectors")
    with _open(folder, minilm, **EDGE) as memory:
        _assert_consistent(memory)
        assert memory.episodic.retrieve("what is my cat's name?", limit=1)[0].id == ids[1]


def test_outbox_left_by_a_crash_is_applied_on_open(tmp_path: Path, minilm: Any) -> None:
    """Rows committed with their outbox entries but never indexed (killed right after COMMIT)."""
    from llama_index_memory_hierarchy.stores.base import Record
    from llama_index_memory_hierarchy.types import MemoryItem

    folder = tmp_path / "memory_data"
    text = "the spare key is under the third flowerpot"
    with _open(folder, minilm, **EDGE) as memory:
        memory.episodic.add("warm-up so that the vector space exists")
        context = memory.context
        item = MemoryItem(content=text, user_id="alice", session_id="s1")
        record = Record(item=item, embedding=context.embeddings.embed_texts([text])[0], space=context.embeddings.space)
        context.runtime.run(context.records.insert([record]))  # COMMIT, then the "crash": no index update
        assert read_sqlite(folder).outbox == 1
    with _open(folder, minilm, **EDGE) as memory:
        _assert_consistent(memory)
        assert memory.episodic.retrieve("where is the spare key?", limit=1)[0].id == item.id


def test_graph_left_behind_by_a_crash_is_repaired_on_first_use(tmp_path: Path) -> None:
    """Fact records committed but their graph writes lost (killed between the two stores), and a graph
    file deleted: each user's graph is rebuilt from the facts when that user's facts are next used."""
    import sqlite3

    folder = tmp_path / "memory_data"
    with _open(folder, hashing()) as alice, _open(folder, hashing(), "bob") as bob:
        alice.semantic.add_facts([("Alice", "works_at", "Acme"), ("Acme", "located_in", "Lyon")])
        bob.semantic.add_fact("Bob", "plays", "Chess")
    graph = sqlite3.connect(str(folder / "graph.db"))
    graph.execute("DELETE FROM graph_relations WHERE user_id = 'alice'")
    graph.commit()
    graph.close()
    with _open(folder, hashing()) as alice:
        assert {r.name for r in alice.semantic.get_related_entities("Alice", depth=2)} == {"Acme", "Lyon"}
    for name in ("graph.db", "graph.db-wal", "graph.db-shm"):
        (folder / name).unlink(missing_ok=True)
    with _open(folder, hashing()) as alice, _open(folder, hashing(), "bob") as bob:
        assert [r.name for r in bob.semantic.get_related_entities("Bob")] == ["Chess"]
        assert {r.name for r in alice.semantic.get_related_entities("Alice", depth=2)} == {"Acme", "Lyon"}
        assert_graph_agrees(read_sqlite(folder), folder)


def test_graph_that_missed_a_superseding_fact_is_repaired(tmp_path: Path) -> None:
    """A crash after the records superseded a fact but before the graph did: the old graph has as many
    relations as there are current facts, so only an exact comparison finds it stale."""
    import shutil

    folder = tmp_path / "memory_data"
    with _open(folder, hashing()) as alice:
        alice.semantic.add_fact("Alice", "lives_in", "Paris")
    shutil.copy(folder / "graph.db", tmp_path / "graph.before")
    with _open(folder, hashing()) as alice:
        alice.semantic.add_fact("Alice", "lives_in", "Berlin")  # supersedes Paris
    for name in ("graph.db-wal", "graph.db-shm"):
        (folder / name).unlink(missing_ok=True)
    shutil.copy(tmp_path / "graph.before", folder / "graph.db")  # the graph write never happened
    with _open(folder, hashing()) as alice:
        assert [r.name for r in alice.semantic.get_related_entities("Alice")] == ["Berlin"]
        assert_graph_agrees(read_sqlite(folder), folder)


def test_lost_upsert_and_lost_delete_with_equal_counts_are_repaired(tmp_path: Path, minilm: Any) -> None:
    """An OS crash that loses both the last upsert and the last delete leaves as many points as records."""
    import shutil

    folder = tmp_path / "memory_data"
    with _open(folder, minilm, **EDGE) as memory:
        old = memory.episodic.add("the boiler was serviced in March")
    shutil.copytree(folder / "vectors", tmp_path / "vectors.old")
    with _open(folder, minilm, **EDGE) as memory:
        new = memory.episodic.add("the boiler needs a new valve")
        assert memory.episodic.remove(old)
    shutil.rmtree(folder / "vectors")
    shutil.copytree(tmp_path / "vectors.old", folder / "vectors")  # one point too many, one missing
    with _open(folder, minilm, **EDGE) as memory:
        index = memory.context.runtime.run(memory.context.avector_index())
        assert memory.context.runtime.run(index.ids()) == {new}
        assert [i.id for i in memory.episodic.retrieve("boiler", limit=5)] == [new]
