"""Isolation, property-based: random users, sessions, namespaces and operations through every public
path; no path ever returns or deletes another user's data.

Each hypothesis example makes three fresh users (unique ids, so one shared folder and one set of
stores serve every example; the embedding model is the real one). Every user writes a private
marker into everything they store (memories, facts, entity names, documents). After each step:

* whatever the step returned (items, nodes, messages, tool text, exports, graph results) holds
  only the acting user's marker and items carry only their ``user_id``;
* the other users' data is exactly as before: their record ids (every namespace), their rows in
  every user-scoped table, and their graph nodes and relations.

Operations also aim at the other users on purpose: their ids passed to get/update/remove/pin and
the tools, their document ids and knowledge-base names, their markers and entity names in queries.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from store_checks import minilm

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.types import MemoryItem

WORDS = ["river", "violin", "ticket", "garden", "Lisbon", "doctor", "birthday", "password", "coffee", "train"]
OPS = [
    "add",
    "add_semantic",
    "fact",
    "put",
    "perceptual",
    "retrieve",
    "probe_other",
    "remove_own",
    "update_own",
    "clear",
    "forget",
    "kb_add",
    "kb_search",
    "kb_delete",
    "kb_clear",
    "tools",
    "graph",
    "export",
    "timeline",
    "working",
    "erase",
]
_counter = itertools.count()
TIMES: dict[str, list[float]] = {}  # operation -> durations (figures printed at the end of the module)

step = st.tuples(
    st.sampled_from(OPS),
    st.integers(0, 2),  # actor
    st.integers(0, 2),  # target (another user's data to aim at)
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.sampled_from(["s1", "s2"]),
    st.sampled_from(["docs", "notes"]),
    st.integers(0, 2),  # document number / choice
)


class World:
    """Three users of one example, their memories, and what each has stored (ids, markers)."""

    def __init__(self, folder: Path) -> None:
        n = next(_counter)
        self.folder = folder
        self.users = [f"iso{n}-{i}" for i in range(3)]
        self.markers = {u: f"mk{uuid.uuid4().hex[:10]}" for u in self.users}
        self.memories = {
            u: HierarchicalMemory.from_defaults(
                user_id=u, session_id="s1", persist_dir=str(folder), embed_model=minilm()
            )
            for u in self.users
        }
        self.ids: dict[str, list[str]] = {u: [] for u in self.users}
        self._kbs: dict[tuple[str, str], Any] = {}

    def kb(self, user: str, namespace: str) -> Any:
        from llama_index_memory_hierarchy.knowledge import KnowledgeBase

        key = (user, namespace)
        if key not in self._kbs:
            memory = self.memories[user]
            self._kbs[key] = KnowledgeBase.from_defaults(namespace, user_id=user, context=memory.context)
        return self._kbs[key]

    def close(self) -> None:
        for kb in self._kbs.values():
            kb.close()
        for memory in self.memories.values():
            memory.close()

    # ------------------------------------------------------------------ checks
    def text(self, user: str, words: list[str]) -> str:
        return f"{self.markers[user]} {' '.join(words)}"

    def assert_only(self, user: str, result: Any, query: str = "") -> None:
        """``result`` (any shape) mentions no other user's marker; items carry only ``user``.

        ``query`` (which names another user's marker on purpose) is removed first: echoing the
        caller's own question back is not a leak.
        """
        for item in _walk(result):
            if isinstance(item, MemoryItem):
                assert item.user_id == user, f"{user} got an item of {item.user_id}"
        rendered = _render(result).replace(query, "") if query else _render(result)
        for other, marker in self.markers.items():
            if other != user:
                assert marker not in rendered, f"{user} saw data of {other}: {rendered[:300]}"

    def snapshot(self, user: str) -> tuple[Any, ...]:
        """Everything stored for ``user``: record ids, rows per user-scoped table, graph rows.

        The access writer's queue is written first: a row a user's own earlier ``get()`` queued (the access log)
        must not be taken for a change made by the next step's actor."""
        context = next(iter(self.memories.values())).context  # one folder: every memory shares it
        context.runtime.run(context.accesses.aflush())
        db = sqlite3.connect(f"file:{self.folder / 'memory.db'}?mode=ro", uri=True)
        try:
            ids = frozenset(r[0] for r in db.execute("SELECT id FROM memories WHERE user_id = ?", (user,)))
            tables = {}
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                columns = {row[1] for row in db.execute(f'PRAGMA table_info("{name}")')}
                if "user_id" in columns and name not in ("memories", "index_outbox"):
                    rows = db.execute(f'SELECT count(*) FROM "{name}" WHERE user_id = ?', (user,)).fetchone()[0]
                    if rows:  # tables are created lazily: an empty one is the same as none
                        tables[name] = rows
        finally:
            db.close()
        graph: tuple[int, int] = (0, 0)
        if (self.folder / "graph.db").exists():
            gdb = sqlite3.connect(f"file:{self.folder / 'graph.db'}?mode=ro", uri=True)
            try:
                graph = (
                    gdb.execute("SELECT count(*) FROM graph_nodes WHERE user_id = ?", (user,)).fetchone()[0],
                    gdb.execute("SELECT count(*) FROM graph_relations WHERE user_id = ?", (user,)).fetchone()[0],
                )
            finally:
                gdb.close()
        return ids, tuple(sorted(tables.items())), graph


def _walk(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple, set)):
        return [x for v in value for x in _walk(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _walk(v)]
    node = getattr(value, "node", None)
    return [value, *(_walk(node) if node is not None else [])]


def _render(value: Any) -> str:
    if isinstance(value, (list, tuple, set)):
        return "\n".join(_render(v) for v in value)
    node = getattr(value, "node", None)
    if node is not None:
        return f"{node.get_content()} {node.metadata}"
    if isinstance(value, ChatMessage):
        return str(value.content)
    return str(value)


def fishing_query(world: World, target_i: int, words: list[str]) -> str:
    """A query naming the other user's marker (and so their entities)."""
    return f"{' '.join(words)} {world.markers[world.users[target_i]]}"


def run_step(
    world: World,
    tmp: Path,
    op: str,
    actor_i: int,
    target_i: int,
    words: list[str],
    session: str,
    namespace: str,
    choice: int,
) -> Any:
    actor, target = world.users[actor_i], world.users[target_i]
    memory = world.memories[actor]
    text = world.text(actor, words)
    fishing = fishing_query(world, target_i, words)
    others_ids = [i for u, ids in world.ids.items() if u != actor for i in ids]
    if op == "add":
        world.ids[actor].append(memory.episodic.add(text, session_id=session, importance=0.2 + 0.1 * choice))
    elif op == "add_semantic":
        world.ids[actor].append(memory.semantic.add(text))
    elif op == "fact":
        marker = world.markers[actor]
        world.ids[actor].append(memory.semantic.add_fact(f"{marker} {words[0]}", "visits", f"{words[-1].title()} Town"))
    elif op == "put":
        memory.put(ChatMessage(role=MessageRole.USER, content=text))
    elif op == "perceptual":
        world.ids[actor].append(memory.perceptual.add(text))
    elif op == "retrieve":
        results: list[Any] = []
        for tier in (memory.episodic, memory.semantic, memory.perceptual):
            results.append(tier.retrieve(fishing, limit=5))
            results.append(tier.as_retriever(similarity_top_k=3).retrieve(fishing))
        results.append(memory.working.retrieve(fishing, limit=5))
        results.append(memory.episodic.retrieve(fishing, limit=5, session_id=session))
        results.append(memory.as_retriever(similarity_top_k=5).retrieve(fishing))
        results.append(memory.get(input=fishing))
        messages = [ChatMessage(role=MessageRole.USER, content=fishing)]
        results.append([asyncio.run(block.aget(messages)) for block in memory.memory_blocks()])
        return results
    elif op == "probe_other":
        from llama_index_memory_hierarchy.tools import MemoryToolSpec

        tools = MemoryToolSpec(memory)
        for other_id in others_ids[:3]:
            for tier in (memory.episodic, memory.semantic, memory.perceptual):
                assert tier.get(other_id) is None
                assert tier.update(other_id, content=text) is False
                assert tier.remove(other_id) is False
            assert memory.manager.pin(other_id) is False
            assert tools.update_memory(other_id, content=text).startswith("No memory with id=")
            assert tools.forget(other_id).startswith("No memory with id=")
    elif op == "remove_own" and world.ids[actor]:
        memory_id = world.ids[actor].pop(choice % len(world.ids[actor]))
        for tier in (memory.episodic, memory.semantic, memory.perceptual):
            tier.remove(memory_id)
    elif op == "update_own" and world.ids[actor]:
        memory_id = world.ids[actor][choice % len(world.ids[actor])]
        memory.episodic.update(memory_id, content=text)
    elif op == "clear":
        [memory.episodic, memory.semantic, memory.perceptual, memory.working][choice].clear()
    elif op == "forget":
        memory.episodic.forget("importance_based", threshold=0.35)
        return memory.manager.forget("importance_based", threshold=0.3, dry_run=choice == 0)
    elif op == "kb_add":
        report = world.kb(actor, namespace).add_text(
            f"# {world.markers[actor]}\n\n{text} notes.", doc_id=f"doc{choice}"
        )
        return report
    elif op == "kb_search":
        from llama_index_memory_hierarchy.tools import RagToolSpec

        kb = world.kb(actor, namespace)
        return [
            kb.as_retriever(similarity_top_k=5).retrieve(fishing),
            RagToolSpec(kb).search_documents(fishing),
            kb.list_documents(),
            kb.stats(),
        ]
    elif op == "kb_delete":
        world.kb(actor, namespace).delete_document(f"doc{choice}")
    elif op == "kb_clear":
        world.kb(actor, namespace).clear()
    elif op == "tools":
        from llama_index_memory_hierarchy.tools import MemoryToolSpec

        tools = MemoryToolSpec(memory)
        return [
            tools.recall(fishing, tier="all"),
            tools.memory_summary(),
            tools.memory_stats(),
            tools.remember(text, tier=["episodic", "semantic", "working"][choice]),
        ]
    elif op == "graph":
        marker = world.markers[target]
        semantic = memory.semantic
        return [
            semantic.get_related_entities(f"{marker} {words[0]}", depth=2),
            semantic.search_entities(marker),
            semantic.get_entity(f"{marker} {words[0]}"),
            semantic.get_facts(f"{marker} {words[0]}", include_history=True),
            semantic.export_knowledge_graph("json"),
            semantic.export_knowledge_graph("graphml"),
        ]
    elif op == "export":
        path = tmp / f"export-{uuid.uuid4().hex}.json"
        memory.manager.export_user(None, path)
        exported = path.read_text(encoding="utf-8")
        assert json.loads(exported)["user_id"] == actor
        return [exported, memory.manager.export_session(session, format="json")]
    elif op == "timeline":
        return [memory.episodic.get_timeline(), memory.episodic.find_patterns(), memory.get_all()]
    elif op == "working":
        return [memory.working.get_recent(50), memory.working.get_stats()]
    elif op == "erase" and choice == 0:  # a user's right to erasure: theirs only
        report = memory.manager.forget_user()
        world.ids[actor].clear()
        for key in [k for k in world._kbs if k[0] == actor]:
            world._kbs.pop(key).close()
        return report
    return None


def check_run(world: World, tmp: Path, steps: list[tuple[Any, ...]]) -> None:
    for op, actor_i, target_i, words, session, namespace, choice in steps:
        actor = world.users[actor_i]
        started = time.perf_counter()
        before = {u: world.snapshot(u) for u in world.users if u != actor}
        result = run_step(world, tmp, op, actor_i, target_i, words, session, namespace, choice)
        world.assert_only(actor, result, fishing_query(world, target_i, words))
        for user, state in before.items():
            assert world.snapshot(user) == state, f"{op} by {actor} changed the data of {user}"
        TIMES.setdefault(op, []).append(time.perf_counter() - started)


@pytest.fixture(scope="module", autouse=True)
def figures() -> Any:
    yield
    steps = sum(len(v) for v in TIMES.values())
    examples = next(_counter)
    print(
        f"\nisolation: {examples} worlds ({3 * examples} users), {steps} steps over {len(TIMES)} operations "
        f"({', '.join(f'{op} {len(v)}' for op, v in sorted(TIMES.items()))}); no leak, no cross-user change"
    )


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(steps=st.lists(step, min_size=8, max_size=14))
def test_no_path_crosses_users(shared_dir: Path, tmp_path: Path, steps: list[tuple[Any, ...]]) -> None:
    world = World(shared_dir)
    try:
        check_run(world, tmp_path, steps)
    finally:
        world.close()


def test_every_operation_is_exercised(shared_dir: Path, tmp_path: Path) -> None:
    """A fixed walk through every operation in both directions (the property test samples them)."""
    world = World(shared_dir)
    try:
        plan = []
        for op in OPS:
            plan.append((op, 0, 1, ["river", "ticket"], "s1", "docs", 0))
            plan.append((op, 1, 0, ["garden", "Lisbon"], "s2", "docs", 1))
        seed = [("add", u, 0, ["coffee"], "s1", "docs", 1) for u in range(3)]
        seed += [("fact", u, 0, ["doctor", "train"], "s1", "docs", 0) for u in range(3)]
        seed += [("kb_add", u, 0, ["password"], "s1", "docs", 0) for u in range(3)]
        check_run(world, tmp_path, seed + plan)
    finally:
        world.close()


@pytest.mark.slow
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(steps=st.lists(step, min_size=10, max_size=30))
def test_no_path_crosses_users_long(shared_dir: Path, tmp_path: Path, steps: list[tuple[Any, ...]]) -> None:
    world = World(shared_dir)
    try:
        check_run(world, tmp_path, steps)
    finally:
        world.close()
